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
// Placeholders filled by mgkflow.gpu.source: BLOCK, ADAPTIVE, COMMON (mgk_common.cuh: the warp
// reductions), PRIMITIVES (the text of octile_primitives.cuh), XMV_FRAGMENT, XMV_PARAMS, NODE_KERNEL, EDGE_KERNEL,
// LOAD_V1/LOAD_V2 (node label loads), LOAD_E1/LOAD_E2 (edge label loads),
// A_TYPE (float or double storage of a = M p), W_TYPE/COEF (edge weights stored as float,
// or as double when some weight is not exactly a float).
//
// RESIDENT (value-only builds; use_smem 3): the search direction P, the residual R and a = M p live in
// shared memory and no solution vector is kept: K = p^T x with x = sum_k alpha_k p_k is accumulated as
// sum_k alpha_k (w^T p_k), w_u = p_i p'_i2, w^T p summed by the direction update (over P as stored) and
// reduced with the XMV's p^T a. Only DG, DI and W stay in global memory (read only: a launch's working set
// stays in L2). Pairs of up to ~11,000 product unknowns
// (96-node graphs: 9,216) fit one SM this way; the launch then runs one 1,024-thread block per SM. The
// block's warps take contiguous ranges of half tile pairs of about equal cost (XMV_PASS_HALVES); row-pair XMV only.
// F32_SUMS (resident builds whose edge kernel is one SquareExponential and whose weights are stored as float32;
// mgkflow.gpu.source.kernel_source): the search direction is float32 (value builds: in its float64 slot, so the
// resident bins are those of the float64 layout; gradient builds: the float2 P below) and the row-pair XMV sums each
// G1 nonzero's products in float32, one FFMA a product without a float64 conversion (row_pair in
// octile_primitives.cuh, row_pair2 in xmv_row_pair.cuh), the sums added in float64. The products' coefficients are
// float32 already (the exponential), and K stays at their level (NOTES.md, session 33); kernels with exact
// coefficients (constants, Kronecker deltas) keep the float64 sums and their ~1e-15 agreement with the CPU.
// VALUE_CG (the F32_SUMS value builds with a float32 a_t; mgkflow.gpu.source.value_cg): the PCG in the
// Chronopoulos-Gear form of mgk_compact.cu: the XMV of z = fl32(D^-1 r) (in P) into q = M z (float32, in the
// second half of P's float64 slots: 20 bytes an unknown, as before), a = q + beta a, and one vector loop a step
// with the residual test before the XMV (NOTES.md, session 35).
// RESIDENT with GRADIENT: the joint PCG of x and the adjoint y with both search directions (float2), both
// products A, AY and both residuals (float32) in shared memory, 24 bytes an unknown; X, XY, DG and DI in global
// memory (4 vectors a pair: a launch's stay in L2); then dK/dh (pairs over half an SM's shared memory:
// mgkflow/gpu/gradient.py).
//
// Optional sections (off in value-only builds; the preprocessed value-only code is unchanged):
// GRADIENT (mgk_gradient.cuh spliced as GRADIENT_FRAGMENT: one PCG loop with two recurrences, x and
// the adjoint y (M y = p_x), sharing each XMV pass, then dK/dh per pair
// into out_grad;
// docs/gradients.md) and NODAL (p_i p'_i' x_ii' of every pair into out_nodal, rows and columns in the
// graphs' original node order). EXTRA_PARAMS adds their kernel parameters.

#define BLOCK ${BLOCK}
#define MIN_BLOCKS ${MIN_BLOCKS}
#define ADAPTIVE ${ADAPTIVE}
#define ROW_ILP ${ROW_ILP}
#define P_SMEM ${P_SMEM}
#define GRADIENT ${GRADIENT}
#define NODAL ${NODAL}
#define RESIDENT ${RESIDENT}
#define F32_SUMS ${F32_SUMS}
#define VALUE_CG ${VALUE_CG}
// F32_SUMS builds (one SquareExponential edge kernel): SE_E(k) is edge k's label and SE_SIGMA = sqrt(log2(e) / (2
// l^2)) (mgk_kpar's last value): the kernel is exp2(-(a' - b')^2) with a' = sigma a scaled once a G1 nonzero, per
// product one FFMA (the scaled difference), one FMUL and one MUFU.EX2, where exp2(g (a - b)^2) took an FADD and
// two FMULs
${SE_DEFINES}
// a work unit's fixed cost per output in products (the schedule's estimate: addressing, the diagonal, the store)
#define UNIT_OVERHEAD 4
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
#define NODE_KERNEL_EXPR (${NODE_KERNEL})
#define NWARP (BLOCK / 32)
typedef ${A_TYPE} a_t;
#if GRADIENT && RESIDENT
// the residuals of the joint resident PCG, in shared memory beside P, A and A_y (24 bytes an unknown):
// float32, whose rounding leaves K within ~3e-8 of the float64 solve (NOTES.md, session 29), the level of the
// float32 edge-kernel coefficients
typedef float r_t;
#else
typedef double r_t;
#endif
typedef ${W_TYPE} w_t;
// the resident value PCG's search direction (F32_SUMS: float32)
#if F32_SUMS
typedef float p_t;
#else
typedef double p_t;
#endif
// coefficient A_ij A'_i'j' ke of one product, in double
#define COEF(w1, w2, ke) ${COEF}

${COMMON}

${PRIMITIVES}

// Two consecutive entries (idx even: every vector starts at a multiple of n_max, a multiple of 64 entries) in
// one 8- or 16-byte access, as doubles: the joint resident PCG's update loops walk unknown pairs (S29-C: +5%)
__device__ __forceinline__ void ld2(const float* p, double& a, double& b)
{
    const float2 v = *reinterpret_cast<const float2*>(p);
    a = v.x;
    b = v.y;
}
__device__ __forceinline__ void ld2(const double* p, double& a, double& b)
{
    const double2 v = *reinterpret_cast<const double2*>(p);
    a = v.x;
    b = v.y;
}
__device__ __forceinline__ void st2(float* p, const double a, const double b)
{
    *reinterpret_cast<float2*>(p) = make_float2((float)a, (float)b);
}
__device__ __forceinline__ void st2(double* p, const double a, const double b)
{
    *reinterpret_cast<double2*>(p) = make_double2(a, b);
}

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

// The tiles (I, I2) of tile pair tp = I nt2 + I2 as a warp walks its range of units in order (the passes over
// half tile pairs): one division a pass (TP_CURSOR, at the range's first unit k0), then a carry a tile pair
// (TP_NEXT), where a division by the run-time nt2 took some twenty instructions every tile pair (NWS labeled values:
// device time -3%, S31-D). The gradient's joint pass keeps the division: there the cursor's two registers cost its
// weighted builds 12-32 more bytes of spills, and NWS and BA gradients ran no faster (S31-D).
#define TP_CURSOR(k0) int cI_ = ((k0) >> 1) / nt2, cI2_ = ((k0) >> 1) - cI_ * nt2;
#define TP_NEXT                                                                                        \
    if (++cI2_ == nt2) {                                                                               \
        cI2_ = 0;                                                                                      \
        ++cI_;                                                                                         \
    }

// The XMV of one tile pair tp = I nt2 + I2 for a lane (after XMV_LANE_SETUP; I, I2 in the caller's scope): y =
// (A∘E) P by the strategy's XMV_TILE_PAIR, A_OUT = DG P - y (stored as a_t) and ACC += P . A_OUT (the lane's share).
// Declares pa_, pb_ (the lane's two entries of P) in the caller's scope.
#define XMV_TILE_PAIR_A(tp, A_OUT, ACC)                                                                \
    double acca = 0.0, accb = 0.0;                                                                     \
    XMV_TILE_PAIR(acca, accb)                                                                          \
    const long long ia = ((long long)tp << 6) + oa;                                                    \
    const long long ib = ((long long)tp << 6) + ob;                                                    \
    const double pa_ = P[ia], pb_ = P[ib];                                                             \
    const double va = DG[ia] * pa_ - acca;                                                             \
    const double vb = DG[ib] * pb_ - accb;                                                             \
    A_OUT[ia] = (a_t)va;                                                                               \
    A_OUT[ib] = (a_t)vb;                                                                               \
    ACC += pa_ * va + pb_ * vb;

// One XMV pass of a lane over its warp's range of output tile pairs (SCHEDULE_RANGES), or, with P in global
// memory (XMV_RR), over tile pairs warp, warp + NWARP, ...: the warps then work side by side on neighbouring
// tile pairs, whose P entries they share in the caches (ranges measured 20% slower on a mixed set, S23-C). The
// value PCG runs it on (P, A), the gradient's single-recurrence steps on x's or the adjoint's.
// UNIT_HALVES: the schedule's units are half tile pairs (resident launches; gradient launches of 1,024-thread
// blocks with P in shared memory, where 32 warps share a pair's tile pairs)
#define UNIT_HALVES (RESIDENT || (GRADIENT && P_SMEM && BLOCK >= 1024))
#if RESIDENT || P_SMEM
#define XMV_RR 0
#else
#define XMV_RR (use_smem == 0)
#endif
#if UNIT_HALVES
#define XMV_PASS(A_OUT, ACC) XMV_PASS_HALVES(A_OUT, ACC, , )
#else
#define XMV_PASS(A_OUT, ACC)                                                                           \
    for (int tp = s_start[warp], e_ = XMV_RR ? n_tp : s_start[warp + 1]; tp < e_; tp += XMV_RR ? NWARP : 1) { \
        const int I = tp / nt2, I2 = tp - I * nt2;                                                     \
        XMV_TILE_PAIR_A(tp, A_OUT, ACC)                                                                \
    }
#endif

// The pair's schedule: work units 0 .. n - 1 (the XMV's tile pairs, or half tile pairs where UNIT_HALVES)
// cut into NWARP contiguous ranges of about equal cost; warp w takes units s_start[w] .. s_start[w + 1] - 1 in
// order. Unit u goes to warp floor(NWARP m_u / total), m_u its cost's midpoint in the prefix sum, so a unit
// costlier than a warp's share leaves the warps its midpoint skips empty. COST(c, u) gives a unit's cost (>= 1:
// the strategy's estimate of its busiest lane's work) by one thread. Integers throughout and a schedule fixed
// by the pair: each lane's sums add in the same order every run. Mirrored on the host by mgkflow/gpu/schedule.py
// (tests/test_schedule.py); its lane-work model (python -m mgkflow.bench balance) puts the BA XMV pass of
// 1,024-thread resident blocks at 0.64x the time of the decreasing-cost snake it replaces with half tile pairs
// (0.79x with whole ones), and the 512-thread gradient's at 0.65x its round robin (NOTES.md, session 23).
#define SCHEDULE_RANGES(N_UNITS, COST)                                                                 \
    {                                                                                                  \
        const int n_ = (N_UNITS);                                                                      \
        long long t_ = 0;                                                                              \
        for (int u = tid; u < n_; u += BLOCK) {                                                        \
            int c_;                                                                                    \
            COST(c_, u)                                                                                \
            t_ += c_;                                                                                  \
        }                                                                                              \
        for (int o = 16; o > 0; o >>= 1) t_ += __shfl_xor_sync(0xffffffffu, t_, o);                   \
        if (lane == 0) s_wsum[warp] = t_;                                                              \
        if (tid <= NWARP) s_start[tid] = n_;                                                           \
        __syncthreads();                                                                               \
        long long total_ = 0;                                                                          \
        for (int w = 0; w < NWARP; ++w) total_ += s_wsum[w];                                           \
        __syncthreads();                                                                               \
        long long carry_ = 0;                                                                          \
        for (int base = 0; base < n_; base += BLOCK) {                                                 \
            const int u = base + tid;                                                                  \
            int c_ = 0;                                                                                \
            if (u < n_) COST(c_, u)                                                                    \
            long long incl_ = c_;                                                                      \
            for (int d = 1; d < 32; d <<= 1) {                                                         \
                const long long v_ = __shfl_up_sync(0xffffffffu, incl_, d);                            \
                if (lane >= d) incl_ += v_;                                                            \
            }                                                                                          \
            if (lane == 31) s_wsum[warp] = incl_;                                                      \
            __syncthreads();                                                                           \
            long long off_ = carry_;                                                                   \
            for (int w = 0; w < NWARP; ++w) {                                                          \
                const long long ws_ = s_wsum[w];                                                       \
                if (w < warp) off_ += ws_;                                                             \
                carry_ += ws_;                                                                         \
            }                                                                                          \
            if (u < n_) {                                                                              \
                const long long m2_ = 2 * (incl_ + off_) - c_; /* twice the midpoint */                \
                atomicMin(&s_start[(int)min((long long)(NWARP - 1), m2_ * NWARP / (2 * total_))], u);  \
            }                                                                                          \
            __syncthreads();                                                                           \
        }                                                                                              \
        if (warp == 0) { /* warps without a unit start where the next warp does: a suffix minimum */   \
            int st_ = lane < NWARP ? s_start[lane] : n_;                                               \
            for (int d = 1; d < 32; d <<= 1) {                                                         \
                const int v_ = __shfl_down_sync(0xffffffffu, st_, d);                                  \
                if (lane + d < 32) st_ = min(st_, v_);                                                 \
            }                                                                                          \
            if (lane < NWARP) s_start[lane] = st_;                                                     \
        }                                                                                              \
        __syncthreads();                                                                               \
    }

// One XMV pass over the warp's range of half tile pairs (SCHEDULE_RANGES, UNIT_HALVES), unit 2 tp the output
// oa of every lane of tile pair tp, 2 tp + 1 the output ob (XMV_UNIT of the strategy), both at once where the
// range holds both (two independent chains); ON_PAIR / ON_ONE run after a whole tile pair (pa_, pb_, I, I2 in
// scope) / a single output (p_, o_, I, I2).
#define XMV_PASS_HALVES(A_OUT, ACC, ON_PAIR, ON_ONE)                                                   \
    {                                                                                                  \
    TP_CURSOR(s_start[warp])                                                                           \
    for (int k_ = s_start[warp], e_ = s_start[warp + 1]; k_ < e_;) {                                   \
        const int tp = k_ >> 1;                                                                        \
        const int I = cI_, I2 = cI2_;                                                                  \
        if (!(k_ & 1) && k_ + 1 < e_) {                                                                \
            XMV_TILE_PAIR_A(tp, A_OUT, ACC)                                                            \
            ON_PAIR                                                                                    \
            k_ += 2;                                                                                   \
            TP_NEXT                                                                                    \
        } else {                                                                                       \
            const int o_ = (k_ & 1) ? ob : oa;                                                         \
            double acc_;                                                                               \
            XMV_UNIT(acc_, o_)                                                                         \
            const long long i_ = ((long long)tp << 6) + o_;                                            \
            const double p_ = P[i_];                                                                   \
            const double v_ = DG[i_] * p_ - acc_;                                                      \
            A_OUT[i_] = (a_t)v_;                                                                       \
            ACC += p_ * v_;                                                                            \
            ON_ONE                                                                                     \
            k_ += 1;                                                                                   \
            if (!(k_ & 1)) TP_NEXT /* past the tile pair's second half */                              \
        }                                                                                              \
    }                                                                                                  \
    }

// The joint PCG's two search directions at entry i (doubles): P and PY, or in resident builds one float2 array P
// (P[i] = (p_i, py_i): one 8-byte shared load a product for both in the XMV, xmv_row_pair.cuh)
// (P_LOAD(v, i) reads entry i once into v where the two are interleaved; P_X(v, i), P_Y(v, i) are the two values)
#if RESIDENT
#define P_LOAD(v, i) const float2 v = P[i];
#define P_X(v, i) ((double)(v).x)
#define P_Y(v, i) ((double)(v).y)
#else
#define P_LOAD(v, i)
#define P_X(v, i) P[i]
#define P_Y(v, i) PY[i]
#endif

// The joint pass's work on tile pair tp: both outputs of the lane, both directions (P, PY -> A, AY).
#define XMV_JOINT_TILE_PAIR(tp)    \
    {                                                                                          \
    const int I = tp / nt2, I2 = tp - I * nt2;                                                     \
    double acca, accb, acca2, accb2;                                                               \
    XMV_TILE_PAIR2(acca, accb, acca2, accb2, (int)n_max)                                           \
    const long long ia = ((long long)tp << 6) + oa;                                                \
    const long long ib = ((long long)tp << 6) + ob;                                                \
    const double dga = DG[ia], dgb = DG[ib];                                                       \
    P_LOAD(pqa_, ia)                                                                               \
    P_LOAD(pqb_, ib)                                                                               \
    const double pa_ = P_X(pqa_, ia), pb_ = P_X(pqb_, ib);                                         \
    const double va = dga * pa_ - acca;                                                            \
    const double vb = dgb * pb_ - accb;                                                            \
    A[ia] = (a_t)va;                                                                               \
    A[ib] = (a_t)vb;                                                                               \
    pa += pa_ * va + pb_ * vb;                                                                     \
    const double qa_ = P_Y(pqa_, ia), qb_ = P_Y(pqb_, ib);                                         \
    const double wa = dga * qa_ - acca2;                                                           \
    const double wb = dgb * qb_ - accb2;                                                           \
    AY[ia] = (a_t)wa;                                                                              \
    AY[ib] = (a_t)wb;                                                                              \
    pay += qa_ * wa + qb_ * wb;                                                                    \
    }

// The thread's share of K = p^T x = sum over the product entries of p_i p'_i2 X (blocked layout; padding
// has p = 0), added to k. The value and the gradient configurations end each pair with it.
#define PAIR_K(k)                                                                                      \
    for (long long idx = tid; idx < N; idx += BLOCK) {                                                 \
        const int tp = (int)(idx >> 6), e = (int)(idx & 63);                                           \
        const int I = tp / nt2, I2 = tp - I * nt2;                                                     \
        const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);                                         \
        k += pvec[h1.node_off + i] * pvec[h2.node_off + i2] * X[idx];                                  \
    }

#if GRADIENT
// Sum two doubles over the block; every thread gets the totals (gradient builds: every thread sums the
// partials, which keeps the joint PCG's registers within the 64-register bound).
__device__ __forceinline__ void block_sum2(double& a, double& b, double* buf)
{
    warp_partials2(a, b, buf);
    a = 0.0;
    b = 0.0;
#pragma unroll
    for (int k = 0; k < NWARP; ++k) {
        a += buf[k];
        b += buf[NWARP + k];
    }
    __syncthreads();
}
#else
// Sum two doubles over the block; every thread gets the totals: the warps' sums (warp_partials2), then warp 0
// sums the NWARP partials by a butterfly (lane l reads partial l) and leaves the totals in buf[2 NWARP ..]
// (red: 2 NWARP + 2 doubles): two shared loads a thread and two barriers, where summing the partials in every
// thread took 2 NWARP loads.
__device__ __forceinline__ void block_sum2(double& a, double& b, double* buf)
{
    warp_partials2(a, b, buf);
    if (threadIdx.x < 32) {
        const int l = threadIdx.x;
        double x = l < NWARP ? buf[l] : 0.0, y = l < NWARP ? buf[NWARP + l] : 0.0;
        warp_sum2(x, y);
        if (l == 0) {
            buf[2 * NWARP] = x;
            buf[2 * NWARP + 1] = y;
        }
    }
    __syncthreads();
    a = buf[2 * NWARP];
    b = buf[2 * NWARP + 1];
}
#endif

// the pair's schedule (SCHEDULE_RANGES): the first work unit of each warp's range, then the end (block scope, at
// file scope so that the gradient's contraction walks the same ranges)
__shared__ int s_start[NWARP + 1];

${GRADIENT_FRAGMENT}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) mgk_solve(
    const int* __restrict__ hdr,                  // 5 ints per graph
    ${XMV_PARAMS},
    MGK_NODE_PARAMS,                              // nlab, nlab_stride, dvec, pvec, qvec (mgk_common.cuh)
    MGK_JOB_PARAMS,                               // jobs, n_jobs, job_counter, out_k, out_iter, out_res, out_conv
    double* __restrict__ scratch,                 // per block: X, R, DG, DI [, P, A]
    const long long scratch_per_block,            // doubles
    const int use_smem,                           // 1: P and A in shared memory, 2: P only, 0: none
    const long long n_max,                        // largest product size of this launch
    const double rtol,
    const int max_iter${EXTRA_PARAMS})
{
    extern __shared__ double smem[];
    __shared__ double red[VALUE_CG ? 4 * NWARP : 2 * NWARP + 2];
    __shared__ int s_job;
    // the warps' sums of the schedule's costs (SCHEDULE_RANGES)
    __shared__ long long s_wsum[NWARP];

    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    double* blk = scratch + (long long)blockIdx.x * scratch_per_block;
#if RESIDENT
    // DG, DI in global memory (use_smem 3); value builds: P, R and A in shared memory, no X; gradient builds (the
    // joint PCG): the solutions X and XY after DI, and P (float2: p, py), A, AY, R, RY (r_t) in shared memory
    double* const DG = blk;
    double* const DI = DG + n_max;
#if !GRADIENT
    double* const W = DI + n_max;  // w_u = p_i p'_i2 (zero on padding): w^T p summed in the direction update
#endif
#if GRADIENT
    double* const X = DI + n_max;
    double* const XY = X + n_max;
    float2* const P = (float2*)smem;
    a_t* const A = (a_t*)(P + n_max);
    a_t* const AY = A + n_max;
    r_t* const R = (r_t*)(AY + n_max);
    r_t* const RY = R + n_max;
#else
    p_t* const P = (p_t*)smem;  // F32_SUMS: a float32 search direction in its float64 slot
#if VALUE_CG
    a_t* const Q = (a_t*)(P + n_max);  // q = M z, in the second half of P's float64 slots (float32 z, float32 a_t)
#endif
    double* const R = smem + n_max;
    a_t* const A = (a_t*)(R + n_max);
#endif
#else
    double* X = blk;
    double* R = X + n_max;
    double* DG = R + n_max;
    double* DI = DG + n_max;
#if GRADIENT
    // joint PCG of x (M x = b) and the adjoint y (M y = p_x): X, R, DG, DI, XY, RY in global memory,
    // then the search directions P, PY (= P + n_max) and the products A, AY (= A + n_max) in shared
    // memory (use_smem 1), P and PY only (2) or after the global vectors (0)
    double* const XY = DI + n_max;
    double* const RY = XY + n_max;
#if P_SMEM
    double* const P = smem;
    a_t* const A = use_smem == 1 ? (a_t*)(smem + 2 * n_max) : (a_t*)(RY + n_max);
#else
    double* const P = use_smem ? smem : RY + n_max;
    a_t* const A = use_smem == 1 ? (a_t*)(smem + 2 * n_max) : (a_t*)(use_smem ? RY + n_max : RY + 3 * n_max);
#endif
    double* const PY = P + n_max;
    a_t* const AY = A + n_max;
#elif P_SMEM
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
#endif  // RESIDENT

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
#if UNIT_HALVES
        SCHEDULE_RANGES(2 * n_tp, XMV_HALF_COST)  // half tile pairs (XMV_PASS_HALVES)
#else
        if (XMV_RR) {  // round robin (XMV_PASS)
            if (tid < NWARP) s_start[tid] = tid;
            __syncthreads();
        } else {
            SCHEDULE_RANGES(n_tp, XMV_TP_COST)  // tile pairs (XMV_PASS, the gradient's joint pass)
        }
#endif
#if GRADIENT
        // ---------------------------------------------------------------- joint PCG of x and y
        // Two independent Jacobi-PCG recurrences sharing the diagonal and every XMV pass: system x
        // (bit 1) is M x = b in X, R, P, A; system y (bit 2) the adjoint M y = p_x in XY, RY, PY, AY.
        // Each has its own alpha, beta, residual norm and stop; a system that converged (or broke down)
        // stops updating. While both run, each product coefficient is formed once for both directions
        // (XMV_TILE_PAIR2); afterwards the one-vector XMV runs on the remaining direction. Resident builds (P, A,
        // AY, R, RY in shared memory) run every pass joint (a stopped system's products formed and ignored) and walk
        // unknown pairs in the update loops.
        __shared__ double red4[4 * NWARP + 4 * RESIDENT];
        // per system (x, y): ||b||^2, threshold, last ||r||^2 and iterations, in shared memory (registers
        // are scarce around the XMV); thr is read by every thread, the rest by thread 0 only
        __shared__ double s_bb[2], s_thr[2], s_rr[2], s_rz[2][2];
        __shared__ int s_it[2];
        double rz = 0.0, bb = 0.0, rzy = 0.0, bby = 0.0;
        for (long long idx = tid; idx < N; idx += BLOCK) {
            double dg, b;
            system_entry(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, nlab, nlab_stride, dvec, qvec, dg, b);
            const double c = start_weight(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, pvec);
            const double di = 1.0 / dg;
            // the residuals as stored (r_t), the norms of the exact right-hand sides
            const double rb = (double)(r_t)b, rc = (double)(r_t)c;
            const double z = rb * di, zy = rc * di;
            DG[idx] = dg;
            DI[idx] = di;
            X[idx] = 0.0;
            R[idx] = (r_t)rb;
#if RESIDENT
            P[idx] = make_float2((float)z, (float)zy);
#else
            P[idx] = z;
#endif
            XY[idx] = 0.0;
            RY[idx] = (r_t)rc;
#if !RESIDENT
            PY[idx] = zy;
#endif
            rz += rb * z;
            bb += b * b;
            rzy += rc * zy;
            bby += c * c;
        }
        block_sum4(rz, bb, rzy, bby, red4);
        // a system has converged when its last ||r||^2 <= thr (breakdown, max_iter and a non-finite
        // residual leave it above): no flags in registers
        int it = 0;
        int act = (bb <= rtol * rtol * bb ? 0 : 1) | (bby <= rtol * rtol * bby ? 0 : 2);
        if (tid == 0) {
            s_bb[0] = bb;
            s_bb[1] = bby;
            s_thr[0] = rtol * rtol * bb;
            s_thr[1] = rtol * rtol * bby;
            s_rr[0] = bb;
            s_rr[1] = bby;
            s_it[0] = 0;
            s_it[1] = 0;
            s_rz[0][0] = rz;
            s_rz[0][1] = rzy;
        }

        while (act && it < max_iter) {
            // XMV: a = DG p - (A∘E) p for each running direction, pa = p.a
            double pa = 0.0, pay = 0.0;
            {
                XMV_LANE_SETUP
                if (RESIDENT || act == 3) {
#if UNIT_HALVES
                    for (int k_ = s_start[warp], e_ = s_start[warp + 1]; k_ < e_;) {
                        if (!(k_ & 1) && k_ + 1 < e_) {
                            const int tp = k_ >> 1;
                            XMV_JOINT_TILE_PAIR(tp)
                            k_ += 2;
                        } else {  // one output of each lane, both directions
                            const int tp = k_ >> 1;
                            const int I = tp / nt2, I2 = tp - I * nt2;
                            const int o_ = (k_ & 1) ? ob : oa;
                            double acc_, acc2_;
                            XMV_UNIT2(acc_, acc2_, o_, (int)n_max)
                            const long long i_ = ((long long)tp << 6) + o_;
                            const double dg_ = DG[i_];
                            P_LOAD(pq_, i_)
                            const double p_ = P_X(pq_, i_);
                            const double v_ = dg_ * p_ - acc_;
                            A[i_] = (a_t)v_;
                            pa += p_ * v_;
                            const double q_ = P_Y(pq_, i_);
                            const double w_ = dg_ * q_ - acc2_;
                            AY[i_] = (a_t)w_;
                            pay += q_ * w_;
                            k_ += 1;
                        }
                    }
#else
                    for (int tp = s_start[warp], e_ = XMV_RR ? n_tp : s_start[warp + 1]; tp < e_;
                         tp += XMV_RR ? NWARP : 1) {
                        XMV_JOINT_TILE_PAIR(tp)
                    }
#endif
                }
#if !RESIDENT
                else {
                    double* const Pc = act == 1 ? P : PY;
                    a_t* const Ac = act == 1 ? A : AY;
                    double ps = 0.0;
                    {
                        const double* const P = Pc;
                        XMV_PASS(Ac, ps)
                    }
                    if (act == 1) pa = ps; else pay = ps;
                }
#endif
            }
            block_sum2(pa, pay, red);
            double alpha = 0.0, alphay = 0.0;
            if (act & 1) {
                if (!(pa > 0.0) || !isfinite(pa)) {  // breakdown: not SPD in finite precision
                    act &= ~1;
                    if (tid == 0) s_it[0] = it;
                } else {
                    alpha = s_rz[it & 1][0] / pa;
                }
            }
            if (act & 2) {
                if (!(pay > 0.0) || !isfinite(pay)) {
                    act &= ~2;
                    if (tid == 0) s_it[1] = it;
                } else {
                    alphay = s_rz[it & 1][1] / pay;
                }
            }
            if (!act) break;
            double rz_new = 0.0, rr_new = 0.0, rzy_new = 0.0, rry_new = 0.0;
#if RESIDENT
            // unknown pairs (ld2): P of two unknowns is one float4 (p, py, p', py')
            for (long long idx = 2 * tid; idx < N; idx += 2 * BLOCK) {
                double d0, d1;
                ld2(DI + idx, d0, d1);
                const float4 pq = *reinterpret_cast<const float4*>(P + idx);
                if (act & 1) {
                    double r0, r1, a0, a1, x0, x1;
                    ld2(R + idx, r0, r1);
                    ld2(A + idx, a0, a1);
                    ld2(X + idx, x0, x1);
                    r0 = (double)(r_t)(r0 - alpha * a0);
                    r1 = (double)(r_t)(r1 - alpha * a1);
                    st2(X + idx, x0 + alpha * (double)pq.x, x1 + alpha * (double)pq.z);
                    st2(R + idx, r0, r1);
                    rz_new += r0 * (r0 * d0) + r1 * (r1 * d1);
                    rr_new += r0 * r0 + r1 * r1;
                }
                if (act & 2) {
                    double r0, r1, a0, a1, x0, x1;
                    ld2(RY + idx, r0, r1);
                    ld2(AY + idx, a0, a1);
                    ld2(XY + idx, x0, x1);
                    r0 = (double)(r_t)(r0 - alphay * a0);
                    r1 = (double)(r_t)(r1 - alphay * a1);
                    st2(XY + idx, x0 + alphay * (double)pq.y, x1 + alphay * (double)pq.w);
                    st2(RY + idx, r0, r1);
                    rzy_new += r0 * (r0 * d0) + r1 * (r1 * d1);
                    rry_new += r0 * r0 + r1 * r1;
                }
            }
#else
            for (long long idx = tid; idx < N; idx += BLOCK) {
                const double di = DI[idx];
                if (act & 1) {
                    const double r = R[idx] - alpha * (double)A[idx];
                    X[idx] += alpha * P[idx];
                    R[idx] = r;
                    const double z = r * di;
                    rz_new += r * z;
                    rr_new += r * r;
                }
                if (act & 2) {
                    const double r = RY[idx] - alphay * (double)AY[idx];
                    XY[idx] += alphay * PY[idx];
                    RY[idx] = r;
                    const double z = r * di;
                    rzy_new += r * z;
                    rry_new += r * r;
                }
            }
#endif
            block_sum4(rz_new, rr_new, rzy_new, rry_new, red4);
            ++it;
            double beta = 0.0, betay = 0.0;
            if (act & 1) {
                if (tid == 0) s_rr[0] = rr_new;
                if (rr_new <= s_thr[0] || !isfinite(rr_new)) {  // converged, or broke down
                    act &= ~1;
                    if (tid == 0) s_it[0] = it;
                } else {
                    beta = rz_new / s_rz[(it - 1) & 1][0];
                    if (tid == 0) s_rz[it & 1][0] = rz_new;
                }
            }
            if (act & 2) {
                if (tid == 0) s_rr[1] = rry_new;
                if (rry_new <= s_thr[1] || !isfinite(rry_new)) {
                    act &= ~2;
                    if (tid == 0) s_it[1] = it;
                } else {
                    betay = rzy_new / s_rz[(it - 1) & 1][1];
                    if (tid == 0) s_rz[it & 1][1] = rzy_new;
                }
            }
            if (!act) break;
#if RESIDENT
            for (long long idx = 2 * tid; idx < N; idx += 2 * BLOCK) {
                double d0, d1;
                ld2(DI + idx, d0, d1);
                float4 pq = *reinterpret_cast<const float4*>(P + idx);
                if (act & 1) {
                    double r0, r1;
                    ld2(R + idx, r0, r1);
                    pq.x = (float)(r0 * d0 + beta * (double)pq.x);
                    pq.z = (float)(r1 * d1 + beta * (double)pq.z);
                }
                if (act & 2) {
                    double r0, r1;
                    ld2(RY + idx, r0, r1);
                    pq.y = (float)(r0 * d0 + betay * (double)pq.y);
                    pq.w = (float)(r1 * d1 + betay * (double)pq.w);
                }
                *reinterpret_cast<float4*>(P + idx) = pq;
            }
#else
            for (long long idx = tid; idx < N; idx += BLOCK) {
                const double di = DI[idx];
                if (act & 1) P[idx] = R[idx] * di + beta * P[idx];
                if (act & 2) PY[idx] = RY[idx] * di + betay * PY[idx];
            }
#endif
            __syncthreads();
        }
        if (tid == 0) {  // stopped by max_iter
            if (act & 1) s_it[0] = it;
            if (act & 2) s_it[1] = it;
        }

        // ---------------------------------------------------------------- K = p^T x, dK/dh
        double k = 0.0, dummy2 = 0.0;
        PAIR_K(k)
        block_sum2(k, dummy2, red);
        grad_contraction(h1, h2, nt2, n_tp, N, X, XY, nlab, nlab_stride, dvec, qvec, rrowptr, rcoff, rweight, relab,
                         relab_stride, out_grad + (long long)jb * N_GRAD, red);
        if (tid == 0) {
            out_k[jb] = k;
            // the worse of the two solves
            out_iter[jb] = max(s_it[0], s_it[1]);
            out_res[jb] = fmax(s_bb[0] > 0.0 ? sqrt(s_rr[0] / s_bb[0]) : 0.0,
                               s_bb[1] > 0.0 ? sqrt(s_rr[1] / s_bb[1]) : 0.0);
            out_conv[jb] = (s_rr[0] <= s_thr[0] && s_rr[1] <= s_thr[1] && isfinite(k)) ? 1 : 0;
        }
#else
#if VALUE_CG
        // ---------------------------------------------------------------- init: z = fl32(D^-1 b), a = 0
        double gm = 0.0, rr = 0.0, wz = 0.0;  // this thread's shares of r.z, r.r and w.z
        for (long long idx = tid; idx < N; idx += BLOCK) {
            double dg, b;
            system_entry(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, nlab, nlab_stride, dvec, qvec, dg, b);
            const double di = 1.0 / dg;
            const p_t z = (p_t)(b * di);
            const double w_ = start_weight(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, pvec);
            DG[idx] = dg;
            DI[idx] = di;
            W[idx] = w_;
            R[idx] = b;
            P[idx] = z;
            A[idx] = (a_t)0.0;
            gm += b * (double)z;
            rr += b * b;
            wz += w_ * (double)z;
        }
        // ---------------------------------------------------------------- PCG, Chronopoulos-Gear form
        // As mgk_compact.cu: the XMV is of z (P), q = M z (Q), and a = M p follows a = q + beta a (A), so that one
        // vector loop per step updates a, r and z and sums r.z, r.r and w.z of the new residual, where the classic
        // form has two loops with a block reduction between them. Those three sums are reduced at the loop's
        // barrier (the residual test before the XMV: a converged pair computes no XMV more than the classic form),
        // z.q after the XMV. K = sum_k alpha_k (w^T p_k) with w^T p = w^T z + beta w^T p_old (no solution vector);
        // q, a, r and K all follow z as stored (float32).
        // Block-uniform values in shared memory, where registers are scarce around the XMV: ||b||^2 and the
        // threshold, r.z and w.z of the current residual (thread 0 writes them after the barrier that ends the
        // step; read after the XMV's reduction), the last ||r||^2 (thread 0).
        __shared__ double s_cg[5];
        double g_old = 1.0, den_old = 0.0, wp = 0.0, kk = 0.0;
        int it = 0;
        bool conv = false, broke = false;
        for (;;) {
            // red: the warps' partials of r.z, r.r, w.z (values 0..2 of warp_scatter4) and of z.q (3 NWARP + w)
            warp_scatter4<3>(gm, rr, wz, 0.0, red);
            __syncthreads();  // z and the partials complete (the XMV's reads of P and Q ended before the update)
            double d_;
            block_total4<3>(gm, rr, wz, d_, red);
            if (tid == 0) {
                if (it == 0) {  // rr = b.b
                    s_cg[0] = rr;
                    s_cg[1] = rtol * rtol * rr;
                }
                s_cg[2] = gm;
                s_cg[3] = wz;
                s_cg[4] = rr;
            }
            CG_STOP(rr, (it ? s_cg[1] : rtol * rtol * rr), it, max_iter, conv, broke);
            double dl = 0.0;
            {
                XMV_LANE_SETUP
                XMV_PASS(Q, dl)
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) dl += shfl_xor(dl, o);
            if (lane == 0) red[3 * NWARP + warp] = dl;
            __syncthreads();
            dl = lane < NWARP ? red[3 * NWARP + lane] : 0.0;
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) dl += shfl_xor(dl, o);
            gm = s_cg[2];
            wz = s_cg[3];
            CG_SCALARS(gm, dl, wz, g_old, den_old, it, wp, kk, broke);  // beta, den (p.Mp), alpha; breakdown: leave
            g_old = gm;
            den_old = den;
            ++it;
            gm = 0.0;
            rr = 0.0;
            wz = 0.0;
            // unknown pairs (N is a multiple of 64): 8- and 16-byte accesses
            for (long long idx = 2 * tid; idx < N; idx += 2 * BLOCK) {
                double q0, q1, a0, a1, r0, r1, d0, d1, w0, w1;
                ld2(Q + idx, q0, q1);
                ld2(A + idx, a0, a1);
                ld2(R + idx, r0, r1);
                ld2(DI + idx, d0, d1);
                ld2(W + idx, w0, w1);
                a0 = (double)(a_t)(q0 + beta * a0);  // r follows a as stored
                a1 = (double)(a_t)(q1 + beta * a1);
                r0 -= alpha * a0;
                r1 -= alpha * a1;
                const double z0 = (double)(p_t)(r0 * d0), z1 = (double)(p_t)(r1 * d1);
                st2(A + idx, a0, a1);
                st2(R + idx, r0, r1);
                st2(P + idx, z0, z1);
                gm += r0 * z0 + r1 * z1;
                rr += r0 * r0 + r1 * r1;
                wz += w0 * z0 + w1 * z1;
            }
        }
        const double k = kk, bb = s_cg[0];
        rr = s_cg[4];
#else
        // ---------------------------------------------------------------- init
        double rz = 0.0, bb = 0.0;
#if RESIDENT
        double wp = 0.0;  // this thread's share of w^T p of the current direction (as stored)
#endif
        for (long long idx = tid; idx < N; idx += BLOCK) {
            double dg, b;
            system_entry(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, nlab, nlab_stride, dvec, qvec, dg, b);
            const double di = 1.0 / dg;
            const double z = b * di;
            DG[idx] = dg;
            DI[idx] = di;
#if !RESIDENT
            X[idx] = 0.0;
#endif
            R[idx] = b;
            P[idx] = z;
#if RESIDENT
            {
                const double w_ = start_weight(idx, nt2, h1.n, h2.n, h1.node_off, h2.node_off, pvec);
                W[idx] = w_;
                wp += w_ * (double)P[idx];
            }
#endif
            rz += b * z;
            bb += b * b;
        }
        block_sum2(rz, bb, red);
        const double thr = rtol * rtol * bb;
        double rr = bb;
#if RESIDENT
        double kk = 0.0;  // K accumulated from the steps
#endif
        int it = 0;
        bool conv = rr <= thr;
        bool broke = false;

        // ---------------------------------------------------------------- PCG
        while (!conv && it < max_iter) {
            // XMV: y = (A∘E) p on the fly, a = DG p - y, pa = p.a
            double pa = 0.0;
#if !RESIDENT
            double wp = 0.0;  // (K from X after the loop)
#endif
            {
                XMV_LANE_SETUP
                XMV_PASS(A, pa)
            }
            block_sum2(pa, wp, red);  // and w^T p (RESIDENT: summed by the direction update or the init)
            if (!(pa > 0.0) || !isfinite(pa)) {  // breakdown: not SPD in finite precision
                broke = true;
                break;
            }
            const double alpha = rz / pa;
#if RESIDENT
            kk += alpha * wp;
#endif
            double rz_new = 0.0, rr_new = 0.0;
            for (long long idx = tid; idx < N; idx += BLOCK) {
                const double r = R[idx] - alpha * (double)A[idx];
#if !RESIDENT
                X[idx] += alpha * P[idx];
#endif
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
#if RESIDENT
            // w^T p over the direction as stored, beside its update: the XMV then loads no start probabilities
            // (NWS labeled values -2% device time, S33-B)
            wp = 0.0;
            for (long long idx = tid; idx < N; idx += BLOCK) {
                const p_t p_ = (p_t)(R[idx] * DI[idx] + beta * P[idx]);
                P[idx] = p_;
                wp += W[idx] * (double)p_;
            }
#else
            for (long long idx = tid; idx < N; idx += BLOCK) P[idx] = R[idx] * DI[idx] + beta * P[idx];
#endif
            __syncthreads();
        }
        // ---------------------------------------------------------------- K = p^T x
#if RESIDENT
        const double k = kk;
#else
        double k = 0.0, dummy2 = 0.0;
        PAIR_K(k)
        block_sum2(k, dummy2, red);
#endif
#endif  // VALUE_CG
#if NODAL
        for (long long idx = tid; idx < N; idx += BLOCK) {
            const int tp = (int)(idx >> 6), e = (int)(idx & 63);
            const int I = tp / nt2, I2 = tp - I * nt2;
            const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
            // at the original node order: packed node a of a graph is its node nodal_perm[node_off + a]
            if (i < h1.n && i2 < h2.n)
                out_nodal[nodal_off[jb] + (long long)nodal_perm[h1.node_off + i] * h2.n +
                          nodal_perm[h2.node_off + i2]] = pvec[h1.node_off + i] * pvec[h2.node_off + i2] * X[idx];
        }
#endif
        if (tid == 0) {
            out_k[jb] = k;
            out_iter[jb] = it;
            out_res[jb] = bb > 0.0 ? sqrt(rr / bb) : 0.0;
            out_conv[jb] = (conv && !broke && isfinite(k)) ? 1 : 0;
        }
#endif  // GRADIENT (the joint PCG) / the value and nodal PCG
    }
}
