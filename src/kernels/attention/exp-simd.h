/* fp32 exp shared by the SIMD tiers (included by kernel files compiled with their ISA flags).
 * x = n*ln2 + r with |r| <= ln2/2 (Cody-Waite split of ln2), exp(r) by its degree-7 Taylor
 * polynomial (truncation < 0.1 ulp), 2^n applied as two exact power-of-two factors so results in
 * the subnormal range round once. Max error about 1 ulp (tests check <= 2 ulp against expf). */
#ifndef DSOPS_EXP_SIMD_H
#define DSOPS_EXP_SIMD_H

#define DSOPS_EXP_LOG2E 1.44269504088896341f
#define DSOPS_EXP_LN2_HI 0.693145751953125f
#define DSOPS_EXP_LN2_LO 1.42860676533018672e-06f
#define DSOPS_EXP_MIN (-104.0f) /* below: result rounds to +0 */
#define DSOPS_EXP_MAX 89.0f     /* above: result overflows to +Inf */
#define DSOPS_EXP_C2 (1.0f / 2.0f)
#define DSOPS_EXP_C3 (1.0f / 6.0f)
#define DSOPS_EXP_C4 (1.0f / 24.0f)
#define DSOPS_EXP_C5 (1.0f / 120.0f)
#define DSOPS_EXP_C6 (1.0f / 720.0f)
#define DSOPS_EXP_C7 (1.0f / 5040.0f)

#endif
