// mgkflow: the "wide" solver: ONE pair (G1, G2) solved with the whole GPU (see wide.py).
//
// Same system and the same Jacobi PCG as mgk_solver.cu (x0 = 0, r = b, z = DI r, p = z,
// a = DG p - y, float64 scalars, converged when rr <= rtol^2 bb, breakdown when p.a <= 0 or
// not finite, K = sum p1(i) p2(i2) x(i, i2)), but the CG loop runs on the host: every step
// is one launch over the whole grid, every product vector (X, R, P, A, DG, DI) lives in
// global memory in float64, and the XMV is spread over all warps of the grid (warps take
// output tile pairs from a counter the host zeroes before each XMV launch).
//
// Blocked layout as in mgk_solver.cu: product entry (8I+i, 8I2+i2) sits at
// ((I*nt2 + I2)*64 + i*8 + i2); padded entries (i >= n1 or i2 >= n2) have DG = DI = 1, b = 0.
//
// Reductions: every block writes its partial sums to part[2*blockIdx.x + 0/1] (always, also
// a block without work); the host reads 2*gridDim.x doubles and sums them in a fixed order,
// so the result does not depend on the order in which blocks finish (no atomics on doubles).
//
// Placeholders filled by mgkflow.gpu.solvers.wide.wide_source: BLOCK, ROW_ILP (float64 chains per
// lane in row_pair), DEFINES (label loads), NODE_KERNEL, EDGE_KERNEL, W_TYPE, COEF, COMMON
// (mgk_common.cuh: the warp reductions), PRIMITIVES (octile_primitives.cuh).

#define BLOCK ${BLOCK}
#define ROW_ILP ${ROW_ILP}
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
#define NODE_KERNEL_EXPR (${NODE_KERNEL})
#define NWARP (BLOCK / 32)
typedef ${W_TYPE} w_t;
// coefficient A_ij A'_i'j' ke of one product, in double
#define COEF(w1, w2, ke) ${COEF}

${COMMON}

${PRIMITIVES}

// Sum a and b over the block; thread 0 writes them to part[2*blockIdx.x], part[2*blockIdx.x + 1].
// Every thread of the block must call it (it synchronizes the block).
__device__ __forceinline__ void wide_block_partials(double a, double b, double* __restrict__ part)
{
    __shared__ double buf[2 * NWARP];
    warp_partials2(a, b, buf);
    if (threadIdx.x == 0) {
        double sa = 0.0, sb = 0.0;
        for (int k = 0; k < NWARP; ++k) {
            sa += buf[k];
            sb += buf[NWARP + k];
        }
        part[2 * (long long)blockIdx.x] = sa;
        part[2 * (long long)blockIdx.x + 1] = sb;
    }
}

// ---------------------------------------------------------------------------- init
// DG = d1 d2 / kv, DI = 1 / DG, b = d1 d2 q1 q2, X = 0, A = 0, R = b, P = DI b.
// Partials: (r.z, b.b).
extern "C" __global__ void __launch_bounds__(BLOCK) wide_init(
    const unsigned int* __restrict__ nlab,  // node labels, field-major, 32-bit words
    const long long nlab_stride,
    const double* __restrict__ dvec,
    const double* __restrict__ qvec,
    const int n1, const int n2, const int nt2, const int node_off1, const int node_off2,
    const long long N,
    double* __restrict__ X,
    double* __restrict__ R,
    double* __restrict__ P,
    double* __restrict__ A,
    double* __restrict__ DG,
    double* __restrict__ DI,
    double* __restrict__ part)
{
    double rz = 0.0, bb = 0.0;
    const long long stride = (long long)gridDim.x * BLOCK;
    for (long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x; idx < N; idx += stride) {
        double dg, b;
        system_entry(idx, nt2, n1, n2, node_off1, node_off2, nlab, nlab_stride, dvec, qvec, dg, b);
        const double di = 1.0 / dg;
        const double z = b * di;
        DG[idx] = dg;
        DI[idx] = di;
        X[idx] = 0.0;
        A[idx] = 0.0;
        R[idx] = b;
        P[idx] = z;
        rz += b * z;
        bb += b * b;
    }
    wide_block_partials(rz, bb, part);
}

// ---------------------------------------------------------------------------- XMV
// A = DG P - (A∘E) P over the row-pair XMV (XMV_MODE 2 of mgk_solver.cu): the warp owns one
// output tile pair (I, I2) at a time, lane owns outputs (x, u) and (7 - x, 7 - u) with
// x = lane / 8, u = lane % 8. Tile pairs are handed out by *tp_counter (zeroed by the host
// before every launch). Partials: (p.a, 0).
extern "C" __global__ void __launch_bounds__(BLOCK) wide_xmv(
    const int* __restrict__ rrowptr,          // node-row pointers (padded rows empty)
    const int* __restrict__ rcoff,            // blocked column offset per nonzero
    const w_t* __restrict__ rweight,          // weights in row order
    const unsigned int* __restrict__ relab,   // edge labels in row order, field-major words
    const long long relab_stride,
    const int rrow_off1, const int rrow_off2, const int nt2, const int n_tp,
    const double* __restrict__ P,
    const double* __restrict__ DG,
    double* __restrict__ A,
    int* __restrict__ tp_counter,
    double* __restrict__ part)
{
    const int lane = threadIdx.x & 31;
    const int rx = lane >> 3, ru = lane & 7;
    const int oa = rx * 8 + ru, ob = (7 - rx) * 8 + (7 - ru);
    double pa = 0.0;
    for (;;) {
        int tp = 0;
        if (lane == 0) tp = atomicAdd(tp_counter, 1);
        tp = __shfl_sync(0xffffffffu, tp, 0);
        if (tp >= n_tp) break;  // warp-uniform
        const int I = tp / nt2, I2 = tp - I * nt2;
        const int* ra_ = rrowptr + rrow_off1 + I * 8;
        const int* rb_ = rrowptr + rrow_off2 + I2 * 8;
        const double acca = row_pair(ra_[rx], ra_[rx + 1], rb_[ru], rb_[ru + 1], P, nt2, rcoff, rweight, relab,
                                     relab_stride);
        const double accb = row_pair(ra_[7 - rx], ra_[8 - rx], rb_[7 - ru], rb_[8 - ru], P, nt2, rcoff, rweight,
                                     relab, relab_stride);
        const long long ia = ((long long)tp << 6) + oa;
        const long long ib = ((long long)tp << 6) + ob;
        const double pa_ = P[ia], pb_ = P[ib];
        const double va = DG[ia] * pa_ - acca;
        const double vb = DG[ib] * pb_ - accb;
        A[ia] = va;
        A[ib] = vb;
        pa += pa_ * va + pb_ * vb;
    }
    wide_block_partials(pa, 0.0, part);
}

// ---------------------------------------------------------------------------- update
// X += alpha P, R -= alpha A. Partials: (r.z, r.r) of the new residual, z = DI r.
extern "C" __global__ void __launch_bounds__(BLOCK) wide_update(
    const long long N,
    const double alpha,
    double* __restrict__ X,
    double* __restrict__ R,
    const double* __restrict__ P,
    const double* __restrict__ A,
    const double* __restrict__ DI,
    double* __restrict__ part)
{
    double rz = 0.0, rr = 0.0;
    const long long stride = (long long)gridDim.x * BLOCK;
    for (long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x; idx < N; idx += stride) {
        const double r = R[idx] - alpha * A[idx];
        X[idx] += alpha * P[idx];
        R[idx] = r;
        rz += r * (r * DI[idx]);
        rr += r * r;
    }
    wide_block_partials(rz, rr, part);
}

// ---------------------------------------------------------------------------- direction
// P = DI R + beta P.
extern "C" __global__ void __launch_bounds__(BLOCK) wide_direction(
    const long long N,
    const double beta,
    const double* __restrict__ R,
    const double* __restrict__ DI,
    double* __restrict__ P)
{
    const long long stride = (long long)gridDim.x * BLOCK;
    for (long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x; idx < N; idx += stride)
        P[idx] = R[idx] * DI[idx] + beta * P[idx];
}

// ---------------------------------------------------------------------------- K = p^T x
// Partials: (sum over real entries of p1(i) p2(i2) X(i, i2), 0).
extern "C" __global__ void __launch_bounds__(BLOCK) wide_dot(
    const double* __restrict__ pvec,
    const int n1, const int n2, const int nt2, const int node_off1, const int node_off2,
    const long long N,
    const double* __restrict__ X,
    double* __restrict__ part)
{
    double k = 0.0;
    const long long stride = (long long)gridDim.x * BLOCK;
    for (long long idx = (long long)blockIdx.x * BLOCK + threadIdx.x; idx < N; idx += stride) {
        const int tp = (int)(idx >> 6), e = (int)(idx & 63);
        const int I = tp / nt2, I2 = tp - I * nt2;
        const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
        if (i < n1 && i2 < n2) k += pvec[node_off1 + i] * pvec[node_off2 + i2] * X[idx];
    }
    wide_block_partials(k, 0.0, part);
}

// ---------------------------------------------------------------------------- staged XMV
// A = DG P - (A∘E) P like wide_xmv, for pairs of large graphs with dense octiles (proteins):
// wide_xmv reads P and one G2 nonzero per product through L1 (1.2 sectors per product on the
// 2,000-atom protein pair: L1-bound); here every product is a few register flops and ONE
// shared-memory load. Tables: mgkflow.gpu.strategies.staged (G2 side), the octile arrays (G1 side).
//
// Task (from *task_counter, zeroed by the host): G1 tile row I x one group of consecutive G2
// rows. The group's nonzeros sit in registers, STAGED_SLOTS per thread (a row's nonzeros dealt
// to its threads in turn). For each octile (I, J) of G1 the block stages
//   * P[J, colset] as float: 8 rows x (8 * ncol) columns, the group's column tiles in order;
//   * the octile's compact entries (weight, labels, the P-slice row of their column);
// then each thread runs the octile's entries, row by row, against its slots:
//   acc[i] += w1 * sum_slots w2 ke(e1, e2) P[j][col]   (float within a row of the octile,
// double across; acc[i] is the thread's own shared-memory word, which keeps registers for the
// slots). The threads of a G2 row are consecutive; their partial sums are added in thread order
// (deterministic) before A = DG P - y is written for the task's outputs (8I + i, row).
// Placeholders: STAGED_SLOTS, STAGED_MIN_BLOCKS, STAGED_NFE (edge-label fields, >= 1 for array
// sizes), STAGED_LABELS (1 when the edge kernel reads labels), STAGED_DEFINES (STAGE_E1, G1_E,
// SLOT_LOAD_E2, G2_E, SE_E1_SCALED, SLOT_E2_SCALED label macros), SE_LOGW (1: the edge
// kernel is one SquareExponential: labels pre-scaled by SE_SIGMA, w2 held as log2 w2, the
// coefficient is exp2(log2 w2 - (e1 - e2)^2): one MUFU op), STAGED_EDGE_KERNEL.
#define STAGED_SLOTS ${STAGED_SLOTS}
#define STAGED_MIN_BLOCKS ${STAGED_MIN_BLOCKS}
#define STAGED_NFE ${STAGED_NFE}
#define STAGED_LABELS ${STAGED_LABELS}
#define SE_LOGW ${SE_LOGW}
#define SE_SIGMA ${SE_SIGMA}
#define STAGED_EDGE_EXPR (${STAGED_EDGE_KERNEL})
${STAGED_DEFINES}

extern "C" __global__ void __launch_bounds__(BLOCK, STAGED_MIN_BLOCKS) wide_xmv_staged(
    const int* __restrict__ rowptr,                 // G1 side: octile arrays of the batch
    const int* __restrict__ tile_col,
    const unsigned long long* __restrict__ bitmap,
    const int* __restrict__ toff,
    const w_t* __restrict__ weight,
    const unsigned int* __restrict__ elab,
    const long long elab_stride,
    const int rowptr_off1,
    const int* __restrict__ groups,                 // G2 side: mgkflow.gpu.strategies.staged tables
    const int n_groups,
    const int* __restrict__ colset,
    const int* __restrict__ row_thread,
    const int* __restrict__ slot_col,
    const float* __restrict__ slot_w,
    const unsigned int* __restrict__ slot_lab,
    const long long slot_stride,                    // thread records per slot
    const int nt2,
    const int n_tasks,
    const double* __restrict__ P,
    const double* __restrict__ DG,
    double* __restrict__ A,
    int* __restrict__ task_counter,
    double* __restrict__ part)
{
    extern __shared__ double acc[];                 // 8 partial sums per thread, then the P slice (float)
    float* const sm = (float*)(acc + 8 * BLOCK);
    // G1 octile entries: x byte offset of the entry's column's row in the P slice, y weight
    // (float bits), z SE fast path: scaled label (float bits); one 16-byte broadcast load each
    __shared__ int4 s_g1[64];
#if STAGED_LABELS && !SE_LOGW
    __shared__ unsigned int s_e1[STAGED_NFE * 64];  // label words of the entries (other kernels)
#endif
    __shared__ int s_task;
    const int tid = threadIdx.x;
    double pa = 0.0;
    for (;;) {
        if (tid == 0) s_task = atomicAdd(task_counter, 1);
        __syncthreads();
        const int task = s_task;
        if (task >= n_tasks) break;  // block-uniform
        const int I = task / n_groups, g = task - I * n_groups;
        const int* gr = groups + 8 * g;
        const int row0 = gr[0], nrows = gr[1], thread0 = gr[2], nthreads = gr[3];
        const int col0 = gr[4], ncol = gr[5], rt0 = gr[6];
        const int W = ncol * 8;
        const bool active = tid < nthreads;
        const long long me = thread0 + (active ? tid : 0);

        // ---- this thread's G2 nonzeros -> registers
        int c2[STAGED_SLOTS];  // byte offset of the slot's column in a P-slice row
        float w2[STAGED_SLOTS];
#if SE_LOGW
        float e2s[STAGED_SLOTS];
#elif STAGED_LABELS
        unsigned int e2w[STAGED_NFE][STAGED_SLOTS];
#endif
#pragma unroll
        for (int sl = 0; sl < STAGED_SLOTS; ++sl) {
            const long long ix = (long long)sl * slot_stride + me;
            c2[sl] = active ? 4 * slot_col[ix] : 0;
            const float w = active ? slot_w[ix] : 0.0f;
#if SE_LOGW
            w2[sl] = w > 0.0f ? __log2f(w) : -INFINITY;  // empty slot: exp2(-inf) = 0
            e2s[sl] = active ? SLOT_E2_SCALED(ix) : 0.0f;
#else
            w2[sl] = w;
            SLOT_LOAD_E2(sl, ix)
#endif
        }

        if (active) {
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[i * BLOCK + tid] = 0.0;  // the thread's own words
        }
        const int a0 = rowptr[rowptr_off1 + I], a1 = rowptr[rowptr_off1 + I + 1];
        for (int ta = a0; ta < a1; ++ta) {
            const int J = tile_col[ta];
            const unsigned long long bm = bitmap[ta];
            const int base = toff[ta];
            __syncthreads();  // the previous octile's slice is no longer read
            const double* Pg = P + (((long long)J * nt2) << 6);
            for (int v = tid; v < ncol * 64; v += BLOCK) {
                const int u = v >> 6, e = v & 63;
                const int Jp = colset[col0 + u];
                sm[(e >> 3) * W + u * 8 + (e & 7)] = (float)Pg[((long long)Jp << 6) + e];
            }
            if (tid < 64 && ((bm >> tid) & 1ull)) {
                const int r = __popcll(bm & ((1ull << tid) - 1ull));
                const int idx = base + r;
                int4 e;
                e.x = 4 * (tid & 7) * W;
                e.y = __float_as_int((float)weight[idx]);
                e.z = __float_as_int(SE_E1_SCALED(idx));
                e.w = 0;
                s_g1[r] = e;
                STAGE_E1(r, idx)
            }
            __syncthreads();
            if (active) {
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const unsigned int rowbits = (unsigned int)(bm >> (8 * i)) & 0xffu;
                    if (rowbits == 0u) continue;  // block-uniform
                    const int k0 = __popcll(bm & ((1ull << (8 * i)) - 1ull));
                    const int k1 = k0 + __popc(rowbits);
                    float t_i = 0.0f;
                    for (int k = k0; k < k1; ++k) {
                        const int4 e = s_g1[k];
                        const char* Pr = (const char*)sm + e.x;
                        float s = 0.0f;
#if SE_LOGW
                        const float e1s = __int_as_float(e.z);
#pragma unroll
                        for (int sl = 0; sl < STAGED_SLOTS; ++sl) {
                            const float t = e1s - e2s[sl];
                            s = fmaf(mgk_ex2(fmaf(-t, t, w2[sl])), *(const float*)(Pr + c2[sl]), s);
                        }
#else
                        G1_E(k)
#pragma unroll
                        for (int sl = 0; sl < STAGED_SLOTS; ++sl) {
                            G2_E(sl)
                            s = fmaf(w2[sl] * (STAGED_EDGE_EXPR), *(const float*)(Pr + c2[sl]), s);
                        }
#endif
                        t_i = fmaf(__int_as_float(e.y), s, t_i);
                    }
                    acc[i * BLOCK + tid] += (double)t_i;
                }
            }
        }

        // ---- y: partial sums of a row's threads in thread order; A = DG P - y
        __syncthreads();
        for (int o = tid; o < 8 * nrows; o += BLOCK) {
            const int i = o / nrows, k = o - i * nrows, row = row0 + k;
            const int t0 = row_thread[rt0 + k], t1 = row_thread[rt0 + k + 1];
            double y = 0.0;
            for (int t = t0; t < t1; ++t) y += acc[i * BLOCK + t];
            const long long idx = (((long long)I * nt2 + (row >> 3)) << 6) + (i << 3) + (row & 7);
            const double pv = P[idx];
            const double a = DG[idx] * pv - y;
            A[idx] = a;
            pa += pv * a;
        }
        __syncthreads();  // the next task resets acc
    }
    wide_block_partials(pa, 0.0, part);
}
