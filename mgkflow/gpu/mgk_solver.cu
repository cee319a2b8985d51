// mgkflow: marginalized graph kernel, whole PCG per pair on the GPU (docs/design.md §5).
//
// One thread block solves one pair (G1, G2) at a time; blocks of a persistent grid
// take jobs (pairs, sorted by estimated cost) through an atomic counter.
//
// System (product index (i, i2) of G1 x G2):   (D V^-1 - A∘E) x = D q,   K = p^T x.
// Jacobi-preconditioned CG; CG scalars, reductions, x, r and the search direction p
// are float64. The XMV y = (A∘E) p is formed on the fly over pairs of octiles
// (8x8 tiles, compact storage with a uint64 bitmap) with float32 octile data, the
// products accumulated in float64 (the system's condition number grows like 1/q, so a
// float32 accumulation of y caps the accuracy of K at small q).
//
// Product vectors use a blocked layout: entry (8I+i, 8I2+i2) sits at
// ((I*nt2 + I2)*64 + i*8 + i2), so the 64 entries of an output tile pair are contiguous.
//
// XMV work split: warp w of the block owns output tile pairs (I, I2) = w, w+NWARP, ...;
// the 64 sums of a tile pair stay in registers (output-stationary, no atomics). How a lane
// computes its two sums is the XMV strategy's CUDA fragment (mgkflow/gpu/strategies: one
// module and one xmv_<name>.cuh each), spliced in as XMV_FRAGMENT: it defines XMV_LANE_SETUP
// (the lane's two outputs oa, ob of a tile pair) and XMV_TILE_PAIR(acca, accb); the
// strategy's own kernel parameters are XMV_PARAMS (declared once, in its Python module).
//
// Placeholders filled by mgkflow.gpu.source: BLOCK, ADAPTIVE, PRIMITIVES (the text of
// octile_primitives.cuh), XMV_FRAGMENT, XMV_PARAMS, NODE_KERNEL, EDGE_KERNEL,
// LOAD_V1/LOAD_V2 (node label loads), LOAD_E1/LOAD_E2 (edge label loads),
// A_TYPE (float or double storage of a = M p), W_TYPE/COEF (edge weights stored as float,
// or as double when some weight is not exactly a float).
//
// Optional sections (off in value-only builds; the preprocessed value-only code is unchanged):
// GRADIENT (mgk_gradient.cuh spliced as GRADIENT_FRAGMENT: a second PCG for the adjoint
// y, M y = p_x, then dK/dh per pair into out_grad; docs/gradients.md) and NODAL (p_i p'_i' x_ii'
// of every pair into out_nodal). EXTRA_PARAMS adds their kernel parameters.

#define BLOCK ${BLOCK}
#define MIN_BLOCKS ${MIN_BLOCKS}
#define ADAPTIVE ${ADAPTIVE}
#define ROW_ILP ${ROW_ILP}
#define P_SMEM ${P_SMEM}
#define GRADIENT ${GRADIENT}
#define NODAL ${NODAL}
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
#define NODE_KERNEL_EXPR (${NODE_KERNEL})
#define NWARP (BLOCK / 32)
typedef ${A_TYPE} a_t;
typedef ${W_TYPE} w_t;
// coefficient A_ij A'_i'j' ke of one product, in double
#define COEF(w1, w2, ke) ${COEF}

${PRIMITIVES}

struct GraphHdr {
    int n;          // real nodes
    int nt;         // tiles per side
    int node_off;   // first (padded) node in the node arrays
    int rowptr_off; // first tile-row pointer
    int rrow_off;   // first node-row pointer (row-pair XMV)
};

__device__ __forceinline__ GraphHdr load_hdr(const int* __restrict__ hdr, int g)
{
    GraphHdr h;
    h.n = hdr[5 * g + 0];
    h.nt = hdr[5 * g + 1];
    h.node_off = hdr[5 * g + 2];
    h.rowptr_off = hdr[5 * g + 3];
    h.rrow_off = hdr[5 * g + 4];
    return h;
}

${XMV_FRAGMENT}

// Sum two doubles over the block; every thread gets the totals.
__device__ __forceinline__ void block_sum2(double& a, double& b, double* buf)
{
    warp_sum2(a, b);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0) {
        buf[w] = a;
        buf[NWARP + w] = b;
    }
    __syncthreads();
    a = 0.0;
    b = 0.0;
#pragma unroll
    for (int k = 0; k < NWARP; ++k) {
        a += buf[k];
        b += buf[NWARP + k];
    }
    __syncthreads();
}

${GRADIENT_FRAGMENT}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) mgk_solve(
    const int* __restrict__ hdr,                  // 5 ints per graph
    ${XMV_PARAMS},
    const unsigned int* __restrict__ nlab,        // node labels, field-major, 32-bit words
    const long long nlab_stride,
    const double* __restrict__ dvec,
    const double* __restrict__ pvec,
    const double* __restrict__ qvec,
    const int* __restrict__ jobs,                 // (g1, g2) per job
    const int n_jobs,
    int* __restrict__ job_counter,
    double* __restrict__ out_k,
    int* __restrict__ out_iter,
    double* __restrict__ out_res,
    int* __restrict__ out_conv,
    double* __restrict__ scratch,                 // per block: X, R, DG, DI [, P, A]
    const long long scratch_per_block,            // doubles
    const int use_smem,                           // 1: P and A in shared memory, 2: P only, 0: none
    const long long n_max,                        // largest product size of this launch
    const double rtol,
    const int max_iter${EXTRA_PARAMS})
{
    extern __shared__ double smem[];
    __shared__ double red[2 * NWARP];
    __shared__ int s_job;

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    double* blk = scratch + (long long)blockIdx.x * scratch_per_block;
    double* X = blk;
    double* R = X + n_max;
    double* DG = R + n_max;
    double* DI = DG + n_max;
#if P_SMEM
    // P is known to live in shared memory: 32-bit shared addressing in the XMV's inner loop
    double* const P = smem;
    a_t* const A = use_smem == 1 ? (a_t*)(smem + n_max) : (a_t*)(DI + n_max);
#else
    double* P;
    a_t* A;
    if (use_smem == 1) {
        P = smem;
        A = (a_t*)(smem + n_max);
    } else if (use_smem == 2) {  // P in shared memory, A in global memory
        P = smem;
        A = (a_t*)(DI + n_max);
    } else {
        P = DI + n_max;
        A = (a_t*)(P + n_max);
    }
#endif

    for (;;) {
        if (tid == 0) s_job = atomicAdd(job_counter, 1);
        __syncthreads();
        const int jb = s_job;
        __syncthreads();
        if (jb >= n_jobs) return;
        const int g1 = jobs[2 * jb], g2 = jobs[2 * jb + 1];
        const GraphHdr h1 = load_hdr(hdr, g1), h2 = load_hdr(hdr, g2);
        const int nt2 = h2.nt;
        const int n_tp = h1.nt * nt2;
        const long long N = (long long)n_tp * 64;
#if GRADIENT
        // pass 0 solves M x = b into X, pass 1 the adjoint M y = p_x into the last n_max doubles of the
        // block's scratch (the inner X of pass 1)
        // iterations, residual, success of each pass (thread 0's copies, in shared memory: no registers)
        __shared__ double s_pass[2][3];
        for (int pass = 0; pass < 2; ++pass) {
        double* const X = pass == 0 ? blk : blk + scratch_per_block - n_max;
#endif

        // ---------------------------------------------------------------- init
        double rz = 0.0, bb = 0.0;
        for (long long idx = tid; idx < N; idx += BLOCK) {
            double dg, b;
            system_entry(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, nlab, nlab_stride, dvec, qvec, dg, b);
#if GRADIENT
            if (pass == 1) b = adjoint_rhs(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, pvec);
#endif
            const double di = 1.0 / dg;
            const double z = b * di;
            DG[idx] = dg;
            DI[idx] = di;
            X[idx] = 0.0;
            R[idx] = b;
            P[idx] = z;
            rz += b * z;
            bb += b * b;
        }
        block_sum2(rz, bb, red);
        const double thr = rtol * rtol * bb;
        double rr = bb;
        int it = 0;
        bool conv = rr <= thr;
        bool broke = false;

        // ---------------------------------------------------------------- PCG
        while (!conv && it < max_iter) {
            // XMV: y = (A∘E) p on the fly, a = DG p - y, pa = p.a
            double pa = 0.0, dummy = 0.0;
            {
                XMV_LANE_SETUP
                for (int tp = warp; tp < n_tp; tp += NWARP) {
                    const int I = tp / nt2, I2 = tp - I * nt2;
                    double acca = 0.0, accb = 0.0;
                    XMV_TILE_PAIR(acca, accb)
                    const long long ia = ((long long)tp << 6) + oa;
                    const long long ib = ((long long)tp << 6) + ob;
                    const double pa_ = P[ia], pb_ = P[ib];
                    const double va = DG[ia] * pa_ - acca;
                    const double vb = DG[ib] * pb_ - accb;
                    A[ia] = (a_t)va;
                    A[ib] = (a_t)vb;
                    pa += pa_ * va + pb_ * vb;
                }
            }
            block_sum2(pa, dummy, red);
            if (!(pa > 0.0) || !isfinite(pa)) {  // breakdown: not SPD in finite precision
                broke = true;
                break;
            }
            const double alpha = rz / pa;
            double rz_new = 0.0, rr_new = 0.0;
            for (long long idx = tid; idx < N; idx += BLOCK) {
                const double pv = P[idx];
                const double r = R[idx] - alpha * (double)A[idx];
                X[idx] += alpha * pv;
                R[idx] = r;
                const double z = r * DI[idx];
                rz_new += r * z;
                rr_new += r * r;
            }
            block_sum2(rz_new, rr_new, red);
            ++it;
            rr = rr_new;
            if (rr <= thr) {
                conv = true;
                break;
            }
            if (!isfinite(rr)) {
                broke = true;
                break;
            }
            const double beta = rz_new / rz;
            rz = rz_new;
            for (long long idx = tid; idx < N; idx += BLOCK) P[idx] = R[idx] * DI[idx] + beta * P[idx];
            __syncthreads();
        }
#if GRADIENT
        if (tid == 0) {
            s_pass[pass][0] = (double)it;
            s_pass[pass][1] = bb > 0.0 ? sqrt(rr / bb) : 0.0;
            s_pass[pass][2] = (conv && !broke) ? 1.0 : 0.0;
        }
        __syncthreads();
        }  // passes: x in X (= blk), y after the block's other vectors
        grad_contraction(h1, h2, nt2, n_tp, N, X, blk + scratch_per_block - n_max, nlab, nlab_stride, dvec, qvec,
                         rrowptr, rcoff, rweight, relab, relab_stride, out_grad + (long long)jb * N_GRAD, red);
#endif

        // ---------------------------------------------------------------- K = p^T x
        double k = 0.0, dummy2 = 0.0;
        for (long long idx = tid; idx < N; idx += BLOCK) {
            const int tp = (int)(idx >> 6), e = (int)(idx & 63);
            const int I = tp / nt2, I2 = tp - I * nt2;
            const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
            // padding has p = 0
            k += pvec[h1.node_off + i] * pvec[h2.node_off + i2] * X[idx];
        }
        block_sum2(k, dummy2, red);
#if NODAL
        for (long long idx = tid; idx < N; idx += BLOCK) {
            const int tp = (int)(idx >> 6), e = (int)(idx & 63);
            const int I = tp / nt2, I2 = tp - I * nt2;
            const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
            if (i < h1.n && i2 < h2.n)
                out_nodal[nodal_off[jb] + (long long)i * h2.n + i2] =
                    pvec[h1.node_off + i] * pvec[h2.node_off + i2] * X[idx];
        }
#endif
        if (tid == 0) {
#if GRADIENT
            out_k[jb] = k;
            // the worse of the two solves
            out_iter[jb] = (int)fmax(s_pass[0][0], s_pass[1][0]);
            out_res[jb] = fmax(s_pass[0][1], s_pass[1][1]);
            out_conv[jb] = (s_pass[0][2] > 0.0 && s_pass[1][2] > 0.0 && isfinite(k)) ? 1 : 0;
#else
            out_k[jb] = k;
            out_iter[jb] = it;
            out_res[jb] = bb > 0.0 ? sqrt(rr / bb) : 0.0;
            out_conv[jb] = (conv && !broke && isfinite(k)) ? 1 : 0;
#endif
        }
    }
}
