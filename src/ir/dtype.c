/* dtype and operator tables, NumPy type promotion. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir.h"

#define F SMELT_DT_F
#define I SMELT_DT_I
#define U SMELT_DT_U
#define B SMELT_DT_B
#define FIUB (F | I | U | B)
#define FIU (F | I | U)
#define IU (I | U)

const smelt__opinfo smelt__ops[SMELT_OP_COUNT] = {
#define SMELT_OP(ID, nm, n, cls, rule, dts, cf, ci, ref) \
    [SMELT_OP_##ID] = {#nm, n, SMELT_CLASS_##cls, SMELT_RULE_##rule, dts, cf, ci, SMELT_IDENT_NONE},
#define SMELT_REDUCE(ID, nm, rule, dts, cf, ci, ref, ident) \
    [SMELT_OP_##ID] = {#nm, 1, SMELT_CLASS_REDUCE, SMELT_RULE_##rule, dts, cf, ci, SMELT_IDENT_##ident},
#include "ops.def"
#undef SMELT_OP
#undef SMELT_REDUCE
};

smelt_dtype smelt__red_result(smelt_op op, smelt_dtype dt)
{
    bool fl = smelt__is_float(dt);
    switch (smelt__ops[op].rule) {
    case SMELT_RULE_SUM: return fl ? dt : SMELT_I64;
    case SMELT_RULE_MEAN: return fl ? dt : SMELT_F64;
    case SMELT_RULE_ARG: return SMELT_I64;
    case SMELT_RULE_BOOL: return SMELT_BOOL;
    default: return dt;
    }
}

smelt_dtype smelt__red_acc(smelt_op op, smelt_dtype dt)
{
    int rule = smelt__ops[op].rule;
    if (rule == SMELT_RULE_BOOL)
        return SMELT_BOOL;
    if (rule == SMELT_RULE_SAME || rule == SMELT_RULE_ARG)
        return smelt__compute_dtype(dt);
    if (smelt__is_half(dt))
        return SMELT_F32; /* f16/bf16 sums and means: f32, rounded once */
    if (smelt__is_float(dt))
        return SMELT_F64; /* f32 sums and means: f64, rounded once */
    return rule == SMELT_RULE_MEAN ? SMELT_F64 : SMELT_I64;
}

double smelt__red_identity(smelt_op op, smelt_dtype acc)
{
    int id = smelt__ops[op].ident;
    bool lo = id == SMELT_IDENT_LOWEST;
    if (id == SMELT_IDENT_ZERO || id == SMELT_IDENT_ONE)
        return id == SMELT_IDENT_ONE;
    switch (acc) {
    case SMELT_I64: return lo ? -9223372036854775808.0 : 9223372036854775807.0;
    case SMELT_I32: return lo ? -2147483648.0 : 2147483647.0;
    case SMELT_U8: return lo ? 0 : 255;
    case SMELT_BOOL: return lo ? 0 : 1;
    default: return lo ? -INFINITY : INFINITY;
    }
}

void smelt__red_shape(int ndim, const int64_t *in, unsigned mask, bool keepdims, int *ondim, int64_t *out)
{
    int k = 0;
    for (int d = 0; d < ndim; d++)
        if (!(mask >> d & 1u))
            out[k++] = in[d];
        else if (keepdims)
            out[k++] = 1;
    *ondim = k;
}

int64_t smelt__red_count(int ndim, const int64_t *in, unsigned mask)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++)
        if (mask >> d & 1u)
            n *= in[d];
    return n;
}

const smelt__dtinfo smelt__dtypes[SMELT_DTYPE_COUNT] = {
    [SMELT_F32] = {"f32", 4, F},  [SMELT_F64] = {"f64", 8, F}, [SMELT_I32] = {"i32", 4, I},
    [SMELT_I64] = {"i64", 8, I},  [SMELT_U8] = {"u8", 1, U},   [SMELT_BOOL] = {"bool", 1, B},
    [SMELT_F16] = {"f16", 2, F},  [SMELT_BF16] = {"bf16", 2, F},
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
                   {"int64", SMELT_I64},   {"uint8", SMELT_U8},    {"bool_", SMELT_BOOL},
                   {"float16", SMELT_F16}, {"bfloat16", SMELT_BF16}};
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
    /* rows/cols: f32 f64 i32 i64 u8 bool f16 bf16 */
    enum { f32 = SMELT_F32, f64 = SMELT_F64, i32 = SMELT_I32, i64 = SMELT_I64, u8 = SMELT_U8,
           bo = SMELT_BOOL, f16 = SMELT_F16, bf16 = SMELT_BF16 };
    static const unsigned char t[8][8] = {
        /* f32 */ {f32, f64, f64, f64, f32, f32, f32, f32},
        /* f64 */ {f64, f64, f64, f64, f64, f64, f64, f64},
        /* i32 */ {f64, f64, i32, i64, i32, i32, f64, f64},
        /* i64 */ {f64, f64, i64, i64, i64, i64, f64, f64},
        /* u8  */ {f32, f64, i32, i64, u8, u8, f16, bf16},
        /* bool*/ {f32, f64, i32, i64, u8, bo, f16, bf16},
        /* f16 */ {f32, f64, f64, f64, f16, f16, f16, f32},
        /* bf16*/ {f32, f64, f64, f64, bf16, bf16, f32, bf16},
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

void smelt__blk_name(char *name, smelt_op op, smelt_dtype dt, smelt_dtype to)
{
    bool cast = op == SMELT_OP_CAST;
    snprintf(name, SMELT_BLK_NAME_MAX, "smelt_blk_%s_%s%s%s", smelt__ops[op].name, smelt__dtypes[dt].name,
             cast ? "_" : "", cast ? smelt__dtypes[to].name : "");
}

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

/* ---- f16 and bf16 -------------------------------------------------------
 * Rounding from a double as the kernels' helpers (templates/common/prelude.h.in)
 * round: rebias the exponent and round the dropped bits to nearest even.
 * Subnormal results here come from one addition that rounds at the
 * subnormal spacing (2^-24 for f16, 2^-133 for bf16); the kernels shift
 * instead (integer code vectorises).  Both agree on every f32 and on random
 * doubles (checked exhaustively when written; tests/test-half.c checks both
 * against a third, plain implementation). */
static uint64_t dbits(double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    return u;
}

static double bitsd(uint64_t u)
{
    double v;
    memcpy(&v, &u, 8);
    return v;
}

uint16_t smelt__f16_from_double(double v)
{
    uint64_t u = dbits(v), a = u & 0x7fffffffffffffffULL;
    unsigned s = (unsigned)(u >> 48) & 0x8000u, r;
    if (a > 0x7ff0000000000000ULL) /* NaN */
        r = 0x7e00u | (unsigned)((a >> 42) & 0x1ffu);
    else if (a >= 0x40effe0000000000ULL) /* 65520 and beyond: infinity */
        r = 0x7c00u;
    else if (a >= 0x3f10000000000000ULL) { /* normal: 2^-14 and beyond */
        uint64_t t = a - 0x3f00000000000000ULL;
        r = (unsigned)((t + 0x1ffffffffffULL + ((t >> 42) & 1)) >> 42);
    } else /* subnormal or zero, in units of 2^-24 */
        r = (unsigned)(dbits(bitsd(a) + 0x1p28) - dbits(0x1p28));
    return (uint16_t)(s | r);
}

uint16_t smelt__bf16_from_double(double v)
{
    uint64_t u = dbits(v), a = u & 0x7fffffffffffffffULL;
    unsigned s = (unsigned)(u >> 48) & 0x8000u, r;
    if (a > 0x7ff0000000000000ULL)
        r = 0x7fc0u | (unsigned)((a >> 45) & 0x7fu);
    else if (a >= 0x47eff00000000000ULL) /* 2^128 - 2^119 and beyond: infinity */
        r = 0x7f80u;
    else if (a >= 0x3810000000000000ULL) { /* normal: 2^-126 and beyond */
        uint64_t t = a - 0x3800000000000000ULL;
        r = (unsigned)((t + 0xfffffffffffULL + ((t >> 45) & 1)) >> 45);
    } else /* subnormal or zero, in units of 2^-133 */
        r = (unsigned)(dbits(bitsd(a) + 0x1p-81) - dbits(0x1p-81));
    return (uint16_t)(s | r);
}

double smelt__f16_to_double(uint16_t h)
{
    unsigned e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    double v;
    if (e == 31)
        return bitsd(((uint64_t)(h & 0x8000u) << 48) | 0x7ff0000000000000ULL | ((uint64_t)m << 42));
    v = e ? ldexp((double)(m | 0x400u), (int)e - 25) : ldexp((double)m, -24);
    return (h & 0x8000u) ? -v : v;
}

double smelt__bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return (double)f;
}

double smelt__dtype_round_result(smelt_dtype d, double v)
{
    return smelt__dtype_round(d, smelt__is_half(d) ? (double)(float)v : v);
}

double smelt__dtype_round(smelt_dtype d, double v)
{
    switch (d) {
    case SMELT_F16: return smelt__f16_to_double(smelt__f16_from_double(v));
    case SMELT_BF16: return smelt__bf16_to_double(smelt__bf16_from_double(v));
    case SMELT_F32: return (double)(float)v;
    case SMELT_F64: return v;
    case SMELT_I32: return wrap_int(v, 32, true);
    case SMELT_I64: return wrap_int(v, 64, true);
    case SMELT_U8: return wrap_int(v, 8, false);
    case SMELT_BOOL: return v != 0;
    default: return v;
    }
}

int smelt_dtype_is_float(smelt_dtype dt) { return smelt__dtype_valid((int)dt) && smelt__is_float(dt); }
double smelt_dtype_round(smelt_dtype dt, double v) { return smelt__dtype_round(dt, v); }
