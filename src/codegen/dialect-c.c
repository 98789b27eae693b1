/* The C dialect (TinyCC and the system C compiler). */
#include "codegen.h"

const smelt__dialect smelt__dialect_c = {
    .name = "c",
    .dir = "c",
    .ext = "c",
    SMELT_C_NAMES,
    .restrict_kw = "restrict",
};
