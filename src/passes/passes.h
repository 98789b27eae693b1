/* Passes over the lowered program (opt_level >= 1). */
#ifndef SMELT_PASSES_H
#define SMELT_PASSES_H
#include "ir.h"

/* Passes; each returns the number of instructions it removed or replaced. */
int smelt__pass_fold(smelt__prog *p);
int smelt__pass_cse(smelt__prog *p);
int smelt__pass_dce(smelt__prog *p);
/* Algebraic identities (x * 1, neg(neg(x)), ...) and dead branches (where
 * with a constant condition or equal branches); *branches counts the
 * latter, the return value the former. */
int smelt__pass_simplify(smelt__prog *p, int *branches);
/* Layout folding: views of values computed elementwise moved to their
 * operands (src/passes/views.c); the number moved. */
int smelt__pass_views(smelt__prog *p);
/* A per-channel scale and shift (batch-norm, bias) after a convolution with
 * constant weights folded into the weights and one add (src/passes/convfold.c);
 * the number of convolutions so changed. */
int smelt__pass_conv_affine(smelt__prog *p);

#endif
