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

// A block sum of four doubles through buf (4 * NWARP doubles) in two stages, so that a caller can run the warp
// stage of some values early and keep no registers for them across other work (mgk_solver.cu, VALUE_CG).
// warp_scatter4: the warp stage as a reduce-scatter: at offset 16 a lane sends the two values its half does not
// keep, at offset 8 one of the two it kept, so six shuffles of one double leave in lanes 8v..8v+7 the warp's
// total of value v (a butterfly on each of the four values takes 20); lane 8v writes it to buf[v NWARP + w] for
// v < NV (a caller with three values leaves the fourth slot to its own writes).
template <int NV = 4>
__device__ __forceinline__ void warp_scatter4(const double a, const double b, const double c, const double d,
                                              double* buf)
{
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const bool h16 = lane & 16, h8 = lane & 8;
    double k0 = h16 ? c : a, k1 = h16 ? d : b;
    k0 += shfl_xor(h16 ? a : c, 16);
    k1 += shfl_xor(h16 ? b : d, 16);
    double t = h8 ? k1 : k0;
    t += shfl_xor(h8 ? k0 : k1, 8);
    t += shfl_xor(t, 4);
    t += shfl_xor(t, 2);
    t += shfl_xor(t, 1);
    if ((lane & 7) == 0 && (lane >> 3) < NV) buf[(lane >> 3) * NWARP + w] = t;
}

// block_total4 (after a barrier that follows every warp's partials): the four totals, the same in every thread
// (bit for bit: each step of a butterfly adds the same two values in every lane, and a broadcast copies one lane's
// bits). Lane j of the lanes 8v..8v+7 sums the partials of value v of warps j, j + S, ... (S = min(NWARP, 8)),
// then a butterfly over the S lanes. Values v >= NV are not read (d = 0 when NV = 3).
template <int NV = 4>
__device__ __forceinline__ void block_total4(double& a, double& b, double& c, double& d, const double* buf)
{
    const int lane = threadIdx.x & 31;
    const int v = lane >> 3, j = lane & 7;  // this lane's value, and its rank among the value's 8 lanes
    // S: the largest power of two <= min(NWARP, 8)
    constexpr int S = NWARP >= 8 ? 8 : NWARP >= 4 ? 4 : NWARP >= 2 ? 2 : 1;
    const int j0 = j & (S - 1);
    double t = 0.0;
    if (v < NV) {
        t = buf[v * NWARP + j0];
#pragma unroll
        for (int x = S; x < NWARP; x += S)
            if (x + j0 < NWARP) t += buf[v * NWARP + x + j0];
    }
#pragma unroll
    for (int o = 1; o < S; o <<= 1) t += shfl_xor(t, o);
    a = __shfl_sync(0xffffffffu, t, 0);
    b = __shfl_sync(0xffffffffu, t, 8);
    c = __shfl_sync(0xffffffffu, t, 16);
    d = __shfl_sync(0xffffffffu, t, 24);
}

// Sum four doubles over the block (both stages, one barrier); every thread gets the same totals. The caller makes
// sure buf is not read by a previous reduction any more.
__device__ __forceinline__ void block_sum4_scatter(double& a, double& b, double& c, double& d, double* buf)
{
    warp_scatter4(a, b, c, d, buf);
    __syncthreads();
    block_total4(a, b, c, d, buf);
}

// The stopping tests of a PCG step (mgk_compact.cu, mgk_solver.cu's VALUE_CG) once the residual's rr = r.r is
// reduced: converged at rr <= thr, broke on a non-finite rr, or out of steps; each leaves the caller's loop.
#define CG_STOP(rr, thr, it, max_iter, conv, broke) \
    if ((rr) <= (thr)) {                            \
        (conv) = true;                              \
        break;                                      \
    }                                               \
    if (!isfinite(rr)) {                            \
        (broke) = true;                             \
        break;                                      \
    }                                               \
    if ((it) >= (max_iter)) break

// The scalars of a Chronopoulos-Gear PCG step (mgk_compact.cu, mgk_solver.cu's VALUE_CG), from the step's reduced
// gm = r.z, dl = z.Mz and wz = w.z: beta = gm / g_old (0 at the first step), den = p.Mp = dl - beta^2 den_old,
// alpha = gm / den, w.p = wz + beta w.p_old and K += alpha w.p. Declares beta, den and alpha in the caller's scope
// (its update uses them; den becomes den_old); on a breakdown (den not positive and finite: the system is not SPD in
// finite precision) sets broke and leaves the caller's loop. A macro, not a function: the compiled code of both
// solvers is the code they had with the lines written out (a function changed it at the 64-register bound).
#define CG_SCALARS(gm, dl, wz, g_old, den_old, it, wp, kk, broke)  \
    const double beta = (it) ? (gm) / (g_old) : 0.0;                \
    const double den = (dl) - beta * beta * (den_old); /* p.Mp */    \
    if (!(den > 0.0) || !isfinite(den)) {                            \
        (broke) = true;                                              \
        break;                                                       \
    }                                                                \
    const double alpha = (gm) / den;                                 \
    (wp) = (wz) + beta * (wp);                                       \
    (kk) += alpha * (wp)
