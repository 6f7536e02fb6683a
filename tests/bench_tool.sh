#!/usr/bin/env bash
# The benchmark tool's own behaviour: the tour covers every operator family; the alternatives beside attention
# and indexer run, agree with dsops's output and report a speed-up; a broken alternative makes the run fail
# with a message instead of passing silently.
# usage: bench_tool.sh DSOPS_BINARY
set -uo pipefail
dsops=$1
fail() { echo "FAIL: $*"; exit 1; }

list=$("$dsops" bench --suite tour --list) || fail "tour --list"
for op in sparse_flash_attention_v32 lightning_indexer mla_prolog_v32 indexer_prolog_v32 sparse_attention_v32 \
          hc_pre hc_post mla_prolog_v4 indexer_prolog_v4 compressor "sas (swa)" "sas (cfa)" "sas (scfa)"; do
  grep -qF "$op" <<<"$list" || fail "the tour has no $op case"
done
echo "tour: $(wc -l <<<"$list") cases, every family"

have_numpy=0
python3 -c 'import numpy' 2>/dev/null && have_numpy=1
for case in v32_li_bf16_b2_s3_kv122 v4_li_b1_s16_kv130 v32_sfa_b4_s2_int8_mixed; do
  out=$("$dsops" bench "$case" --threads 2 --budget 0.05 --alternatives 2>/dev/null) || { echo "$out"; fail "$case"; }
  echo "$out" | grep -E "composite|numpy|torch|dsops .*x"
  grep -qE "^  composite: .* ok$" <<<"$out" || fail "$case: no agreeing composite row"
  grep -qE "dsops [0-9.]+x composite" <<<"$out" || fail "$case: no speed-up over the composite"
  if [ $have_numpy = 1 ]; then
    grep -qE "^  numpy: .* ok$" <<<"$out" || fail "$case: no agreeing NumPy row"
  fi
done

out=$(DSOPS_ALTERNATIVES=/nonexistent/alternatives.py "$dsops" bench v32_li_bf16_b2_s3_kv122 --threads 1 \
      --budget 0.05 --alternatives 2>&1)
rc=$?
if [ $have_numpy = 1 ]; then
  [ $rc -ne 0 ] || fail "a missing alternatives script did not fail the run"
  grep -q "numpy failed" <<<"$out" || fail "no message for the failed alternative"
fi
echo "PASS"
