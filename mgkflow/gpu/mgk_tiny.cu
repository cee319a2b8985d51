// mgkflow: marginalized graph kernel, one WARP per pair (tiny pairs: molecules of <= ~64 atoms).
//
// Same system and the same Jacobi-preconditioned float64 CG as mgk_solver.cu (one block per
// pair), for pairs whose product space is small (a few tile pairs): there, a whole block per
// pair spends its time in __syncthreads and block reductions over a few hundred entries. Here
// every warp of a block solves its own pair (jobs taken warp by warp through the atomic
// counter), reductions are warp shuffles only, and no block-wide barrier is ever needed.
//
// Entry ownership: lane l owns, in every tile pair tp, the two outputs (oa, ob) that the XMV
// fragment gives it (XMV_LANE_SETUP; 32 lanes x 2 = the 64 entries of a tile pair). Every loop
// (initialisation, update, direction) walks those same entries, so W, R, DG, DI and A are
// private to the lane (global scratch, L1-resident for tiny pairs) and only the search
// direction P, which the XMV reads across lanes, is shared (shared memory, one slice per warp;
// __syncwarp after each write phase).
//
// No solution vector: K = w^T x with x = sum_k alpha_k p_k and w_(i,i') = p_i p'_i' (start
// probabilities), so K = sum_k alpha_k (w^T p_k), the dot product w^T p_k taken in the XMV loop
// and reduced with p^T A p (W, read-only, replaces X: one 8-byte access per entry and
// iteration less, and no final pass).
//
// Placeholders filled by mgkflow.gpu.strategies.tiny (same as mgk_solver.cu, plus WARPS).

#define WARPS ${WARPS}
#define BLOCK (WARPS * 32)
#define MIN_BLOCKS ${MIN_BLOCKS}
#define ADAPTIVE ${ADAPTIVE}
#define ROW_ILP ${ROW_ILP}
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
#define NODE_KERNEL_EXPR (${NODE_KERNEL})
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

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) mgk_solve_tiny(
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
    double* __restrict__ scratch,                 // per warp: W, R, DG, DI, A
    const long long scratch_per_warp,             // doubles
    const int n_max,                              // largest product size of this launch (multiple of 64)
    const double rtol,
    const int max_iter)
{
    extern __shared__ double smem[];
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    double* const P = smem + (long long)warp * n_max;
    double* const W = scratch + ((long long)blockIdx.x * WARPS + warp) * scratch_per_warp;
    double* const R = W + n_max;
    double* const DG = R + n_max;
    double* const DI = DG + n_max;
    a_t* const A = (a_t*)(DI + n_max);
    XMV_LANE_SETUP

    for (;;) {
        int jb = 0;
        if (lane == 0) jb = atomicAdd(job_counter, 1);
        jb = __shfl_sync(0xffffffffu, jb, 0);
        if (jb >= n_jobs) return;
        const int g1 = jobs[2 * jb], g2 = jobs[2 * jb + 1];
        const GraphHdr h1 = load_hdr(hdr, g1), h2 = load_hdr(hdr, g2);
        const int nt2 = h2.nt;
        const int n_tp = h1.nt * nt2;

        // ---------------------------------------------------------------- init
        double rz = 0.0, bb = 0.0;
        for (int tp = 0; tp < n_tp; ++tp) {
            const int I = tp / nt2, I2 = tp - I * nt2;
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                const int e = s ? ob : oa;
                const int idx = (tp << 6) + e;
                double dg, b;
                system_entry(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, nlab, nlab_stride, dvec, qvec, dg, b);
                const double di = 1.0 / dg;
                const double z = b * di;
                DG[idx] = dg;
                DI[idx] = di;
                // padding has p = 0
                W[idx] = pvec[h1.node_off + I * 8 + (e >> 3)] * pvec[h2.node_off + I2 * 8 + (e & 7)];
                R[idx] = b;
                P[idx] = z;
                rz += b * z;
                bb += b * b;
            }
        }
        warp_sum2(rz, bb);
        __syncwarp();
        const double thr = rtol * rtol * bb;
        double rr = bb;
        int it = 0;
        bool conv = rr <= thr;
        bool broke = false;
        double k = 0.0;  // K = sum over iterations of alpha w^T p

        // ---------------------------------------------------------------- PCG
        while (!conv && it < max_iter) {
            // XMV: y = (A∘E) p on the fly, a = DG p - y, pa = p.a, wp = w.p (the lane's own entries)
            double pa = 0.0, wp = 0.0;
            for (int tp = 0; tp < n_tp; ++tp) {
                const int I = tp / nt2, I2 = tp - I * nt2;
                double acca = 0.0, accb = 0.0;
                XMV_TILE_PAIR(acca, accb)
                const int ia = (tp << 6) + oa;
                const int ib = (tp << 6) + ob;
                const double pa_ = P[ia], pb_ = P[ib];
                const double va = DG[ia] * pa_ - acca;
                const double vb = DG[ib] * pb_ - accb;
                A[ia] = (a_t)va;
                A[ib] = (a_t)vb;
                pa += pa_ * va + pb_ * vb;
                wp += W[ia] * pa_ + W[ib] * pb_;
            }
            warp_sum2(pa, wp);
            if (!(pa > 0.0) || !isfinite(pa)) {  // breakdown: not SPD in finite precision
                broke = true;
                break;
            }
            const double alpha = rz / pa;
            k += alpha * wp;
            double rz_new = 0.0, rr_new = 0.0;
            for (int tp = 0; tp < n_tp; ++tp) {
#pragma unroll
                for (int s = 0; s < 2; ++s) {
                    const int idx = (tp << 6) + (s ? ob : oa);
                    const double r = R[idx] - alpha * (double)A[idx];
                    R[idx] = r;
                    const double z = r * DI[idx];
                    rz_new += r * z;
                    rr_new += r * r;
                }
            }
            warp_sum2(rz_new, rr_new);
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
            __syncwarp();  // every lane's XMV reads of P are done
            for (int tp = 0; tp < n_tp; ++tp) {
                const int ia = (tp << 6) + oa, ib = (tp << 6) + ob;
                P[ia] = R[ia] * DI[ia] + beta * P[ia];
                P[ib] = R[ib] * DI[ib] + beta * P[ib];
            }
            __syncwarp();  // the new P is visible to every lane's XMV
        }

        if (lane == 0) {
            out_k[jb] = k;
            out_iter[jb] = it;
            out_res[jb] = bb > 0.0 ? sqrt(rr / bb) : 0.0;
            out_conv[jb] = (conv && !broke && isfinite(k)) ? 1 : 0;
        }
        __syncwarp();  // P of this job is read no more before the next job's init writes it
    }
}
