/* libFuzzer harnesses (tests/fuzz/fuzz-*.c): one entry point each,
 * LLVMFuzzerTestOneInput.  Built with -fsanitize=fuzzer by scripts/fuzz
 * (clang), and with replay.c (any compiler) as the test suite's replay of
 * the seed corpora in tests/fuzz/corpus/.  A failed check traps. */
#ifndef SMELT_FUZZ_H
#define SMELT_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smelt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every error has a message (the library's promise). */
static inline void fuzz_check_error(smelt_ctx *ctx, int st, const char *what)
{
    if (st < 0 && !*smelt_errmsg(ctx)) {
        fprintf(stderr, "%s: status %d (%s) without a message\n", what, st, smelt_strerror(st));
        abort();
    }
}

/* A bad index is SMELT_ERR_INDEX whose message says which (src/runtime/exec.c). */
static inline void fuzz_check_index(smelt_ctx *ctx, int st, const char *what)
{
    fuzz_check_error(ctx, st, what);
    if (st == SMELT_ERR_INDEX && !strstr(smelt_errmsg(ctx), "out of range")) {
        fprintf(stderr, "%s: SMELT_ERR_INDEX with the message '%s'\n", what, smelt_errmsg(ctx));
        abort();
    }
}

/* One context for the process, TCC kernels, no persistent cache. */
static inline smelt_ctx *fuzz_ctx(void)
{
    static smelt_ctx *ctx;
    if (!ctx) {
        setenv("SMELT_CACHE", "0", 1);
        if (smelt_ctx_new(&ctx) || smelt_ctx_set_backend(ctx, "TCC") || smelt_ctx_set_threads(ctx, 1))
            abort();
    }
    return ctx;
}

/* The input as a NUL-terminated string (NULL when out of memory). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (s) {
        for (size_t i = 0; i < size; i++)
            s[i] = (char)data[i];
        s[size] = 0;
    }
    return s;
}

/* Fill a new (contiguous) tensor with small values of its dtype. */
static inline void fuzz_fill(smelt_tensor *t)
{
    char *p = smelt_tensor_data(t);
    for (int64_t i = 0, n = smelt_tensor_numel(t); i < n; i++) {
        double v = (double)(i % 7) - 2.5;
        switch (smelt_tensor_dtype(t)) {
        case SMELT_F32: ((float *)p)[i] = (float)v; break;
        case SMELT_F64: ((double *)p)[i] = v; break;
        case SMELT_I32: ((int32_t *)p)[i] = (int32_t)(i % 7) - 2; break;
        case SMELT_I64: ((int64_t *)p)[i] = (int64_t)(i % 7) - 2; break;
        case SMELT_U8: ((uint8_t *)p)[i] = (uint8_t)(i % 7); break;
        case SMELT_BOOL: ((uint8_t *)p)[i] = (uint8_t)(i % 2); break;
        case SMELT_F16: ((uint16_t *)p)[i] = (uint16_t)(0x3c00 + i % 7); break;
        case SMELT_BF16: ((uint16_t *)p)[i] = (uint16_t)(0x3f80 + i % 7); break;
        default: break;
        }
    }
}

/* Small inputs only: a plan on a hostile graph is built, but run only when
 * its inputs hold at most this many elements. */
#define FUZZ_MAX_RUN_ELEMS 4096

#endif
