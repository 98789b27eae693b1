// A hand-written experiment on the GPU (bench/RESULTS.md, "GPU, 2026-11-23"):
// the generated softmax row program against versions that stage the row in
// shared memory, a spread full sum and a column sum, each checked for the
// same bits as smelt's reduction order.  Build on a machine with nvcc:
//   build/smelt explain 'exp(x - max(x, axis=-1, keepdims=True)) / sum(exp(x - max(x, axis=-1,
//     keepdims=True)), axis=-1, keepdims=True)' x=f32[16384,4096] --full-source   (NVRTC backend)
// and save the CUDA source's prelude and kernel as sm_gen.cuh beside this file, the
// kernel renamed k_v0 and the prelude's fixed-width typedefs replaced by
// "#include <cstdint>", "#define int64_t long long", "#define uint64_t unsigned long long"; then
//   nvcc -O3 -arch=sm_90 -fmad=false -std=c++17 -o rows_experiment rows_experiment.cu
#include "sm_gen.cuh"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)

// the row's maximum in smelt's order (chunks of 16384, lane l takes l, l + 32, ...,
// then the shuffle tree), on every lane of the warp
__device__ float row_max(const float *row, unsigned nred, int lane)
{
    float tot = smelt_f32_bits(0xff800000u); long long ti = 0;
    for (unsigned c0 = 0; c0 < nred; c0 += 16384) {
        unsigned c1 = nred - c0 < 16384 ? nred : c0 + 16384;
        float v = smelt_f32_bits(0xff800000u); long long vi = 0;
#pragma unroll 8
        for (unsigned r = c0 + lane; r < c1; r += 32)
            smelt_fold_0(&v, &vi, row[r], 0);
        for (int d = 16; d >= 1; d >>= 1) smelt_fold_0(&v, &vi, __shfl_down_sync(~0u, v, d), 0);
        smelt_fold_0(&tot, &ti, v, 0);
    }
    return __shfl_sync(~0u, tot, 0);
}

// the sum of exp(x - m) over the row in smelt's order (f64 accumulators), on
// every lane; KEEP: each e written back over its x (the row cache)
template <int KEEP>
__device__ float row_sum_exp(float *row, unsigned nred, int lane, float m)
{
    double tot = 0; long long ti = 0;
    for (unsigned c0 = 0; c0 < nred; c0 += 16384) {
        unsigned c1 = nred - c0 < 16384 ? nred : c0 + 16384;
        double v = 0; long long vi = 0;
#pragma unroll 8
        for (unsigned r = c0 + lane; r < c1; r += 32) {
            float e = smelt_exp_f32(row[r] - m);
            if (KEEP) row[r] = e;
            smelt_fold_1(&v, &vi, (double)e, 0);
        }
        for (int d = 16; d >= 1; d >>= 1) smelt_fold_1(&v, &vi, __shfl_down_sync(~0u, v, d), 0);
        smelt_fold_1(&tot, &ti, v, 0);
    }
    return (float)__shfl_sync(~0u, tot, 0);
}

// V1: no division: contiguous rows, off = row + r
extern "C" __global__ void k_v1(const smelt_args a)
{
    const unsigned nred = a.shape[1], nout = a.shape[0];
    const int lane = threadIdx.x & 31;
    const long long nwarps = ((long long)blockDim.x * gridDim.x) >> 5;
    const float *__restrict__ x = (const float *)a.ptrs[0];
    float *__restrict__ y = (float *)a.ptrs[1];
    for (long long ow = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; ow < nout; ow += nwarps) {
        const float *xr = x + ow * a.strides[0];
        float *yr = y + ow * a.strides[2];
        const float m = row_max(xr, nred, lane);
        const float s = row_sum_exp<0>((float *)xr, nred, lane, m);
#pragma unroll 4
        for (unsigned r = lane; r < nred; r += 32)
            yr[r] = smelt_exp_f32(xr[r] - m) / s;
    }
}

// V2/V3: the row staged in shared memory by 16-byte loads (one slice per warp);
// CACHE: the sum pass keeps e = exp(x - m) in the slice for the last pass
template <int CACHE>
__global__ void k_smem(const smelt_args a)
{
    extern __shared__ float4 smem4[];
    const unsigned nred = a.shape[1], nout = a.shape[0];
    const int lane = threadIdx.x & 31, wib = threadIdx.x >> 5;
    float *sx = (float *)smem4 + (size_t)wib * ((nred + 3) & ~3u);
    const long long nwarps = ((long long)blockDim.x * gridDim.x) >> 5;
    const float *__restrict__ x = (const float *)a.ptrs[0];
    float *__restrict__ y = (float *)a.ptrs[1];
    for (long long ow = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; ow < nout; ow += nwarps) {
        const float *xr = x + ow * a.strides[0];
        float *yr = y + ow * a.strides[2];
        bool vec = ((((size_t)xr) | ((size_t)yr)) & 15) == 0;
        unsigned nv = vec ? nred / 4 : 0;
#pragma unroll 4
        for (unsigned i = lane; i < nv; i += 32)
            ((float4 *)sx)[i] = __ldcs(&((const float4 *)xr)[i]);
        for (unsigned r = nv * 4 + lane; r < nred; r += 32)
            sx[r] = xr[r];
        __syncwarp();
        const float m = row_max(sx, nred, lane);
        const float s = row_sum_exp<CACHE>(sx, nred, lane, m);
        __syncwarp();
#pragma unroll 4
        for (unsigned i = lane; i < nv; i += 32) {
            float4 e = ((float4 *)sx)[i], o;
            if (CACHE) { o.x = e.x / s; o.y = e.y / s; o.z = e.z / s; o.w = e.w / s; }
            else {
                o.x = smelt_exp_f32(e.x - m) / s; o.y = smelt_exp_f32(e.y - m) / s;
                o.z = smelt_exp_f32(e.z - m) / s; o.w = smelt_exp_f32(e.w - m) / s;
            }
            __stcs(&((float4 *)yr)[i], o);
        }
        for (unsigned r = nv * 4 + lane; r < nred; r += 32)
            yr[r] = CACHE ? sx[r] / s : smelt_exp_f32(sx[r] - m) / s;
        __syncwarp();
    }
}

// Full reduction (sum of f32 in f64) over n: a warp per (result, chunk); the chunk's
// result to part[], then the last warp of the result (a counter) combines in order.
__global__ void k_full(const float *__restrict__ x, long long n, double *part, unsigned *cnt, float *out)
{
    const int lane = threadIdx.x & 31;
    long long nchunk = (n + 16383) / 16384;
    const long long nwarps = ((long long)blockDim.x * gridDim.x) >> 5;
    for (long long w = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; w < nchunk; w += nwarps) {
        long long c0 = w * 16384, c1 = n - c0 < 16384 ? n : c0 + 16384;
        double v = 0;
#pragma unroll 8
        for (long long r = c0 + lane; r < c1; r += 32) v += (double)x[r];
        for (int d = 16; d >= 1; d >>= 1) v += __shfl_down_sync(~0u, v, d);
        unsigned last = 0;
        if (lane == 0) {
            part[w] = v;
            __threadfence();
            last = atomicAdd(cnt, 1u) == (unsigned)nchunk - 1;
        }
        last = __shfl_sync(~0u, last, 0);
        if (last) { // in order, lane 0 (loads by all lanes, a fold on lane 0)
            __threadfence();
            double tot = 0;
            for (long long c = 0; c < nchunk; c += 32) {
                double p = c + lane < nchunk ? __ldcg(&part[c + lane]) : 0;
                for (int j = 0; j < 32 && c + j < nchunk; j++) {
                    double q = __shfl_sync(~0u, p, j);
                    if (lane == 0) tot += q;
                }
            }
            if (lane == 0) { *out = (float)tot; *cnt = 0; }
        }
    }
}

// Column reduction (sum over axis 0 of R x C, f32 in f64): a block of 32 columns x
// 32 lanes (warp = lane index l, thread in warp = column); lane l takes rows l, l+32, ...
// of each chunk; the lanes' tree through shared memory in the shuffle's order.
__global__ void k_cols(const float *__restrict__ x, int R, int C, float *out)
{
    __shared__ double acc[32][33];
    const int c = blockIdx.x * 32 + (threadIdx.x & 31), l = threadIdx.x >> 5;
    double tot = 0;
    for (int c0 = 0; c0 < R; c0 += 16384) {
        int c1 = R - c0 < 16384 ? R : c0 + 16384;
        double v = 0;
        if (c < C) {
#pragma unroll 8
            for (int r = c0 + l; r < c1; r += 32) v += (double)x[(size_t)r * C + c];
        }
        acc[l][threadIdx.x & 31] = v;
        __syncthreads();
        for (int d = 16; d >= 1; d >>= 1) {
            if (l < d) acc[l][threadIdx.x & 31] += acc[l + d][threadIdx.x & 31];
            __syncthreads();
        }
        if (l == 0) tot += acc[0][threadIdx.x & 31];
        __syncthreads();
    }
    if (l == 0 && c < C) out[c] = (float)tot;
}

static float med(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

int main()
{
    const unsigned R = 16384, C = 4096;
    size_t n = (size_t)R * C, bytes = n * 4;
    std::vector<float> h(n);
    srand(12345);
    for (size_t i = 0; i < n; i++) h[i] = ((rand() / (float)RAND_MAX) - 0.5f) * 12.0f;
    float *dx, *dy, *dref, *dcp;
    CK(cudaMalloc(&dx, bytes)); CK(cudaMalloc(&dy, bytes)); CK(cudaMalloc(&dref, bytes)); CK(cudaMalloc(&dcp, bytes));
    CK(cudaMemcpy(dx, h.data(), bytes, cudaMemcpyHostToDevice));
    smelt_args a; a.ptrs[0] = (char *)dx; a.ptrs[1] = (char *)dref; a.n = n;
    a.shape[0] = R; a.shape[1] = C; a.strides[0] = C; a.strides[1] = 1; a.strides[2] = C; a.strides[3] = 1;
    int dev; CK(cudaGetDevice(&dev)); cudaDeviceProp pr; CK(cudaGetDeviceProperties(&pr, dev));
    int sms = pr.multiProcessorCount;
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    auto timeit = [&](auto launch) {
        std::vector<float> t;
        for (int i = 0; i < 25; i++) {
            CK(cudaEventRecord(e0)); launch(); CK(cudaGetLastError()); CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); if (i >= 3) t.push_back(ms);
        }
        return med(t);
    };
    float tcopy = timeit([&] { CK(cudaMemcpyAsync(dcp, dx, bytes, cudaMemcpyDeviceToDevice)); });
    printf("copy %.4f ms  %.0f GB/s\n", tcopy, 2.0 * bytes / tcopy / 1e6);
    // v0 as smelt launches it: occupancy block, 1..8 waves
    int mg, mb; CK(cudaOccupancyMaxPotentialBlockSize(&mg, &mb, k_v0, 0, 0));
    int bpsm; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bpsm, k_v0, mb, 0));
    long long threads = (long long)R * 32, blocks = (threads + mb - 1) / mb, wave = (long long)bpsm * sms;
    long long want = std::min(std::max(threads / (mb * 8LL), wave), wave * 8);
    unsigned grid = (unsigned)std::max(1LL, std::min(blocks, want));
    float t0 = timeit([&] { k_v0<<<grid, mb>>>(a); });
    printf("v0 generated: block %d grid %u: %.4f ms  %.0f GB/s (%.0f%% of copy)\n", mb, grid, t0, 2.0 * bytes / t0 / 1e6, 100 * tcopy / t0);
    std::vector<float> ref(n), got(n);
    CK(cudaMemcpy(ref.data(), dref, bytes, cudaMemcpyDeviceToHost));
    a.ptrs[1] = (char *)dy;
    auto check = [&](const char *what) {
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(got.data(), dy, bytes, cudaMemcpyDeviceToHost));
        size_t bad = 0; for (size_t i = 0; i < n; i++) bad += memcmp(&got[i], &ref[i], 4) != 0;
        CK(cudaMemset(dy, 0xff, bytes));
        if (bad) printf("  %s: %zu elements differ from v0\n", what, bad);
        return bad;
    };
    for (int b : {128, 256, 512}) {
        unsigned g = std::min<long long>((long long)R * 32 / b, (long long)sms * 2048 / b * 8);
        float t = timeit([&] { k_v1<<<g, b>>>(a); });
        check("v1");
        printf("v1 no-div: block %d grid %u: %.4f ms (%.0f%% of copy)\n", b, g, t, 100 * tcopy / t);
    }
    for (int cache = 0; cache < 2; cache++)
        for (int w : {1, 2, 4, 8}) {
            size_t sm = (size_t)w * C * 4;
            auto kf = cache ? k_smem<1> : k_smem<0>;
            CK(cudaFuncSetAttribute(kf, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm));
            int bp; CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bp, kf, w * 32, sm));
            for (int waves : {1, 4}) {
                unsigned g = std::min<long long>((R + w - 1) / w, (long long)bp * sms * waves);
                float t = timeit([&] { kf<<<g, w * 32, sm>>>(a); });
                check(cache ? "v3" : "v2");
                printf("%s smem%s: warps/block %d (%d blocks/SM) grid %u: %.4f ms (%.0f%% of copy)\n", cache ? "v3" : "v2",
                       cache ? "+cache e" : "", w, bp, g, t, 100 * tcopy / t);
            }
        }
    // full reduction: 64M f32 sum, exact order on the host
    {
        long long nchunk = ((long long)n + 16383) / 16384;
        double *part; unsigned *cnt; float *out;
        CK(cudaMalloc(&part, nchunk * 8)); CK(cudaMalloc(&cnt, 4)); CK(cudaMalloc(&out, 4));
        CK(cudaMemset(cnt, 0, 4));
        double tot = 0;
        for (long long c = 0; c < nchunk; c++) {
            double lanes[32];
            for (int l = 0; l < 32; l++) { lanes[l] = 0; for (long long r = c * 16384 + l; r < std::min<long long>(n, (c + 1) * 16384); r += 32) lanes[l] += (double)h[r]; }
            for (int d = 16; d >= 1; d >>= 1) for (int l = 0; l < d; l++) lanes[l] += lanes[l + d];
            tot += lanes[0];
        }
        float want = (float)tot;
        for (int b : {256, 512}) {
            unsigned g = (unsigned)std::min<long long>(nchunk * 32 / b, (long long)sms * 2048 / b);
            float t = timeit([&] { k_full<<<g, b>>>(dx, (long long)n, part, cnt, out); });
            float gotv; CK(cudaMemcpy(&gotv, out, 4, cudaMemcpyDeviceToHost));
            printf("full sum 64M: block %d grid %u: %.4f ms (%.0f%% of copy's read rate) %s (%a vs %a)\n", b, g, t,
                   100 * (tcopy / 2) / t, memcmp(&gotv, &want, 4) ? "DIFFERS" : "same bits", gotv, want);
        }
    }
    // column reduction: 4096 x 4096 (the bench's sum_cols), and 16384 x 4096
    for (int rows : {4096, 16384}) {
        int cols = 4096;
        float *out; CK(cudaMalloc(&out, cols * 4));
        std::vector<float> want(cols), gotc(cols);
        for (int c = 0; c < cols; c++) {
            double tot = 0;
            for (int c0 = 0; c0 < rows; c0 += 16384) {
                double lanes[32];
                for (int l = 0; l < 32; l++) { lanes[l] = 0; for (int r = c0 + l; r < std::min(rows, c0 + 16384); r += 32) lanes[l] += (double)h[(size_t)r * cols + c]; }
                for (int d = 16; d >= 1; d >>= 1) for (int l = 0; l < d; l++) lanes[l] += lanes[l + d];
                tot += lanes[0];
            }
            want[c] = (float)tot;
        }
        float t = timeit([&] { k_cols<<<(cols + 31) / 32, 1024>>>(dx, rows, cols, out); });
        CK(cudaMemcpy(gotc.data(), out, cols * 4, cudaMemcpyDeviceToHost));
        printf("cols %dx%d: block 1024 grid %d: %.4f ms (%.0f%% of copy's read rate) %s\n", rows, cols, (cols + 31) / 32, t,
               100 * (tcopy / 2) * ((double)rows * cols / n) / t, memcmp(gotc.data(), want.data(), cols * 4) ? "DIFFERS" : "same bits");
    }
    return 0;
}
