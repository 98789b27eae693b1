/* The fuzz harnesses without libFuzzer: every file of the seed corpus
 * folders given, then mutations of them (byte flips, insertions, deletions,
 * splices of two seeds; a fixed pseudo-random sequence, SMELT_TEST_SEED
 * mixes into it), through LLVMFuzzerTestOneInput.  The test suite runs this
 * with any compiler; scripts/fuzz runs the real fuzzer.
 *
 *   fuzz-replay-<target> CORPUS_DIR... [-n MUTATIONS] */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"

typedef struct seed {
    uint8_t *data;
    size_t size;
} seed;

static uint64_t rng_state;
static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int load_dir(const char *dir, seed **v, int *n)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz-replay: cannot open %s\n", dir);
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        uint8_t *buf = malloc(1 << 20);
        size_t got = buf ? fread(buf, 1, 1 << 20, f) : 0;
        fclose(f);
        seed *nv = realloc(*v, sizeof **v * (size_t)(*n + 1));
        if (!buf || !nv) {
            free(buf);
            closedir(d);
            return -1;
        }
        *v = nv;
        (*v)[(*n)++] = (seed){buf, got};
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    seed *v = NULL;
    int n = 0;
    long mutations = 2000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc)
            mutations = atol(argv[++i]);
        else if (load_dir(argv[i], &v, &n))
            return 2;
    }
    if (!n) {
        fprintf(stderr, "fuzz-replay: no seeds (give corpus folders)\n");
        return 2;
    }
    const char *s = getenv("SMELT_TEST_SEED");
    rng_state = s ? strtoull(s, NULL, 10) : 1;
    for (int i = 0; i < n; i++)
        LLVMFuzzerTestOneInput(v[i].data, v[i].size);
    uint8_t *buf = malloc(1 << 21);
    if (!buf)
        return 2;
    for (long m = 0; m < mutations; m++) {
        const seed *a = &v[rnd() % (uint64_t)n], *b = &v[rnd() % (uint64_t)n];
        size_t len = a->size;
        memcpy(buf, a->data, len);
        for (int k = 0, edits = 1 + (int)(rnd() % 4); k < edits; k++) {
            uint64_t r = rnd();
            size_t at = len ? (size_t)(r >> 8) % len : 0;
            switch (r % 5) {
            case 0: /* flip a byte */
                if (len)
                    buf[at] ^= (uint8_t)(1u << (rnd() % 8));
                break;
            case 1: /* an interesting byte */
                if (len)
                    buf[at] = "09-(),[]'\"%=e.\xff\x00 \n9"[rnd() % 20];
                break;
            case 2: /* delete a run */
                if (len) {
                    size_t k2 = 1 + (size_t)(rnd() % 8);
                    k2 = k2 > len - at ? len - at : k2;
                    memmove(buf + at, buf + at + k2, len - at - k2);
                    len -= k2;
                }
                break;
            case 3: /* duplicate a run */
                if (len && len < (1 << 20)) {
                    size_t k2 = 1 + (size_t)(rnd() % 16);
                    k2 = k2 > len - at ? len - at : k2;
                    memmove(buf + at + k2, buf + at, len - at);
                    len += k2;
                }
                break;
            default: /* splice: the tail of another seed */
                if (b->size) {
                    size_t from = (size_t)(rnd() % b->size);
                    memcpy(buf + at, b->data + from, b->size - from);
                    len = at + b->size - from;
                }
                break;
            }
        }
        LLVMFuzzerTestOneInput(buf, len);
    }
    printf("fuzz-replay: %d seeds, %ld mutations, no failure\n", n, mutations);
    free(buf);
    for (int i = 0; i < n; i++)
        free(v[i].data);
    free(v);
    return 0;
}
