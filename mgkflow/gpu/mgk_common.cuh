// mgkflow: device helpers shared by the solvers' CUDA sources (mgk_solver.cu, mgk_wide.cu,
// mgk_compact.cu) and the primitive benchmark (primitives_bench.cu), spliced as COMMON by their
// source generators (mgkflow.gpu.source.kernel_source, mgkflow.gpu.solvers.wide.wide_source,
// mgkflow.gpu.solvers.compact.compact_source, mgkflow.bench.primitives.bench_source) after the
// definition of NWARP (warps per block) and before anything that uses them.

// Kernel parameters of the per-pair solvers (mgk_solver.cu, mgk_compact.cu), in the two groups the host
// passes alike to both (by name: mgkflow.gpu.device.parse_signatures expands these macros): the node
// vectors of the batch (mgkflow.gpu.core.SharedArgs) and the job list with the per-pair outputs
// (mgkflow.gpu.launch.Launcher.launch_jobs).
#define MGK_NODE_PARAMS                                                                        \
    const unsigned int* __restrict__ nlab,        /* node labels, field-major, 32-bit words */ \
    const long long nlab_stride,                                                               \
    const double* __restrict__ dvec,                                                           \
    const double* __restrict__ pvec,                                                           \
    const double* __restrict__ qvec
#define MGK_JOB_PARAMS                                                                         \
    const int* __restrict__ jobs,                 /* (g1, g2) per job */                       \
    const int n_jobs,                                                                          \
    int* __restrict__ job_counter,                                                             \
    double* __restrict__ out_k,                                                                \
    int* __restrict__ out_iter,                                                                \
    double* __restrict__ out_res,                                                              \
    int* __restrict__ out_conv

// 2^x with one MUFU.EX2: the edge and node kernels' exponentials (mgkflow.kernels c_expr). exp2f compiles to
// the same instruction plus a range check that keeps results below FLT_MIN (2^-126) as denormals; here they
// flush to 0, 126 binary orders of magnitude under the coefficient of a product that is 1 at the closest labels.
// NVVM's builtin rather than inline asm: the compiler merges repeated calls on the same argument (a
// gradient build's value and derivative expressions), which it does not do for an asm statement.
__device__ __forceinline__ float mgk_ex2(const float x)
{
    return __nvvm_ex2_approx_ftz_f(x);
}

// x of lane (lane ^ o), every lane of the warp taking part.
__device__ __forceinline__ double shfl_xor(double x, int o)
{
    return __shfl_xor_sync(0xffffffffu, x, o);
}

// Sum two doubles over the warp (every lane gets the sums).
__device__ __forceinline__ void warp_sum2(double& a, double& b)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += shfl_xor(a, o);
        b += shfl_xor(b, o);
    }
}

// The warp stage of a block sum of two doubles: warp_sum2, then lane 0 of warp w writes the warp's
// sums to buf[w] and buf[NWARP + w] (2 * NWARP doubles), then a barrier.
__device__ __forceinline__ void warp_partials2(double& a, double& b, double* buf)
{
    warp_sum2(a, b);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0) {
        buf[w] = a;
        buf[NWARP + w] = b;
    }
    __syncthreads();
}
