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
// Placeholders filled by mgkflow.gpu.wide.wide_source: BLOCK, ROW_ILP (float64 chains per lane
// in row_pair), DEFINES (label loads), NODE_KERNEL, EDGE_KERNEL, W_TYPE, COEF, PRIMITIVES
// (octile_primitives.cuh; its packed-row code stays out: ROW_PACK is not defined here).

#define BLOCK ${BLOCK}
#define ROW_ILP ${ROW_ILP}
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
#define NODE_KERNEL_EXPR (${NODE_KERNEL})
#define NWARP (BLOCK / 32)
typedef ${W_TYPE} w_t;
// coefficient A_ij A'_i'j' ke of one product, in double
#define COEF(w1, w2, ke) ${COEF}

${PRIMITIVES}

// Sum a and b over the block; thread 0 writes them to part[2*blockIdx.x], part[2*blockIdx.x + 1].
// Every thread of the block must call it (it synchronizes the block).
__device__ __forceinline__ void wide_block_partials(double a, double b, double* __restrict__ part)
{
    __shared__ double buf[2 * NWARP];
    warp_sum2(a, b);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0) {
        buf[w] = a;
        buf[NWARP + w] = b;
    }
    __syncthreads();
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
