/* smelt's own math functions (templates/common/math.h.in) for code compiled
 * into the host: the qualifiers and bit helpers the file expects of its
 * includer, then the file: tests/test-math.c tests this very code (the
 * kernels include it through their preludes, constant folding through the
 * block primitives). */
#ifndef SMELT_MATHLIB_H
#define SMELT_MATHLIB_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define SMELT_MF static inline
#define SMELT_MF_SLOW static
#define SMELT_MTAB static const
static inline double smelt_f64_bits(uint64_t u)
{
    double f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint64_t smelt_bits_f64(double f)
{
    uint64_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float smelt_f32_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static inline uint32_t smelt_bits_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
#include "../templates/common/math.h.in"

/* y = fn(x) over n elements (a multiple of 128) as the CC tier's C groups
 * compute exp, sin, cos and tan (src/codegen/emit-loop.c, c_group): the
 * small-range form smelt_<fn>_f32_w over a group, then the function over
 * the group again where an argument lay outside the range */
#define SMELT_GROUPS(fn, x, y, n)                                                                             \
    for (int g_ = 0; g_ < (n); g_ += 128) {                                                                   \
        uint32_t w_ = 0;                                                                                      \
        for (int i_ = g_; i_ < g_ + 128; i_++)                                                                \
            (y)[i_] = smelt_##fn##_f32_w((x)[i_], &w_);                                                       \
        if (w_ > SMELT_W_MAX)                                                                                 \
            for (int i_ = g_; i_ < g_ + 128; i_++)                                                            \
                (y)[i_] = smelt_##fn##_f32((x)[i_]);                                                          \
    }

#endif
