// mgkflow: kernels that measure the device's ceilings (`mgkflow bench primitives`).
//
//   peak_fp32 / peak_fp64: CHAINS independent FMA chains per thread, UNROLL * iters steps each:
//       2 * CHAINS * UNROLL * iters FLOPs per thread; b and c are kernel arguments, so the
//       compiler cannot fold the chains; every thread writes its sum.
//   fill_f4: fills a float4 buffer with non-zero values (never time on zeros).
//   copy_f4: dst = src over n float4 (bytes moved: 32 n, read + write).
//   read_f4: sum of n float4 (bytes moved: 16 n); every thread writes its partial sum.
// The memory kernels use a grid-stride loop, four 16-byte accesses in flight per thread.
// Plain CUDA C++ (no template placeholders), compiled as is.

#define CHAINS 8
#define UNROLL 16

extern "C" __global__ void peak_fp32(float* __restrict__ out, const float b, const float c, const int iters)
{
    float x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k)
        x[k] = 1e-3f * (float)(threadIdx.x + k);
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < CHAINS; ++k)
                x[k] = fmaf(x[k], b, c);
        }
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k)
        s += x[k];
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

extern "C" __global__ void peak_fp64(double* __restrict__ out, const double b, const double c, const int iters)
{
    double x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k)
        x[k] = 1e-3 * (double)(threadIdx.x + k);
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < CHAINS; ++k)
                x[k] = fma(x[k], b, c);
        }
    }
    double s = 0.0;
#pragma unroll
    for (int k = 0; k < CHAINS; ++k)
        s += x[k];
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

__device__ __forceinline__ float hash_float(unsigned long long i)
{
    unsigned int h = (unsigned int)(i ^ (i >> 32)) * 2654435761u;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    return 1.0f + (float)(h >> 8) * (1.0f / 16777216.0f);  // in [1, 2)
}

extern "C" __global__ void fill_f4(float4* __restrict__ x, const long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const unsigned long long b = 4ull * (unsigned long long)i;
        x[i] = make_float4(hash_float(b), hash_float(b + 1), hash_float(b + 2), hash_float(b + 3));
    }
}

extern "C" __global__ void copy_f4(const float4* __restrict__ src, float4* __restrict__ dst, const long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const float4 a0 = src[i];
        const float4 a1 = src[i + stride];
        const float4 a2 = src[i + 2 * stride];
        const float4 a3 = src[i + 3 * stride];
        dst[i] = a0;
        dst[i + stride] = a1;
        dst[i + 2 * stride] = a2;
        dst[i + 3 * stride] = a3;
    }
    for (; i < n; i += stride)
        dst[i] = src[i];
}

extern "C" __global__ void read_f4(const float4* __restrict__ src, float* __restrict__ out, const long long n)
{
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const float4 a0 = src[i];
        const float4 a1 = src[i + stride];
        const float4 a2 = src[i + 2 * stride];
        const float4 a3 = src[i + 3 * stride];
        s0 += (a0.x + a0.y) + (a0.z + a0.w);
        s1 += (a1.x + a1.y) + (a1.z + a1.w);
        s2 += (a2.x + a2.y) + (a2.z + a2.w);
        s3 += (a3.x + a3.y) + (a3.z + a3.w);
    }
    for (; i < n; i += stride) {
        const float4 a = src[i];
        s0 += (a.x + a.y) + (a.z + a.w);
    }
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = (s0 + s1) + (s2 + s3);
}
