/* smelt's own f32 convolution kernel (AVX-512, src/runtime/convk.c) */
#ifndef SMELT_CONVK_H
#define SMELT_CONVK_H
#include <stdbool.h>
#include <stdint.h>

#define CK_R 6      /* output channels a register block */
#define CK_V 4      /* vectors of 16 columns a register block */
#define CK_PANEL 24576 /* bytes of input rows a part of the sum reads (L1's share) */

/* whether this CPU (and build) runs the kernel */
bool smelt__convk_ok(void);
/* y[o * ys + j] = sum over taps t < KH KW, channels c < Cg of
 * wp[packed (o, t, c)] * x[c * xc + toff[t] + j] for o < Og, j < mt, in
 * that order (taps, then channels), one fused multiply-add at a time.
 * span: how far a row of taps (one kh) reaches past its first tap's
 * columns (elements), to size the parts (convk.c).
 * wp: blocks of CK_R output channels (the last one the rest), each
 * [T][Cg][rows of the block]: block b at wp + b CK_R T Cg. */
void smelt__convk_tile(const float *x, int64_t xc, const int64_t *toff, int64_t KH, int64_t KW, int64_t span,
                       int64_t Cg, const float *wp, int64_t Og, float *y, int64_t ys, int64_t mt);

#endif
