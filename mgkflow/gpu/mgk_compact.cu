// mgkflow: marginalized graph kernel, compact per-pair solver for small pairs (molecules).
//
// Same system and the same Jacobi-preconditioned float64 CG as mgk_solver.cu (in the
// Chronopoulos-Gear form, below), for pairs whose product space is small: n1 * n2 <= BLOCK * KE
// unknowns and the pair's tables fit the shared memory of the launch. One block solves one pair at a
// time; blocks of a persistent grid take jobs (pairs, largest first) through an atomic counter.
//
// What differs from mgk_solver.cu, and why (the per-block solver spends its instructions there
// on molecule-sized pairs: ~370 per unknown and CG step, measured with ncu on an H100):
//   * no padding: the product index is u = i * n2 + i2 over the real nodes only (the blocked
//     layout pads both graphs to whole 8-node tiles: 24..37% of the work on 8..50-atom graphs);
//   * the pair's product coefficients C[ka][kb] = A_ka A'_kb ke(e_ka, e'_kb) (every nonzero of
//     G1 against every nonzero of G2, C_TYPE: float, or double with double weights) are formed
//     once per pair into shared memory, with both graphs' local CSR rows: a product of the XMV
//     is then two shared loads and one FMA instead of the label loads and the edge kernel;
//   * each thread owns KE entries of the product space in every phase (its slots, below), so r, the
//     inverse diagonal and a = M p stay in registers; only z = D^-1 r is also written to shared
//     memory (the XMV reads it across threads);
//   * the Chronopoulos-Gear form of PCG: the XMV is of z, not of p, and a = M p follows the recurrence
//     a = M z + beta a, so the four inner products of a step (r.z, z.Mz, r.r, w.z) come out of one
//     block reduction, and a step has two barriers (publish z, reduce) instead of three. D z = r, so
//     M z = r - (A∘E) z needs no diagonal register. The residual of a step is known at the next
//     reduction: a converged pair computes one XMV more than the classic form. With the reduction
//     below, -9% device time on drugs and -10% on molecules (gpu/NOTES.md, call A9; in session 6,
//     with four butterflies in its one reduction, this form had gained nothing);
//   * no solution vector: K = w^T x with w_u = p_i p'_i2 (start probabilities, in shared memory)
//     and x = sum_k alpha_k p_k, so K = sum_k alpha_k (w^T p_k), w^T p = w^T z + beta w^T p_old;
//   * thread slots in degree-class order: a product (i, i2) costs deg(i) * deg(i2) multiply-adds in
//     the XMV, and a warp runs as long as its slowest lane. Slot s of a pair is taken by the
//     products in the order (degree class of i, degree class of i2, i, i2), classes from the
//     highest degree down (degrees NCLS-1 and up share class 0), each graph's nodes in that order
//     given by the host (dord, dcls): the lanes of a warp then almost always have equal trip
//     counts. Slot s = k * BLOCK + 32 * warp' + lane with warp' = warp for even k and
//     NWARP - 1 - warp for odd k, so that every warp gets a share of the heavy and of the light
//     classes (the block waits for its slowest warp at each reduction);
//   * the XMV walks G1's row two nonzeros at a time: each column index of G2's row, loaded once,
//     serves both products (-1.7% device time on drugs and on molecules; gpu/NOTES.md, call C8);
//   * the block reduction of four doubles is a reduce-scatter in each warp (six shuffles of one double
//     instead of twenty), then per value a butterfly over the warps' partials and a broadcast
//     (block_sum4_scatter, mgk_common.cuh);
//   * CAT builds (unit weights, a batch whose edges carry at most MAX_CAT distinct label tuples: the
//     edge categories of mgkflow.gpu.solvers.compact.edge_categories, molecules' bond orders) form no C:
//     each block computes the table T[c1][c2] = ke(category c1, category c2) once (ncat^2 doubles at
//     the start of the shared memory), each column word carries its nonzero's category in its high
//     half, and a product's coefficient is T's entry: no per-pair table of nnz1 nnz2 kernel values to
//     form (an integer division, two label loads and the edge kernel each), and a coefficient load
//     from a table of a few dozen words (no bank conflicts) instead of one of nnz1 nnz2.
//
// Placeholders filled by mgkflow.gpu.solvers.compact: BLOCK, KE, MIN_BLOCKS, NCLS, CAT, DEFINES (the
// run-time value array mgk_kpar and label loads), NODE_KERNEL, EDGE_KERNEL, W_TYPE, C_TYPE, COEF,
// COMMON (mgk_common.cuh: shfl_xor and the warp reductions).

#define BLOCK ${BLOCK}
#define KE ${KE}
#define MIN_BLOCKS ${MIN_BLOCKS}
#define NCLS ${NCLS}
#define CAT ${CAT}
${DEFINES}
#define EDGE_KERNEL_EXPR (${EDGE_KERNEL})
#define NODE_KERNEL_EXPR (${NODE_KERNEL})
#define NWARP (BLOCK / 32)
// thread slot of own entry k (see the header)
#define SLOT(k) ((k) * BLOCK + ((((k) & 1) ? (NWARP - 1 - warp) : warp) << 5) + lane)
typedef ${W_TYPE} w_t;
typedef ${C_TYPE} c_t;
// coefficient A_ij A'_i'j' ke of one product, in double
#define COEF(w1, w2, ke) ${COEF}
// The XMV's addressing. A column word w of a nonzero (col1, col2) gives its row of P (PROW, a G1 nonzero's) or its
// entry in a row of P (ZAT, a G2 nonzero's); a product's coefficient is the entry (COEF_AT) of G2's nonzero kb in
// the coefficient row of G1's nonzero ka (CROW; CROW1 that of ka + 1 beside CROW's Cr).
#if CAT
// w = (category * 8) << 16 | node * 8: byte offsets, into T's row and into P's (< 2^15: n <= 4096), so that an
// address is one add (ZAT: a mask and an add, shared by the two products of a column)
typedef double cr_t;
#define COLW(e, t) ((rcat[(e) + (t)] << 19) | (rcoff_node(rcoff[(e) + (t)]) << 3))
#define PROW(w) ((const double*)((const char*)P + ((w) & 0xffff) * n2))
#define ZAT(Pr, w) (*(const double*)((const char*)(Pr) + ((w) & 0xffff)))
#define CROW(ka, w) ((const double*)((const char*)T + ((w) >> 16) * ncat))
#define CROW1(Cr, w) CROW(0, w)
#define COEF_AT(Cr, kb, w) (*(const double*)((const char*)(Cr) + ((w) >> 16)))
#else
// w = node index; the coefficient is C's entry (nonzero ka of G1, kb of G2)
typedef c_t cr_t;
#define COLW(e, t) rcoff_node(rcoff[(e) + (t)])
#define PROW(w) (P + (w) * n2)
#define ZAT(Pr, w) ((Pr)[w])
#define CROW(ka, w) (C + (ka) * nnz2)
#define CROW1(Cr, w) ((Cr) + nnz2)
#define COEF_AT(Cr, kb, w) ((double)(Cr)[kb])
#endif
// blocked column offset -> node index
__device__ __forceinline__ int rcoff_node(const int c)
{
    return ((c >> 6) << 3) | (c & 7);
}

${COMMON}

extern "C" __global__ void __launch_bounds__(BLOCK, MIN_BLOCKS) mgk_solve_compact(
    const int* __restrict__ hdr,                  // 5 ints per graph: n, nt, node_off, rowptr_off, rrow_off
    const int* __restrict__ rrowptr,              // node-row pointers (row layout of strategy "rows")
    const int* __restrict__ rcoff,                // blocked column offset per nonzero
    const w_t* __restrict__ rweight,              // weights in row order
    const unsigned int* __restrict__ relab,       // edge labels in row order, field-major words
    const long long relab_stride,
    MGK_NODE_PARAMS,                              // nlab, nlab_stride, dvec, pvec, qvec (mgk_common.cuh)
    const int* __restrict__ dord,                 // per graph, from its node offset: nodes by degree class
    const int* __restrict__ dcls,                 // per graph, NCLS + 1 ints: class starts in dord, then n
    const int* __restrict__ rcat,                 // CAT: edge category per nonzero, row order
    const unsigned int* __restrict__ ecat,        // CAT: the categories' label words, field-major, stride ncat
    const int ncat,                               // CAT: categories (else 0)
    MGK_JOB_PARAMS,                               // jobs, n_jobs, job_counter, out_k, out_iter, out_res, out_conv
    const double rtol,
    const int max_iter)
{
    // shared memory, laid out per pair (the launch has the largest pair's bytes): P and W (n1 n2 doubles
    // each), C (nnz1 nnz2 c_t; not in CAT builds), then int tables: rows of G1 (n1 + 1), of G2 (n2 + 1),
    // columns of G1, G2; CAT builds: the category table T (ncat^2 doubles) before them all
    extern __shared__ double smem[];
    __shared__ double red[4 * NWARP];
    __shared__ int s_job;
    __shared__ double s_bb;  // b.b of the pair (thread 0 only)
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
#if CAT
    double* const T = smem;
    double* const P = smem + ncat * ncat;
    {  // T, published by the job loop's first barrier
        const unsigned int* const elab = ecat;
        const long long elab_stride = ncat;
        (void)elab;  // unused when the edge kernel reads no label
        (void)elab_stride;
        for (int t = tid; t < ncat * ncat; t += BLOCK) {
            const int c1 = t / ncat, c2 = t - c1 * ncat;
            (void)c1;  // unused when the edge kernel reads no label
            (void)c2;
            LOAD_E1(c1);
            LOAD_E2(c2);
            T[t] = COEF(1.0f, 1.0f, (EDGE_KERNEL_EXPR));
        }
    }
#else
    double* const P = smem;
    (void)rcat;
    (void)ecat;
    (void)ncat;
    const unsigned int* const elab = relab;
    const long long elab_stride = relab_stride;
    (void)elab;  // unused when the edge kernel reads no label
    (void)elab_stride;
#endif

    for (;;) {
        if (tid == 0) s_job = atomicAdd(job_counter, 1);
        __syncthreads();  // also: the previous pair's tables are no longer read
        const int jb = s_job;
        if (jb >= n_jobs) return;
        const int g1 = jobs[2 * jb], g2 = jobs[2 * jb + 1];
        const int n1 = hdr[5 * g1], off1 = hdr[5 * g1 + 2], roff1 = hdr[5 * g1 + 4];
        const int n2 = hdr[5 * g2], off2 = hdr[5 * g2 + 2], roff2 = hdr[5 * g2 + 4];
        const int e01 = rrowptr[roff1], e02 = rrowptr[roff2];
        const int nnz1 = rrowptr[roff1 + n1] - e01, nnz2 = rrowptr[roff2 + n2] - e02;
        const int N = n1 * n2, nc = nnz1 * nnz2;
        double* const W = P + N;
#if CAT
        int* const rp1 = (int*)(P + 2 * N);
#else
        c_t* const C = (c_t*)(smem + 2 * N);
        int* const rp1 = (int*)(smem + 2 * N + ((long long)nc * sizeof(c_t) + 7) / 8);
#endif
        int* const rp2 = rp1 + n1 + 1;
        int* const col1 = rp2 + n2 + 1;
        int* const col2 = col1 + nnz1;

        // ------------------------------------------------------------ the pair's tables
        for (int t = tid; t <= n1; t += BLOCK) rp1[t] = rrowptr[roff1 + t] - e01;
        for (int t = tid; t <= n2; t += BLOCK) rp2[t] = rrowptr[roff2 + t] - e02;
        for (int t = tid; t < nnz1; t += BLOCK) col1[t] = COLW(e01, t);
        for (int t = tid; t < nnz2; t += BLOCK) col2[t] = COLW(e02, t);
#if !CAT
        for (int t = tid; t < nc; t += BLOCK) {
            const int ka = t / nnz2, kb = t - ka * nnz2;
            const w_t w1 = LOAD_W(rweight, e01 + ka), w2 = LOAD_W(rweight, e02 + kb);
            LOAD_E1(e01 + ka);
            LOAD_E2(e02 + kb);
            C[t] = (c_t)COEF(w1, w2, (EDGE_KERNEL_EXPR));
        }
#else
        (void)nc;
#endif

        // ------------------------------------------------------------ init (own entries)
        int c1[NCLS + 1], c2[NCLS + 1];  // class starts (constant indices only: registers)
#pragma unroll
        for (int c = 0; c <= NCLS; ++c) {
            c1[c] = dcls[(NCLS + 1) * g1 + c];
            c2[c] = dcls[(NCLS + 1) * g2 + c];
        }
        double r[KE], a[KE], di[KE];  // residual, a = M p (by recurrence), inverse diagonal
        int ij[KE];  // (i << 16) | i2
#pragma unroll
        for (int k = 0; k < KE; ++k) {
            const int s = SLOT(k);
            r[k] = 0.0;
            a[k] = 0.0;
            di[k] = 1.0;
            ij[k] = 0;
            if (s < N) {
                // slot -> (class a of G1, class b of G2, position in that rectangle) -> (i, i2)
                const int q1 = s / n2;  // position of i in G1's class order
                int base1 = 0, end1 = n1;
#pragma unroll
                for (int c = 0; c < NCLS; ++c)
                    if (q1 >= c1[c]) { base1 = c1[c]; end1 = c1[c + 1]; }
                const int len1 = end1 - base1, t = s - base1 * n2;
                int base2 = 0, end2 = n2;
#pragma unroll
                for (int c = 0; c < NCLS; ++c)
                    if (t >= len1 * c2[c]) { base2 = c2[c]; end2 = c2[c + 1]; }
                const int len2 = end2 - base2, t2 = t - len1 * base2;
                const int x = t2 / len2, y = t2 - x * len2;
                const int i = dord[off1 + base1 + x], i2 = dord[off2 + base2 + y];
                ij[k] = (i << 16) | i2;
                const int u1 = off1 + i, u2 = off2 + i2;
                LOAD_V1(u1);
                LOAD_V2(u2);
                float kv = NODE_KERNEL_EXPR;
                kv = fmaxf(kv, 1e-30f);
                const double dd = dvec[u1] * dvec[u2];
                di[k] = (double)kv / dd;
                r[k] = dd * qvec[u1] * qvec[u2];
                P[i * n2 + i2] = r[k] * di[k];
                W[s] = pvec[u1] * pvec[u2];  // by slot: only its owner reads it
            }
        }
        __syncthreads();  // publishes P (z = D^-1 r) and the tables

        // ------------------------------------------------------------ PCG, Chronopoulos-Gear form
        // One block reduction per step: the XMV is of z = D^-1 r (in P), and a = M p follows
        // a = M z + beta a. Per step: gamma = r.z, delta = z.Mz, rho = r.r and w.z; then
        // beta = gamma / gamma_old, p.Mp = delta - beta^2 p_old.Mp_old, alpha = gamma / p.Mp,
        // w.p = w.z + beta w.p_old, K += alpha w.p, r -= alpha a. The residual a step has made is
        // known at the next reduction: a converged pair computes one XMV more than the classic form.
        double thr = 0.0, rr = 0.0, g_old = 1.0, den_old = 0.0, wp = 0.0, kk = 0.0;
        int it = 0;
        bool conv = false, broke = false;
        for (;;) {
            double q[KE];
            double gm = 0.0, dl = 0.0, wz = 0.0;
            rr = 0.0;
#pragma unroll
            for (int k = 0; k < KE; ++k) {
                q[k] = 0.0;
                if (SLOT(k) < N) {
                    const int i = ij[k] >> 16, i2 = ij[k] & 0xffff;
                    const int a0 = rp1[i], a1 = rp1[i + 1], b0 = rp2[i2], b1 = rp2[i2 + 1];
                    double y = 0.0, y1 = 0.0;
                    int ka = a0;
                    for (; ka + 1 < a1; ka += 2) {  // two rows of G1 at once: one column load per two products
                        const int w1 = col1[ka], w1b = col1[ka + 1];
                        const double* const Pr = PROW(w1);
                        const double* const Pr1 = PROW(w1b);
                        const cr_t* const Cr = CROW(ka, w1);
                        const cr_t* const Cr1 = CROW1(Cr, w1b);
                        for (int kb = b0; kb < b1; ++kb) {
                            const int w2 = col2[kb];
                            y += COEF_AT(Cr, kb, w2) * ZAT(Pr, w2);
                            y1 += COEF_AT(Cr1, kb, w2) * ZAT(Pr1, w2);
                        }
                    }
                    if (ka < a1) {
                        const int w1 = col1[ka];
                        const double* const Pr = PROW(w1);
                        const cr_t* const Cr = CROW(ka, w1);
                        int kb = b0;
                        for (; kb + 1 < b1; kb += 2) {
                            const int w2 = col2[kb], w2b = col2[kb + 1];
                            y += COEF_AT(Cr, kb, w2) * ZAT(Pr, w2);
                            y1 += COEF_AT(Cr, kb + 1, w2b) * ZAT(Pr, w2b);
                        }
                        if (kb < b1) y += COEF_AT(Cr, kb, col2[kb]) * ZAT(Pr, col2[kb]);
                    }
                    const double z = r[k] * di[k];
                    q[k] = r[k] - (y + y1);  // D z = r: the diagonal needs no register
                    gm += r[k] * z;
                    dl += z * q[k];
                    rr += r[k] * r[k];
                    wz += W[SLOT(k)] * z;
                }
            }
            block_sum4_scatter(gm, dl, rr, wz, red);
            if (it == 0) {  // rr = b.b
                thr = rtol * rtol * rr;
                if (tid == 0) s_bb = rr;
            }
            CG_STOP(rr, thr, it, max_iter, conv, broke);
            CG_SCALARS(gm, dl, wz, g_old, den_old, it, wp, kk, broke);  // beta, den (p.Mp), alpha; breakdown: leave
#pragma unroll
            for (int k = 0; k < KE; ++k) {  // entries past N hold zeros and stay zero
                a[k] = q[k] + beta * a[k];
                r[k] -= alpha * a[k];
                if (SLOT(k) < N) P[(ij[k] >> 16) * n2 + (ij[k] & 0xffff)] = r[k] * di[k];
            }
            ++it;
            g_old = gm;
            den_old = den;
            __syncthreads();  // P complete before the next XMV (every thread's XMV reads ended at the reduction)
        }

        if (tid == 0) {
            out_k[jb] = kk;
            out_iter[jb] = it;
            out_res[jb] = s_bb > 0.0 ? sqrt(rr / s_bb) : 0.0;
            out_conv[jb] = (conv && !broke && isfinite(kk)) ? 1 : 0;
        }
    }
}
