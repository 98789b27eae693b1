/* dtype and operator tables, NumPy type promotion. */
#include <math.h>
#include <string.h>

#include "internal.h"

#define F SMELT_DT_F
#define I SMELT_DT_I
#define U SMELT_DT_U
#define B SMELT_DT_B
#define FIUB (F | I | U | B)
#define FIU (F | I | U)
#define IU (I | U)

const smelt__opinfo smelt__ops[SMELT_OP_COUNT] = {
#define SMELT_OP(ID, nm, n, cls, rule, dts, cf, ci, ref) \
    [SMELT_OP_##ID] = {#nm, n, SMELT_CLASS_##cls, SMELT_RULE_##rule, dts, cf, ci},
#include "ops.def"
#undef SMELT_OP
};

const smelt__dtinfo smelt__dtypes[SMELT_DTYPE_COUNT] = {
    [SMELT_F32] = {"f32", 4, F},  [SMELT_F64] = {"f64", 8, F}, [SMELT_I32] = {"i32", 4, I},
    [SMELT_I64] = {"i64", 8, I},  [SMELT_U8] = {"u8", 1, U},   [SMELT_BOOL] = {"bool", 1, B},
};

bool smelt__dtype_valid(int d) { return d >= 0 && d < SMELT_DTYPE_COUNT; }

const char *smelt_dtype_name(smelt_dtype dt)
{
    return smelt__dtype_valid((int)dt) ? smelt__dtypes[dt].name : NULL;
}

int smelt_dtype_from_name(const char *name)
{
    static const struct {
        const char *alias;
        smelt_dtype dt;
    } aliases[] = {{"float32", SMELT_F32}, {"float64", SMELT_F64}, {"int32", SMELT_I32},
                   {"int64", SMELT_I64},   {"uint8", SMELT_U8},    {"bool_", SMELT_BOOL}};
    if (!name)
        return SMELT_ERR_DTYPE;
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++)
        if (!strcmp(name, smelt__dtypes[d].name))
            return d;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(name, aliases[i].alias))
            return (int)aliases[i].dt;
    return SMELT_ERR_DTYPE;
}

size_t smelt_dtype_size(smelt_dtype dt) { return smelt__dtype_valid((int)dt) ? smelt__dtypes[dt].size : 0; }

smelt_dtype smelt_dtype_promote(smelt_dtype a, smelt_dtype b)
{
    /* rows/cols: f32 f64 i32 i64 u8 bool */
    static const unsigned char t[6][6] = {
        /* f32 */ {SMELT_F32, SMELT_F64, SMELT_F64, SMELT_F64, SMELT_F32, SMELT_F32},
        /* f64 */ {SMELT_F64, SMELT_F64, SMELT_F64, SMELT_F64, SMELT_F64, SMELT_F64},
        /* i32 */ {SMELT_F64, SMELT_F64, SMELT_I32, SMELT_I64, SMELT_I32, SMELT_I32},
        /* i64 */ {SMELT_F64, SMELT_F64, SMELT_I64, SMELT_I64, SMELT_I64, SMELT_I64},
        /* u8  */ {SMELT_F32, SMELT_F64, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_U8},
        /* bool*/ {SMELT_F32, SMELT_F64, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL},
    };
    if (!smelt__dtype_valid((int)a) || !smelt__dtype_valid((int)b))
        return SMELT_F64;
    return (smelt_dtype)t[a][b];
}

const char *smelt_op_name(smelt_op op)
{
    return ((int)op >= 0 && op < SMELT_OP_COUNT) ? smelt__ops[op].name : NULL;
}

int smelt_op_from_name(const char *name)
{
    if (name)
        for (int i = 0; i < SMELT_OP_COUNT; i++)
            if (!strcmp(name, smelt__ops[i].name))
                return i;
    return SMELT_ERR_INVALID_ARG;
}

int smelt_op_arity(smelt_op op) { return ((int)op >= 0 && op < SMELT_OP_COUNT) ? smelt__ops[op].arity : -1; }

static double wrap_int(double v, int bits, bool is_signed)
{
    if (!isfinite(v))
        return 0;
    /* Values already in range are returned as they are: going through
     * [0, 2^64) would round, e.g. -3 + 2^64 is 2^64 in double (so every
     * small negative i64 became 0). Otherwise fmod is exact and one
     * correction by m is exact too (Sterbenz). */
    double m = ldexp(1.0, bits), t = trunc(v);
    double lo = is_signed ? -m / 2 : 0, hi = is_signed ? m / 2 : m;
    if (t >= lo && t < hi)
        return t;
    double r = fmod(t, m);
    if (r < lo)
        r += m;
    else if (r >= hi)
        r -= m;
    return r;
}

double smelt__dtype_round(smelt_dtype d, double v)
{
    switch (d) {
    case SMELT_F32: return (double)(float)v;
    case SMELT_F64: return v;
    case SMELT_I32: return wrap_int(v, 32, true);
    case SMELT_I64: return wrap_int(v, 64, true);
    case SMELT_U8: return wrap_int(v, 8, false);
    case SMELT_BOOL: return v != 0;
    default: return v;
    }
}
