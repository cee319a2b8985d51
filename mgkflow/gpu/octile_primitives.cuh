// mgkflow: the octile-pair primitives of the XMV (docs/design.md §5, paper §III-C).
//
// Spliced (by mgkflow.gpu.source) into the solver and into the primitives microbenchmark,
// after the definitions of w_t (edge weight storage type), COEF(w1, w2, ke) (one product's
// coefficient in double), EDGE_KERNEL_EXPR (the edge base kernel over e1_k / e2_k) and the
// label macros LOAD_E1/LOAD_E2 (which read `elab` and `elab_stride`).
//
// One warp processes one octile pair (an 8x8 tile of G1 and one of G2) of an output tile
// pair; lane l owns the output rows i = l / 4 of the G1 octile and i2a = l % 4, i2b = i2a + 4
// of the G2 octile, and accumulates
//     y(i, i2) += sum_{j, j2} A1(i, j) A2(i2, j2) ke(e1(i, j), e2(i2, j2)) P(j, j2)
// where P points to the 64 entries of the input tile pair (J, J2), row-major in (j, j2).
// Compact storage: the nonzeros of an octile sit at toff .. toff + popc(bitmap) in bitmap
// (row-major) order.
//
// Four primitives, chosen per octile pair from the two nonzero counts (the selection map is
// measured by `mgkflow bench primitives`):
//   PRIM_SS  sparse x sparse: set bits of the lane's G1 row x set bits of its G2 rows;
//   PRIM_DD  dense x dense:   all 8 x 8 columns, absent entries read as weight 0;
//   PRIM_DS  dense G1 row x sparse G2 rows;
//   PRIM_SD  sparse G1 row x dense G2 rows.
// Dense loops have a fixed trip count (no divergence between lanes); sparse loops skip zeros.

// Start weight w = p_i p'_i' at entry idx of the blocked product layout (0 on padding): K = w^T x, the
// right-hand side of the gradient's adjoint system and the resident value PCG's W.
__device__ __forceinline__ double start_weight(
    const long long idx, const int nt2, const int n1, const int n2, const int node_off1, const int node_off2,
    const double* __restrict__ pvec)
{
    const int tp = (int)(idx >> 6), e = (int)(idx & 63);
    const int I = tp / nt2, I2 = tp - I * nt2;
    const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
    return (i < n1 && i2 < n2) ? pvec[node_off1 + i] * pvec[node_off2 + i2] : 0.0;
}

#ifdef NODE_KERNEL_EXPR
// Entry idx of the blocked product layout: diagonal DG = d1 d2 / kv (kv the node kernel,
// floored at 1e-30) and right-hand side b = d1 d2 q1 q2; padding entries get DG = 1, b = 0.
// Shared by the per-pair solver and the wide solver (they need LOAD_V1/LOAD_V2 reading
// `nlab` / `nlab_stride`).
__device__ __forceinline__ void system_entry(
    const long long idx, const int nt2, const int n1, const int n2, const int node_off1, const int node_off2,
    const unsigned int* __restrict__ nlab, const long long nlab_stride,
    const double* __restrict__ dvec, const double* __restrict__ qvec, double& dg, double& b)
{
    const int tp = (int)(idx >> 6), e = (int)(idx & 63);
    const int I = tp / nt2, I2 = tp - I * nt2;
    const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
    dg = 1.0;
    b = 0.0;
    if (i < n1 && i2 < n2) {
        const int u1 = node_off1 + i, u2 = node_off2 + i2;
        LOAD_V1(u1);
        LOAD_V2(u2);
        float kv = NODE_KERNEL_EXPR;
        kv = fmaxf(kv, 1e-30f);
        const double dd = dvec[u1] * dvec[u2];
        dg = dd / (double)kv;
        b = dd * qvec[u1] * qvec[u2];
    }
}
#endif

#define PRIM_SS 0
#define PRIM_DD 1
#define PRIM_DS 2
#define PRIM_SD 3
#define N_PRIM 4

struct LaneRows {
    int sh1, sh2a, sh2b;
    unsigned long long below1, below2a, below2b;
};

__device__ __forceinline__ LaneRows lane_rows(const int lane)
{
    LaneRows L;
    const int i = lane >> 2, i2a = lane & 3, i2b = i2a + 4;
    L.sh1 = 8 * i;
    L.sh2a = 8 * i2a;
    L.sh2b = 8 * i2b;
    L.below1 = (1ull << L.sh1) - 1ull;
    L.below2a = (1ull << L.sh2a) - 1ull;
    L.below2b = (1ull << L.sh2b) - 1ull;
    return L;
}

// Entry j of an 8-bit row mask: (present, compact index; the row's first index when absent).
__device__ __forceinline__ int dense_index(const unsigned int row, const int base, const int j, bool& present)
{
    present = (row >> j) & 1u;
    return base + (present ? __popc(row & ((1u << j) - 1u)) : 0);
}

// The lane's two G2 rows, dense (all 8 columns, weight 0 where absent), against one G1 entry
// (w1, e1_k) and the P row Pr: used by the dense x dense and sparse x dense primitives.
#define DENSE_G2_ROWS(Pr)                                                                      \
    _Pragma("unroll") for (int j2 = 0; j2 < 8; ++j2)                                           \
    {                                                                                          \
        const double pv = (Pr)[j2];                                                            \
        bool ha, hb;                                                                           \
        const int ta = dense_index(rba, ba2, j2, ha);                                          \
        const int tb = dense_index(rbb, bb2, j2, hb);                                          \
        {                                                                                      \
            const w_t w2 = ha ? LOAD_W(weight, ta) : (w_t)0;                                        \
            LOAD_E2(ta);                                                                       \
            acca += COEF(w1, w2, (EDGE_KERNEL_EXPR)) * pv;                                     \
        }                                                                                      \
        {                                                                                      \
            const w_t w2 = hb ? LOAD_W(weight, tb) : (w_t)0;                                        \
            LOAD_E2(tb);                                                                       \
            accb += COEF(w1, w2, (EDGE_KERNEL_EXPR)) * pv;                                     \
        }                                                                                      \
    }

// The lane's two sparse G2 rows (set bits of rba from ba2, of rbb from bb2) against one G1 entry (w1,
// its labels) and the P row Pr: statements (they declare t2), the sparse counterpart of DENSE_G2_ROWS.
#define SPARSE_G2_ROWS(Pr)                                                                     \
    int t2 = ba2;                                                                              \
    for (unsigned int s2 = rba; s2; s2 &= s2 - 1u, ++t2) {                                     \
        const int j2 = __ffs(s2) - 1;                                                          \
        const w_t w2 = LOAD_W(weight, t2);                                                   \
        LOAD_E2(t2);                                                                           \
        acca += COEF(w1, w2, (EDGE_KERNEL_EXPR)) * Pr[j2];                                     \
    }                                                                                          \
    t2 = bb2;                                                                                  \
    for (unsigned int s2 = rbb; s2; s2 &= s2 - 1u, ++t2) {                                     \
        const int j2 = __ffs(s2) - 1;                                                          \
        const w_t w2 = LOAD_W(weight, t2);                                                   \
        LOAD_E2(t2);                                                                           \
        accb += COEF(w1, w2, (EDGE_KERNEL_EXPR)) * Pr[j2];                                     \
    }

template <int SEL>
__device__ __forceinline__ void octile_pair(
    const unsigned long long bm1, const int toff1,
    const unsigned long long bm2, const int toff2,
    const double* __restrict__ Pt, const LaneRows& L,
    const w_t* __restrict__ weight, const unsigned int* __restrict__ elab, const long long elab_stride,
    double& acca, double& accb)
{
    const unsigned int ra = (unsigned int)(bm1 >> L.sh1) & 0xffu;
    const unsigned int rba = (unsigned int)(bm2 >> L.sh2a) & 0xffu;
    const unsigned int rbb = (unsigned int)(bm2 >> L.sh2b) & 0xffu;
    const int base1 = toff1 + __popcll(bm1 & L.below1);
    const int ba2 = toff2 + __popcll(bm2 & L.below2a);
    const int bb2 = toff2 + __popcll(bm2 & L.below2b);
    if (SEL == PRIM_SS || SEL == PRIM_SD) {
        // sparse G1 row
        int t1 = base1;
        for (unsigned int s1 = ra; s1; s1 &= s1 - 1u, ++t1) {
            const int j = __ffs(s1) - 1;
            const w_t w1 = LOAD_W(weight, t1);
            LOAD_E1(t1);
            const double* Pr = Pt + j * 8;
            if (SEL == PRIM_SS) {
                SPARSE_G2_ROWS(Pr)
            } else {
                DENSE_G2_ROWS(Pr)
            }
        }
    } else {
        // dense G1 row: all 8 columns (weight 0 where absent)
#pragma unroll 1
        for (int j = 0; j < 8; ++j) {
            bool h1;
            const int t1 = dense_index(ra, base1, j, h1);
            const w_t w1 = h1 ? LOAD_W(weight, t1) : (w_t)0;
            LOAD_E1(t1);
            const double* Pr = Pt + j * 8;
            if (SEL == PRIM_DS) {
                SPARSE_G2_ROWS(Pr)
            } else {
                DENSE_G2_ROWS(Pr)
            }
        }
    }
}

// Run the primitive `sel` (warp-uniform) on one octile pair.
__device__ __forceinline__ void octile_pair_select(
    const int sel,
    const unsigned long long bm1, const int toff1,
    const unsigned long long bm2, const int toff2,
    const double* __restrict__ Pt, const LaneRows& L,
    const w_t* __restrict__ weight, const unsigned int* __restrict__ elab, const long long elab_stride,
    double& acca, double& accb)
{
    switch (sel) {
    case PRIM_DD:
        octile_pair<PRIM_DD>(bm1, toff1, bm2, toff2, Pt, L, weight, elab, elab_stride, acca, accb);
        break;
    case PRIM_DS:
        octile_pair<PRIM_DS>(bm1, toff1, bm2, toff2, Pt, L, weight, elab, elab_stride, acca, accb);
        break;
    case PRIM_SD:
        octile_pair<PRIM_SD>(bm1, toff1, bm2, toff2, Pt, L, weight, elab, elab_stride, acca, accb);
        break;
    default:
        octile_pair<PRIM_SS>(bm1, toff1, bm2, toff2, Pt, L, weight, elab, elab_stride, acca, accb);
        break;
    }
}

// ------------------------------------------------------------------------------------------
// Row-pair XMV (XMV_MODE 2): the nonzeros of a graph in row (CSR) order, each with the
// blocked column offset coff = (j / 8) * 64 + j % 8 of its column j. For one output tile pair
// (I, I2) the lane owns the two outputs (x, u) and (7 - x, 7 - u) with x = lane / 8 (0..3),
// u = lane % 8: its work is deg1(8I+x) deg2(8I2+u) + deg1(8I+7-x) deg2(8I2+7-u), which the
// solver balances by sorting the nodes of every 8-node tile by degree (heavy rows pair with
// light ones). No bitmaps to walk and no empty iterations: every trip is one product.
// ------------------------------------------------------------------------------------------
#ifndef ROW_ILP
#define ROW_ILP 1
#endif

// One product of the row-pair XMV: B entry kb against the A entry held in w1 / e1_k / Pr.
#define ROW_PRODUCT(acc, kb)                                                                  \
    {                                                                                         \
        const int cb_ = coff[kb];                                                             \
        const w_t w2 = LOAD_W(weight, kb);                                                  \
        LOAD_E2(kb);                                                                          \
        acc += COEF(w1, w2, (EDGE_KERNEL_EXPR)) * Pr[cb_];                                    \
    }

// One output's sum over row a0..a1 of G1 against row b0..b1 of G2. Over a float64 search direction, in float64
// (ROW_ILP 2: two independent chains); over a float32 one (F32_SUMS builds: resident pairs whose edge kernel is a
// SquareExponential), each G1 nonzero's products summed in float32 (one FFMA a product, no float64 conversion), the
// row's sum added to the float64 total: the products' coefficients are float32 already. There the exponent is
// -(a' - b')^2 with the labels scaled by SE_SIGMA (a' once a G1 nonzero: one FFMA, one FMUL and the MUFU.EX2 a
// product), and G2 rows of at most 4 entries take a path of their own (below).
// ROW_SLOT(k): entry k of the G2 row b0 .. b0 + d2 held in registers (F32_SUMS builds' rows of at most 4 entries,
// row_pair and the gradient's row_pair2): column offset c<k>, label f<k>, weight v<k> (0, 0 and 1 past its end)
#define ROW_SLOT(k)                                                                                   \
    const int c##k = d2 > k ? coff[b0 + k] : 0;                                                       \
    const float f##k = d2 > k ? SE_E(b0 + k) : 0.0f;                                                  \
    const w_t v##k = d2 > k ? LOAD_W(weight, b0 + k) : (w_t)1;
// ROW_SLOT_HEAD(PT_) and ROW_SLOT_K01: the head of G1 nonzero ka's trip over a G2 row held in registers (row_pair,
// row_pair2): its row Pr of P (of PT_), weight w1 and scaled label e1s_; then (after the caller's loads of the row's
// first two entries of P, where they were: the same machine code) the kernel values k0, k1 of the row's first two
// products (k1 = 0 where the row has one entry: has1)
#define ROW_SLOT_HEAD(PT_)                                                                            \
    const int ca = coff[ka];                                                                          \
    const PT_* Pr = P + ((long long)(ca >> 6) * nt2 << 6) + ((ca & 7) << 3);                          \
    const w_t w1 = LOAD_W(weight, ka);                                                                \
    const float e1s_ = SE_E(ka) * SE_SIGMA
#define ROW_SLOT_K01                                                                                  \
    const float t0 = fmaf(-f0, SE_SIGMA, e1s_), t1 = fmaf(-f1, SE_SIGMA, e1s_);                       \
    const float k0 = (float)(v0) * mgk_ex2(-t0 * t0);                                                 \
    const float k1 = has1 ? (float)(v1) * mgk_ex2(-t1 * t1) : 0.0f

template <typename PT>
__device__ __forceinline__ double row_pair(
    const int a0, const int a1, const int b0, const int b1,
    const PT* __restrict__ P, const int nt2,
    const int* __restrict__ coff,
    const w_t* __restrict__ weight, const unsigned int* __restrict__ elab, const long long elab_stride)
{
    double acc = 0.0;
    if constexpr (sizeof(PT) == 4) {
        if (b0 >= b1) return 0.0;
#if F32_SUMS
        if (b1 - b0 <= 4) {
            // A G2 row of at most 4 entries (NWS: nearly all rows) is held in registers, loaded once an output. Each
            // G1 nonzero forms the row's first two products whether it has them or not (the second's kernel value is
            // then 0, at the first's column: no branch, both shared loads in flight at once), and the output is
            // summed in float32 (a few products: 5 on average on NWS). NWS labeled values -11% device time on an
            // H200, where an unrolled loop over the row (below) cost more a G1 nonzero than its products (session 36)
            const int d2 = b1 - b0;
#define ROW_SLOT_PRODUCT(k)                                                                           \
    {                                                                                                 \
        const float t_ = fmaf(-f##k, SE_SIGMA, e1s_);                                                 \
        s = fmaf((float)(v##k) * mgk_ex2(-t_ * t_), Pr[c##k], s);                                     \
    }
            ROW_SLOT(0) ROW_SLOT(1) ROW_SLOT(2) ROW_SLOT(3)
            const bool has1 = d2 > 1;
            float tot = 0.0f;  // the output's sum, in float32 (a few products: NWS 5 on average)
#pragma unroll 1
            for (int ka = a0; ka < a1; ++ka) {
                ROW_SLOT_HEAD(PT);
                const float p0 = Pr[c0], p1 = Pr[c1];
                ROW_SLOT_K01;
                float s = fmaf(k1, p1, k0 * p0);
                if (d2 > 2) {
                    ROW_SLOT_PRODUCT(2)
                    if (d2 > 3) ROW_SLOT_PRODUCT(3)
                }
                tot = fmaf((float)(w1), s, tot);
            }
#undef ROW_SLOT_PRODUCT
            return (double)tot;
        }
#endif
        for (int ka = a0; ka < a1; ++ka) {
            const int ca = coff[ka];
            const PT* Pr = P + ((long long)(ca >> 6) * nt2 << 6) + ((ca & 7) << 3);
            const w_t w1 = LOAD_W(weight, ka);
#if F32_SUMS
            const float e1s_ = SE_E(ka) * SE_SIGMA;  // the SquareExponential's label, scaled (mgk_solver.cu)
#else
            LOAD_E1(ka);
#endif
            float s = 0.0f;
#pragma unroll 2
            for (int kb = b0; kb < b1; ++kb) {
                const int cb_ = coff[kb];
                const w_t w2 = LOAD_W(weight, kb);
#if F32_SUMS
                const float t_ = fmaf(-SE_E(kb), SE_SIGMA, e1s_);
                const float ke_ = mgk_ex2(-t_ * t_);
#else
                LOAD_E2(kb);
                const float ke_ = (EDGE_KERNEL_EXPR);
#endif
                s = fmaf((float)(w2) * ke_, Pr[cb_], s);
            }
            acc += (double)((float)(w1) * s);
        }
        return acc;
    }
#if ROW_ILP == 2
    double acc1 = 0.0;  // two independent float64 chains (latency hiding)
#endif
    for (int ka = a0; ka < a1; ++ka) {
        const int ca = coff[ka];
        const PT* Pr = P + ((long long)(ca >> 6) * nt2 << 6) + ((ca & 7) << 3);
        const w_t w1 = LOAD_W(weight, ka);
        LOAD_E1(ka);
        {
#if ROW_ILP == 2
            int kb = b0;
            for (; kb + 1 < b1; kb += 2) {
                ROW_PRODUCT(acc, kb)
                ROW_PRODUCT(acc1, kb + 1)
            }
            if (kb < b1) ROW_PRODUCT(acc, kb)
#else
            for (int kb = b0; kb < b1; ++kb) ROW_PRODUCT(acc, kb)
#endif
        }
    }
#if ROW_ILP == 2
    acc += acc1;
#endif
    return acc;
}
