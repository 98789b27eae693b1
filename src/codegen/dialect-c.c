/* The C dialect (TinyCC and the system C compiler). */
#include "codegen.h"

const smelt__dialect smelt__dialect_c = {
    .dir = "c",
    .ext = "c",
    SMELT_C_NAMES,
    .restrict_kw = "restrict",
    .helper_kw = "static inline",
    .math_kw = "static inline",
    .math_slow_kw = "static __attribute__((noinline))",
    .table_kw = "static const",
    .libm_decls = true,
    .args = "",
};
