/* nvrtc-cubin FILE.cu OUT.cubin [ARCH]: compile a kernel source smelt
 * dumped (SMELT_DUMP_DIR) to CUBIN with NVRTC and smelt's own options
 * (src/backends/cuda/cuda.c: --std=c++17 --fmad=false), for ARCH (default
 * sm_90), printing ptxas's register and spill report.  No GPU needed.
 * Built by bench/cuda/sass. */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: nvrtc-cubin FILE.cu OUT.cubin [sm_XY]\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *src = malloc((size_t)n + 1);
    if (!src || fread(src, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 1;
    }
    src[n] = 0;
    fclose(f);
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s", argc > 3 ? argv[3] : "sm_90");
    const char *opts[] = {arch, "--std=c++17", "--fmad=false", "--ptxas-options=-v"};
    nvrtcProgram p;
    if (nvrtcCreateProgram(&p, src, "kernel.cu", 0, NULL, NULL) != NVRTC_SUCCESS)
        return 1;
    nvrtcResult r = nvrtcCompileProgram(p, 4, opts);
    size_t ls = 0;
    nvrtcGetProgramLogSize(p, &ls);
    char *log = malloc(ls + 1);
    if (log && nvrtcGetProgramLog(p, log) == NVRTC_SUCCESS && ls > 1)
        fprintf(stderr, "%s", log);
    if (r != NVRTC_SUCCESS) {
        fprintf(stderr, "%s: %s\n", argv[1], nvrtcGetErrorString(r));
        return 1;
    }
    size_t cs = 0;
    nvrtcGetCUBINSize(p, &cs);
    char *cubin = malloc(cs);
    FILE *o = fopen(argv[2], "wb");
    if (!cubin || !o || nvrtcGetCUBIN(p, cubin) != NVRTC_SUCCESS || fwrite(cubin, 1, cs, o) != cs) {
        fprintf(stderr, "%s: cannot write\n", argv[2]);
        return 1;
    }
    fclose(o);
    return 0;
}
