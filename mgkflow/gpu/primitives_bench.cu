// mgkflow: microbenchmark of the octile-pair primitives (`mgkflow bench primitives`, paper Fig. 8).
//
// A template filled by mgkflow.bench.primitives (string.Template): the edge kernel, the label
// loads, w_t and COEF come from a real KernelConfig through mgkflow.gpu.source (COMMON:
// mgk_common.cuh, for mgk_ex2), and the primitives are the solver's own (octile_primitives.cuh,
// spliced verbatim), so the timings are those of the code the solver runs.
//
// Data (uploaded once): pools of random octiles. Pool (side, k) holds n_samples octiles with
// exactly k nonzeros each: bitmap[o], compact offset toff[o], weights weight[toff[o] ..] and
// one float32 edge-label field elab[toff[o] ..] (raw 32-bit words, field-major with
// elab_stride). One launch measures one cell (k1, k2) with one primitive: oct1 / oct2 are the
// first octiles of the pools (side 1, k1) and (side 2, k2).
//
// Every warp of the grid processes `reps` octile pairs: at step r it takes sample
// i1 = (w + r) % n_samples of side 1 and i2 = (3 w + 1 + r) % n_samples of side 2
// (w = global warp index), against one 64-entry input tile P in shared memory, and
// accumulates the lane's two outputs as the solver does; each thread writes acca + accb
// to out[] so that nothing is optimized away (and so that the host can check the sums).
// Time per octile pair = launch time / (warps * reps).

#define BENCH_BLOCK ${BLOCK}
#define BENCH_MIN_BLOCKS ${MIN_BLOCKS}
#define NWARP (BENCH_BLOCK / 32)
${COMMON}
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
typedef ${W_TYPE} w_t;
// coefficient A_ij A'_i'j' ke of one product, in double
#define COEF(w1, w2, ke) ${COEF}

${PRIMITIVES}

template <int SEL>
__device__ __forceinline__ void bench_body(
    const unsigned long long* __restrict__ bitmap, const int* __restrict__ toff,
    const w_t* __restrict__ weight, const unsigned int* __restrict__ elab, const long long elab_stride,
    const double* __restrict__ ptile, double* __restrict__ out,
    const int oct1, const int oct2, const int n_samples, const int reps)
{
    __shared__ double Pt[64];
    for (int t = threadIdx.x; t < 64; t += blockDim.x)
        Pt[t] = ptile[t];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long warp = gtid >> 5;
    const LaneRows L = lane_rows(lane);
    int i1 = (int)(warp % n_samples);
    int i2 = (int)((3 * warp + 1) % n_samples);
    double acca = 0.0, accb = 0.0;
#pragma unroll 1
    for (int r = 0; r < reps; ++r) {
        const unsigned long long bm1 = bitmap[oct1 + i1];
        const unsigned long long bm2 = bitmap[oct2 + i2];
        const int t1 = toff[oct1 + i1];
        const int t2 = toff[oct2 + i2];
        octile_pair<SEL>(bm1, t1, bm2, t2, Pt, L, weight, elab, elab_stride, acca, accb);
        if (++i1 == n_samples)
            i1 = 0;
        if (++i2 == n_samples)
            i2 = 0;
    }
    out[gtid] = acca + accb;
}

#define BENCH_KERNEL(NAME, SEL)                                                                          \
    extern "C" __global__ void __launch_bounds__(BENCH_BLOCK, BENCH_MIN_BLOCKS) NAME(                    \
        const unsigned long long* __restrict__ bitmap, const int* __restrict__ toff,                     \
        const w_t* __restrict__ weight, const unsigned int* __restrict__ elab, const long long elab_stride, \
        const double* __restrict__ ptile, double* __restrict__ out,                                      \
        const int oct1, const int oct2, const int n_samples, const int reps)                             \
    {                                                                                                    \
        bench_body<SEL>(bitmap, toff, weight, elab, elab_stride, ptile, out, oct1, oct2, n_samples, reps); \
    }

BENCH_KERNEL(bench_ss, PRIM_SS)
BENCH_KERNEL(bench_dd, PRIM_DD)
BENCH_KERNEL(bench_ds, PRIM_DS)
BENCH_KERNEL(bench_sd, PRIM_SD)

// Keep the stream busy for `ns` nanoseconds (one thread), so that the timed launches queued
// behind it start back to back instead of waiting for the host. Bounded trip count: a timer
// that does not advance cannot hang the device.
extern "C" __global__ void bench_spin(const long long ns)
{
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    for (int it = 0; it < (1 << 22); ++it) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        if ((long long)(t - t0) >= ns)
            break;
    }
}
