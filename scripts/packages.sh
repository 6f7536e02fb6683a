# shellcheck shell=bash
# Sourced by scripts/setup.sh and scripts/fuzz.sh (Debian and Ubuntu).

# install_missing_packages <package>...: apt-get installs those of the named packages that dpkg lacks, through
# sudo unless root.
install_missing_packages() {
  local need=() pkg sudo=""
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  [ ${#need[@]} -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
}
