/* smelt's own f32 convolution kernel for x86-64 CPUs with AVX-512 (F):
 * the products of conv_taps (src/runtime/window.c) without BLAS.
 *
 * For a group of an image, out[o, m] = sum over taps t, channels c of
 * W[t][o][c] * X[c, m + off_t] (off_t the tap's shift in its phase's flat
 * grid, window.c).  A block of up to CK_R output channels times up to
 * CK_V vectors of 16 columns accumulates in zmm registers over every tap
 * and channel and is stored once.  Each output element is one chain of
 * fused multiply-adds, starting from 0, over the taps in order (kh then
 * kw) and, within a tap, over the group's channels in order: the bits do
 * not depend on the tiles, the thread count or the CPU.
 *
 * The functions are compiled for AVX-512 by attribute, so the library
 * still runs on any x86-64: window.c calls them only where the CPU has
 * AVX-512 (smelt__x86_level).  Other compilers and architectures get
 * smelt__convk_ok() false and the products stay BLAS's. */
#include <stdbool.h>
#include <stdint.h>

#include "convk.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define CK_TARGET __attribute__((target("avx512f,fma")))
#define CK_INLINE static inline __attribute__((always_inline)) CK_TARGET

/* a part of the sum: taps [t0, t1), of each channels [c0, c1) of Cg */
typedef struct {
    int64_t t0, t1, c0, c1, Cg;
    bool first; /* the sum's first part: from 0, else from the stored block */
} ck_part;

/* The block's part over taps [t0, t1) and, of each, channels [c0, c1):
 * acc[r][v] = (first ? 0 : the block as stored) + w[t][c][r] x[c][16 v ...]
 * in that order, then the block stored (the last vector through mask
 * `last`).  w: the block's [T][Cg][R] weights. */
CK_INLINE void ck_block(const int R, const int V, __mmask16 last, const float *x, int64_t xc, const int64_t *toff,
                        const ck_part *k, const float *w, float *y, int64_t ys)
{
    __m512 acc[CK_R][CK_V];
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int v = 0; v < V; v++)
            acc[r][v] = k->first ? _mm512_setzero_ps()
                        : v == V - 1 ? _mm512_maskz_loadu_ps(last, y + r * ys + 16 * v)
                                     : _mm512_loadu_ps(y + r * ys + 16 * v);
    for (int64_t t = k->t0; t < k->t1; t++) {
        const float *xp = x + toff[t] + k->c0 * xc, *wp = w + (t * k->Cg + k->c0) * R;
        for (int64_t c = k->c0; c < k->c1; c++, xp += xc, wp += R) {
            __m512 xv[CK_V];
#pragma GCC unroll 8
            for (int v = 0; v < V; v++)
                xv[v] = v == V - 1 ? _mm512_maskz_loadu_ps(last, xp + 16 * v) : _mm512_loadu_ps(xp + 16 * v);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) {
                __m512 wb = _mm512_set1_ps(wp[r]);
#pragma GCC unroll 8
                for (int v = 0; v < V; v++)
                    acc[r][v] = _mm512_fmadd_ps(wb, xv[v], acc[r][v]);
            }
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int v = 0; v < V; v++) {
            if (v == V - 1)
                _mm512_mask_storeu_ps(y + r * ys + 16 * v, last, acc[r][v]);
            else
                _mm512_storeu_ps(y + r * ys + 16 * v, acc[r][v]);
        }
}

typedef void (*ck_fn)(__mmask16, const float *, int64_t, const int64_t *, const ck_part *, const float *, float *,
                      int64_t);
#define CK_DEF(R, V)                                                                                                 \
    static CK_TARGET void ck_##R##_##V(__mmask16 last, const float *x, int64_t xc, const int64_t *toff,              \
                                       const ck_part *k, const float *w, float *y, int64_t ys)                        \
    {                                                                                                                \
        ck_block(R, V, last, x, xc, toff, k, w, y, ys);                                                              \
    }
#define CK_ROW(R) CK_DEF(R, 1) CK_DEF(R, 2) CK_DEF(R, 3) CK_DEF(R, 4)
CK_ROW(1) CK_ROW(2) CK_ROW(3) CK_ROW(4) CK_ROW(5) CK_ROW(6)
#define CK_FNS(R) {ck_##R##_1, ck_##R##_2, ck_##R##_3, ck_##R##_4}
static const ck_fn ck_fns[CK_R][CK_V] = {CK_FNS(1), CK_FNS(2), CK_FNS(3), CK_FNS(4), CK_FNS(5), CK_FNS(6)};

bool smelt__convk_ok(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

/* The sum cut into parts whose rows of the input (over a block of CK_V
 * vectors of columns) stay in L1 while the blocks of output channels
 * take turns: a row of taps (KW of them, one kh) over every channel where
 * those rows fit CK_PANEL bytes, else one tap over CK_PANEL's worth of
 * channels.  The parts follow the sum's order (taps, then channels), so
 * each element is the same chain of fused multiply-adds however it is
 * cut; the cut depends on the shape only. */
void smelt__convk_tile(const float *x, int64_t xc, const int64_t *toff, int64_t KH, int64_t KW, int64_t span,
                       int64_t Cg, const float *wp, int64_t Og, float *y, int64_t ys, int64_t mt)
{
    const int64_t NB = 16 * CK_V, T = KH * KW;
    bool rows = Cg * (NB + span) * (int64_t)sizeof(float) <= CK_PANEL;
    int64_t cc = rows ? Cg : CK_PANEL / (NB * (int64_t)sizeof(float));
    cc = cc < 1 ? 1 : cc > Cg ? Cg : cc;
    for (int64_t j = 0; j < mt; j += NB) {
        int64_t n = mt - j < NB ? mt - j : NB;
        int V = (int)((n + 15) / 16);
        __mmask16 last = (__mmask16)(n % 16 ? (1u << (n % 16)) - 1 : 0xffffu);
        for (int64_t t = 0; t < T; t += rows ? KW : 1)
            for (int64_t c = 0; c < Cg; c += cc) {
                ck_part k = {t, rows ? t + KW : t + 1, c, c + cc < Cg ? c + cc : Cg, Cg, t == 0 && c == 0};
                for (int64_t o = 0; o < Og; o += CK_R) {
                    int R = Og - o < CK_R ? (int)(Og - o) : CK_R;
                    ck_fns[R - 1][V - 1](last, x + j, xc, toff, &k, wp + o * T * Cg, y + o * ys + j, ys);
                }
            }
    }
}
#else
bool smelt__convk_ok(void)
{
    return false;
}

void smelt__convk_tile(const float *x, int64_t xc, const int64_t *toff, int64_t KH, int64_t KW, int64_t span,
                       int64_t Cg, const float *wp, int64_t Og, float *y, int64_t ys, int64_t mt)
{
    (void)x, (void)xc, (void)toff, (void)KH, (void)KW, (void)span, (void)Cg, (void)wp, (void)Og, (void)y, (void)ys,
        (void)mt;
}
#endif
