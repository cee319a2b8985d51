// mgkflow: derivatives of the marginalized graph kernel in the per-pair solver (docs/gradients.md).
//
// Spliced into mgk_solver.cu (as GRADIENT_FRAGMENT, only when KernelConfig.gradient) after
// block_sum2. The solver's GRADIENT section runs one PCG loop with two recurrences, M x = b and the
// adjoint M y = p_x (right-hand side start_weight, octile_primitives.cuh), sharing each XMV pass (XMV_TILE_PAIR2 of the
// strategy fragment); then every derivative is one sum over the product graph (grad_contraction):
//   node hyperparameter h:  sum_ii'  y x d d' (dv/dh) / v^2
//   edge hyperparameter h:  sum over edge pairs (i->j, i'->j') of w w' (dke/dh) y_ii' x_jj'
//   scalar q:               sum_ii'  y (db/dq - (dD/dq) / v x),  dD/dq = 2 D / (1 - q),  db/dq = dD q^2 + 2 q D
// The edge sums walk the row pairs of the row-pair XMV (rrowptr / rcoff / rweight / relab: the
// "rows" strategy's arrays) with the derivative expressions in place of the edge kernel; products
// and sums are accumulated in float64 and block-reduced into out_grad[job * N_GRAD + h] (node
// hyperparameters, edge hyperparameters, then q; the host drops q unless one scalar q holds).
//
// Placeholder GRAD_DEFINES (mgkflow.gpu.source.gradient_fragment): N_NODE_GRAD, N_EDGE_GRAD,
// N_GRAD and the X-macros NODE_GRAD_LIST(F) / EDGE_GRAD_LIST(F) = F(slot, C float expression) ...

${GRAD_DEFINES}

#define N_EDGE_ACC (N_EDGE_GRAD > 0 ? N_EDGE_GRAD : 1)

// Sum four doubles over the block (the two recurrences' r.z and r.r); every thread gets the totals: the warps'
// partials, then every thread sums them, or in resident builds warp 0 by a butterfly (S29-D: +4% on BA labeled
// gradients and no spills there; every thread's sum kept elsewhere, where the butterfly raised the spills).
// buf: 4 * NWARP doubles, 4 * NWARP + 4 in resident builds (the totals).
__device__ __forceinline__ void block_sum4(double& a, double& b, double& c, double& d, double* buf)
{
    warp_sum2(a, b);
    warp_sum2(c, d);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    if (l == 0) {
        buf[w] = a;
        buf[NWARP + w] = b;
        buf[2 * NWARP + w] = c;
        buf[3 * NWARP + w] = d;
    }
    __syncthreads();
#if RESIDENT
    if (w == 0) {  // lane l reads partial l of each sum
        double x = l < NWARP ? buf[l] : 0.0, y = l < NWARP ? buf[NWARP + l] : 0.0;
        double u = l < NWARP ? buf[2 * NWARP + l] : 0.0, v = l < NWARP ? buf[3 * NWARP + l] : 0.0;
        warp_sum2(x, y);
        warp_sum2(u, v);
        if (l == 0) {
            buf[4 * NWARP] = x;
            buf[4 * NWARP + 1] = y;
            buf[4 * NWARP + 2] = u;
            buf[4 * NWARP + 3] = v;
        }
    }
    __syncthreads();
    a = buf[4 * NWARP];
    b = buf[4 * NWARP + 1];
    c = buf[4 * NWARP + 2];
    d = buf[4 * NWARP + 3];
#else
    a = 0.0;
    b = 0.0;
    c = 0.0;
    d = 0.0;
#pragma unroll
    for (int k = 0; k < NWARP; ++k) {
        a += buf[k];
        b += buf[NWARP + k];
        c += buf[2 * NWARP + k];
        d += buf[3 * NWARP + k];
    }
    __syncthreads();
#endif
}

// sum over the row pair (rows a0..a1 of G1, b0..b1 of G2) of w w' (dke/dh) X[col], for every h
__device__ __forceinline__ void grad_row_pair(
    const int a0, const int a1, const int b0, const int b1, const double* __restrict__ X, const int nt2,
    const int* __restrict__ coff, const w_t* __restrict__ weight, const unsigned int* __restrict__ elab,
    const long long elab_stride, double (&acc)[N_EDGE_ACC])
{
    for (int ka = a0; ka < a1; ++ka) {
        const int ca = coff[ka];
        const double* Xr = X + ((long long)(ca >> 6) * nt2 << 6) + ((ca & 7) << 3);
        const double w1 = (double)LOAD_W(weight, ka);
        LOAD_E1(ka);
        for (int kb = b0; kb < b1; ++kb) {
            const double cx = w1 * (double)LOAD_W(weight, kb) * Xr[coff[kb]];
            LOAD_E2(kb);
#define MGK_EDGE_GRAD_ACC(h, expr) acc[h] += cx * (double)(expr);
            EDGE_GRAD_LIST(MGK_EDGE_GRAD_ACC)
#undef MGK_EDGE_GRAD_ACC
        }
    }
}

// g[N_NODE_GRAD + h] += y (sum over the row pair of output (x, u) of tile pair tp of w w' (dke/dh) x), every h
__device__ __forceinline__ void grad_edge_output(
    const int tp, const int x, const int u, const GraphHdr& h1, const GraphHdr& h2, const int nt2,
    const double* __restrict__ X, const double* __restrict__ Y, const int* __restrict__ rrowptr,
    const int* __restrict__ rcoff, const w_t* __restrict__ rweight, const unsigned int* __restrict__ relab,
    const long long relab_stride, double (&g)[N_GRAD])
{
    const int I = tp / nt2, I2 = tp - I * nt2;
    const int* ra_ = rrowptr + h1.rrow_off + I * 8;
    const int* rb_ = rrowptr + h2.rrow_off + I2 * 8;
    const double yv = Y[((long long)tp << 6) + x * 8 + u];
    double acc[N_EDGE_ACC];
#pragma unroll
    for (int h = 0; h < N_EDGE_ACC; ++h) acc[h] = 0.0;
    grad_row_pair(ra_[x], ra_[x + 1], rb_[u], rb_[u + 1], X, nt2, rcoff, rweight, relab, relab_stride, acc);
#pragma unroll
    for (int h = 0; h < N_EDGE_GRAD; ++h) g[N_NODE_GRAD + h] += yv * acc[h];
}

// dK/dh of one pair from x (X) and y (Y), block-reduced into out[0 .. N_GRAD)
__device__ __noinline__ void grad_contraction(
    const GraphHdr h1, const GraphHdr h2, const int nt2, const int n_tp, const long long N,
    const double* __restrict__ X, const double* __restrict__ Y,
    const unsigned int* __restrict__ nlab, const long long nlab_stride,
    const double* __restrict__ dvec, const double* __restrict__ qvec,
    const int* __restrict__ rrowptr, const int* __restrict__ rcoff, const w_t* __restrict__ rweight,
    const unsigned int* __restrict__ relab, const long long relab_stride,
    double* __restrict__ out, double* red)
{
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    double g[N_GRAD];
#pragma unroll
    for (int h = 0; h < N_GRAD; ++h) g[h] = 0.0;

    // node kernel and q: one pass over the product nodes
    for (long long idx = tid; idx < N; idx += BLOCK) {
        const int tp = (int)(idx >> 6), e = (int)(idx & 63);
        const int I = tp / nt2, I2 = tp - I * nt2;
        const int i = I * 8 + (e >> 3), i2 = I2 * 8 + (e & 7);
        if (i >= h1.n || i2 >= h2.n) continue;
        const int u1 = h1.node_off + i, u2 = h2.node_off + i2;
        LOAD_V1(u1);
        LOAD_V2(u2);
        float kv = NODE_KERNEL_EXPR;
        kv = fmaxf(kv, 1e-30f);  // as system_entry
        const double v = (double)kv;
        const double dd = dvec[u1] * dvec[u2];
        const double xv = X[idx], yv = Y[idx];
        const double w = yv * xv * dd / (v * v);
#define MGK_NODE_GRAD_ACC(h, expr) g[h] += w * (double)(expr);
        NODE_GRAD_LIST(MGK_NODE_GRAD_ACC)
#undef MGK_NODE_GRAD_ACC
        const double q1 = qvec[u1], q2 = qvec[u2];
        const double dD = dd * (1.0 / (1.0 - q1) + 1.0 / (1.0 - q2));  // 2 D / (1 - q) for one scalar q
        g[N_GRAD - 1] += yv * (dD * q1 * q2 + dd * (q1 + q2) - dD / v * xv);
    }

    // edge kernel: the row-pair walk, lane (rx, ru) owning outputs (rx, ru) and (7 - rx, 7 - ru) of a tile pair: over
    // the warp's range of half tile pairs of the XMV's schedule where UNIT_HALVES (s_start), else round robin
    const int rx = lane >> 3, ru = lane & 7;
#if UNIT_HALVES
    for (int k = s_start[warp], e = s_start[warp + 1]; k < e; ++k) {
        const int s = k & 1;
        grad_edge_output(k >> 1, s ? 7 - rx : rx, s ? 7 - ru : ru, h1, h2, nt2, X, Y, rrowptr, rcoff, rweight, relab,
                         relab_stride, g);
    }
#else
    for (int tp = warp; tp < n_tp; tp += NWARP) {
#pragma unroll
        for (int s = 0; s < 2; ++s)
            grad_edge_output(tp, s ? 7 - rx : rx, s ? 7 - ru : ru, h1, h2, nt2, X, Y, rrowptr, rcoff, rweight, relab,
                             relab_stride, g);
    }
#endif

    // block sums, two at a time
#pragma unroll
    for (int h = 0; h < N_GRAD; h += 2) {
        double a = g[h], b = (h + 1 < N_GRAD) ? g[h + 1] : 0.0;
        block_sum2(a, b, red);
        if (tid == 0) {
            out[h] = a;
            if (h + 1 < N_GRAD) out[h + 1] = b;
        }
    }
}
