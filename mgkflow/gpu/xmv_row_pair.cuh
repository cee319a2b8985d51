// XMV fragment of the per-block solver, strategy "rows" (mgkflow/gpu/strategies/row_pair.py).
//
// The lane owns outputs (x, u) and (7 - x, 7 - u) of a tile pair, x = lane / 8, u = lane % 8,
// and walks the CSR rows 8I + x of G1 and 8I2 + u of G2 (all their octiles at once): every
// trip is one product; with the nodes of each tile sorted by degree the heavy rows pair with
// light ones (lane efficiency ~0.7 on BA vs ~0.3 for octile pairs). row_pair() is in
// octile_primitives.cuh (shared with the wide path).
//
// Contract with mgk_solver.cu (macros, so that the solver compiles to the same code as when the
// mappings were written inline: device functions taking a lane struct changed the register
// allocation at the 64-register bound and spilled): XMV_LANE_SETUP declares const int oa, ob
// (the lane's two outputs of a tile pair) from `lane`; XMV_TILE_PAIR(acca, accb) adds the
// lane's two sums of tile pair (I, I2) of graphs h1, h2 with search direction P (nt2 tiles per
// G2 side) using the strategy's kernel parameters.
#define XMV_LANE_SETUP                                                                             \
    const int rx = lane >> 3, ru = lane & 7;                                                       \
    const int oa = rx * 8 + ru, ob = (7 - rx) * 8 + (7 - ru);

// Row pointers: ROWS_AT(v, off) names G's row pointers from entry off, RP(v, k) reads entry off + k. F32_SUMS builds
// add off + k as one 32-bit int (ten fewer 64-bit address instructions an output; session 36); the others keep the
// pointer sums, whose register allocation their measured times and spills are of.
#if F32_SUMS
#define ROWS_AT(v, off) const int v = (off);
#define RP(v, k) rrowptr[v + k]  /* k: a sum or difference of ints */
#else
#define ROWS_AT(v, off) const int* v = rrowptr + off;
#define RP(v, k) v[k]
#endif

#define XMV_TILE_PAIR(acca, accb)                                                                  \
    {                                                                                              \
        ROWS_AT(ra_, h1.rrow_off + I * 8)                                                          \
        ROWS_AT(rb_, h2.rrow_off + I2 * 8)                                                         \
        acca = row_pair(RP(ra_, rx), RP(ra_, rx + 1), RP(rb_, ru), RP(rb_, ru + 1), P, nt2, rcoff, rweight, \
                        relab, relab_stride);                                                      \
        accb = row_pair(RP(ra_, 7 - rx), RP(ra_, 8 - rx), RP(rb_, 7 - ru), RP(rb_, 8 - ru), P, nt2, rcoff, \
                        rweight, relab, relab_stride);                                             \
    }

// XMV_UNIT(acc, o): the sum of one output o = 8 x + u of tile pair (I, I2) (resident launches' half tile
// pairs): row x of G1's tile I against row u of G2's tile I2.
#define XMV_UNIT(acc, o)                                                                           \
    {                                                                                              \
        ROWS_AT(ra_, h1.rrow_off + I * 8 + ((o) >> 3))                                             \
        ROWS_AT(rb_, h2.rrow_off + I2 * 8 + ((o) & 7))                                             \
        acc = row_pair(RP(ra_, 0), RP(ra_, 1), RP(rb_, 0), RP(rb_, 1), P, nt2, rcoff, rweight, relab, relab_stride); \
    }

// The schedule's costs (SCHEDULE_RANGES), by one thread: XMV_TP_COST of tile pair u, its busiest lane's
// products over both outputs (deg1(8I + x) deg2(8I2 + u) + deg1(8I + 7 - x) deg2(8I2 + 7 - u)); XMV_HALF_COST
// of half tile pair u = 2 tp + h (output oa of every lane, h = 0: G1 rows 0 .. 3 of the tile; ob, h = 1: rows
// 4 .. 7), the largest degree of those four G1 rows times the largest of G2's tile; plus UNIT_OVERHEAD per output.
__device__ __forceinline__ void tile_degrees(const int* __restrict__ rp, int d[8])
{
#pragma unroll
    for (int k = 0; k < 8; ++k) d[k] = rp[k + 1] - rp[k];
}

#define XMV_TP_COST(c, u)                                                                          \
    {                                                                                              \
        const int I_ = (u) / nt2, I2_ = (u) - I_ * nt2;                                            \
        int da_[8], db_[8];                                                                        \
        tile_degrees(rrowptr + h1.rrow_off + I_ * 8, da_);                                         \
        tile_degrees(rrowptr + h2.rrow_off + I2_ * 8, db_);                                        \
        int m_ = 0;                                                                                \
        _Pragma("unroll") for (int x_ = 0; x_ < 4; ++x_)                                           \
            _Pragma("unroll") for (int u_ = 0; u_ < 8; ++u_)                                       \
                m_ = max(m_, da_[x_] * db_[u_] + da_[7 - x_] * db_[7 - u_]);                       \
        c = m_ + 2 * UNIT_OVERHEAD;                                                                \
    }

#define XMV_HALF_COST(c, u)                                                                        \
    {                                                                                              \
        const int tp_ = (u) >> 1, I_ = tp_ / nt2, I2_ = tp_ - I_ * nt2;                            \
        int da_[8], db_[8];                                                                        \
        tile_degrees(rrowptr + h1.rrow_off + I_ * 8, da_);                                         \
        tile_degrees(rrowptr + h2.rrow_off + I2_ * 8, db_);                                        \
        const int h_ = ((u) & 1) * 4;                                                              \
        int ma_ = 0, mb_ = 0;                                                                      \
        _Pragma("unroll") for (int k_ = 0; k_ < 4; ++k_) ma_ = max(ma_, h_ ? da_[4 + k_] : da_[k_]); \
        _Pragma("unroll") for (int k_ = 0; k_ < 8; ++k_) mb_ = max(mb_, db_[k_]);                  \
        c = ma_ * mb_ + UNIT_OVERHEAD;                                                             \
    }

#if GRADIENT
// Two-vector variant (gradient configuration only): the joint PCG of x and the adjoint y multiplies
// both search directions by the same matrix, so each product's coefficient A_ij A'_i'j' ke (the
// edge kernel, exp2 for a SquareExponential) is formed once and applied to both. The second
// vector lies dy doubles after the first (same blocked layout), or, in resident builds, the two are
// interleaved as float2 (P[i] = (p_i, py_i): one 8-byte load a product for both; dy unused); acc/acc2
// are the sums against the two (two independent float64 chains: no ROW_ILP split needed).
#if RESIDENT
typedef float2 p2_t;
#define ACC2(acc, acc2, c, Pr, cb)                                                                \
    {                                                                                             \
        const float2 t_ = (Pr)[cb];                                                               \
        acc += (c) * (double)t_.x;                                                                \
        acc2 += (c) * (double)t_.y;                                                               \
    }
#else
typedef double p2_t;
#define ACC2(acc, acc2, c, Pr, cb)                                                                \
    {                                                                                             \
        acc += (c) * (Pr)[cb];                                                                    \
        acc2 += (c) * (Pr)[(cb) + dy];                                                            \
    }
#endif
#define ROW_PRODUCT2(acc, acc2, kb)                                                               \
    {                                                                                             \
        const int cb_ = coff[kb];                                                                 \
        const w_t w2 = LOAD_W(weight, kb);                                                      \
        LOAD_E2(kb);                                                                              \
        const double c_ = COEF(w1, w2, (EDGE_KERNEL_EXPR));                                       \
        ACC2(acc, acc2, c_, Pr, cb_)                                                              \
    }

__device__ __forceinline__ void row_pair2(
    const int a0, const int a1, const int b0, const int b1,
    const p2_t* __restrict__ P, const int dy, const int nt2,
    const int* __restrict__ coff,
    const w_t* __restrict__ weight, const unsigned int* __restrict__ elab, const long long elab_stride,
    double& acc, double& acc2)
{
    acc = 0.0;
    acc2 = 0.0;
#if F32_SUMS
    if (b0 >= b1) return;  // the G2 row tested once: the inner loop below is a do-while
    if (b1 - b0 <= 4) {
        // as in row_pair's float path: a G2 row of at most 4 entries held in registers, its first two products formed
        // whether the row has them or not (the second's kernel value then 0); the sums of each G1 nonzero in float64
        // as below (NWS labeled gradients +12% pairs/s on an H200, session 36)
        const int d2 = b1 - b0;
#define ROW_SLOT_PRODUCT2(k)                                                                          \
    {                                                                                                 \
        const float t_ = fmaf(-f##k, SE_SIGMA, e1s_);                                                 \
        const float c_ = (float)(v##k) * mgk_ex2(-t_ * t_);                                           \
        const float2 q_ = Pr[c##k];                                                                   \
        s_ = fmaf(c_, q_.x, s_);                                                                      \
        s2_ = fmaf(c_, q_.y, s2_);                                                                    \
    }
        ROW_SLOT(0) ROW_SLOT(1) ROW_SLOT(2) ROW_SLOT(3)
        const bool has1 = d2 > 1;
#pragma unroll 1
        for (int ka = a0; ka < a1; ++ka) {
            ROW_SLOT_HEAD(p2_t);
            const float2 q0 = Pr[c0], q1 = Pr[c1];
            ROW_SLOT_K01;
            float s_ = fmaf(k1, q1.x, k0 * q0.x), s2_ = fmaf(k1, q1.y, k0 * q0.y);
            if (d2 > 2) {
                ROW_SLOT_PRODUCT2(2)
                if (d2 > 3) ROW_SLOT_PRODUCT2(3)
            }
            acc += (double)((float)(w1) * s_);
            acc2 += (double)((float)(w1) * s2_);
        }
#undef ROW_SLOT_PRODUCT2
        return;
    }
#endif
    for (int ka = a0; ka < a1; ++ka) {
        const int ca = coff[ka];
        const p2_t* Pr = P + ((long long)(ca >> 6) * nt2 << 6) + ((ca & 7) << 3);
        const w_t w1 = LOAD_W(weight, ka);
#if F32_SUMS
        // each G1 nonzero's products summed in float32 against both directions (float2), added in float64; the loop
        // over the G2 row a do-while, not unrolled (NWS labeled gradients +5%, BA +3% against an unrolled one: the
        // joint products' float2 loads and two FFMAs hide its latency, session 36)
        const float e1s_ = SE_E(ka) * SE_SIGMA;  // the SquareExponential's label, scaled (mgk_solver.cu)
        float s_ = 0.0f, s2_ = 0.0f;
        int kb = b0;
#pragma unroll 1
        do {
            const int cb_ = coff[kb];
            const w_t w2 = LOAD_W(weight, kb);
            const float d_ = fmaf(-SE_E(kb), SE_SIGMA, e1s_);
            const float c_ = (float)(w2) * mgk_ex2(-d_ * d_);
            const float2 t_ = Pr[cb_];
            s_ = fmaf(c_, t_.x, s_);
            s2_ = fmaf(c_, t_.y, s2_);
        } while (++kb < b1);
        acc += (double)((float)(w1) * s_);
        acc2 += (double)((float)(w1) * s2_);
#else
        LOAD_E1(ka);
        for (int kb = b0; kb < b1; ++kb) ROW_PRODUCT2(acc, acc2, kb)
#endif
    }
}

// XMV_UNIT for the search directions P and P + dy at once (one output o of tile pair (I, I2)).
#define XMV_UNIT2(acc, acc2, o, dy)                                                                \
    {                                                                                              \
        ROWS_AT(ra_, h1.rrow_off + I * 8 + ((o) >> 3))                                             \
        ROWS_AT(rb_, h2.rrow_off + I2 * 8 + ((o) & 7))                                             \
        row_pair2(RP(ra_, 0), RP(ra_, 1), RP(rb_, 0), RP(rb_, 1), P, dy, nt2, rcoff, rweight, relab, relab_stride, \
                  acc, acc2);                                                                      \
    }

// XMV_TILE_PAIR for the search directions P and P + dy at once: acca/accb against P, acca2/accb2
// against P + dy (same outputs oa, ob).
#define XMV_TILE_PAIR2(acca, accb, acca2, accb2, dy)                                               \
    {                                                                                              \
        ROWS_AT(ra_, h1.rrow_off + I * 8)                                                          \
        ROWS_AT(rb_, h2.rrow_off + I2 * 8)                                                         \
        row_pair2(RP(ra_, rx), RP(ra_, rx + 1), RP(rb_, ru), RP(rb_, ru + 1), P, dy, nt2, rcoff, rweight, relab, \
                  relab_stride, acca, acca2);                                                      \
        row_pair2(RP(ra_, 7 - rx), RP(ra_, 8 - rx), RP(rb_, 7 - ru), RP(rb_, 8 - ru), P, dy, nt2, rcoff, rweight, \
                  relab, relab_stride, accb, accb2);                                               \
    }
#endif
