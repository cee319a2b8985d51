// mgkflow: a Gram matrix and its derivatives assembled on the device from a gradient call's
// per-job results (host side: mgkflow/gpu/assemble.py; the same arithmetic on the host:
// mgkflow/evaluation/assemble.py, gram_with_gradient).
//
// The per-pair solver writes, per job slot t (the launches of one call one after another), the
// value vals[t], its iterations, residual and flag, and n_grad derivatives grads[t * n_grad + c].
// Slot t solved the pair (slot_i[t], slot_j[t]) of the upper triangle; dslot[i] is the slot of
// the self pair (i, i); cols[h] is the device column of output column h (-1: the last, dK/dq).
// These kernels write the dense symmetric n x n matrices K (normalized:
// K / sqrt(K_ii K_jj)), the h_out chosen derivative columns dK (n x n x h_out, times scale[h]:
// log space), iterations, residuals and flags, so that only the finished arrays cross the bus.
//
// The operations are those of the host's pass, in the same order, and written with the _rn
// intrinsics so that no multiply-add is contracted: the results are the host's to the last bit.

// The device column of output column h: cols[h], or the last of the n_grad (dK/dq) where cols[h] < 0.
__device__ __forceinline__ int column(const int* __restrict__ cols, int h, int n_grad)
{
    const int c = cols[h];
    return c < 0 ? n_grad - 1 : c;
}

// Per graph i: its raw self similarity, sqrt of it (normalize) and d K_ii / K_ii per column.
extern "C" __global__ void gram_diagonal(
    const double* __restrict__ vals,
    const double* __restrict__ grads,
    const int* __restrict__ dslot,
    const int* __restrict__ cols,
    const int n,
    const int n_grad,
    const int h_out,
    const int normalize,
    double* __restrict__ kdiag,
    double* __restrict__ root,
    double* __restrict__ ratio)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long t = dslot[i];
    const double kd = vals[t];
    kdiag[i] = kd;
    root[i] = normalize ? sqrt(kd) : 1.0;
    for (int h = 0; h < h_out; ++h)
        ratio[(long long)i * h_out + h] = normalize ? __ddiv_rn(grads[t * n_grad + column(cols, h, n_grad)], kd) : 0.0;
}

// Every slot writes both triangles of K, dK, iterations, residuals and flags; counts[0] gets the
// number of non-finite derivatives read, counts[1] the number of non-finite values.
extern "C" __global__ void gram_assemble(
    const double* __restrict__ vals,
    const int* __restrict__ iters,
    const double* __restrict__ res,
    const int* __restrict__ conv,
    const double* __restrict__ grads,
    const int* __restrict__ slot_i,
    const int* __restrict__ slot_j,
    const int* __restrict__ cols,
    const double* __restrict__ scale,
    const double* __restrict__ root,
    const double* __restrict__ ratio,
    const int n_slots,
    const int n,
    const int n_grad,
    const int h_out,
    const int normalize,
    double* __restrict__ K,
    double* __restrict__ dK,
    long long* __restrict__ I,
    double* __restrict__ R,
    unsigned char* __restrict__ C,
    unsigned long long* __restrict__ counts)
{
    unsigned long long bad = 0, bad_k = 0;
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < n_slots; t += gridDim.x * blockDim.x) {
        const long long i = slot_i[t], j = slot_j[t];
        const long long ij = i * n + j, ji = j * n + i;
        const double v = vals[t];
        const double s = __dmul_rn(root[i], root[j]);
        const double kn = normalize ? __ddiv_rn(v, s) : v;
        const bool finite = isfinite(v);
        bad_k += finite ? 0 : 1;
        K[ij] = kn;
        K[ji] = kn;
        I[ij] = iters[t];
        I[ji] = iters[t];
        R[ij] = res[t];
        R[ji] = res[t];
        const unsigned char c = (conv[t] != 0 && finite) ? 1 : 0;
        C[ij] = c;
        C[ji] = c;
        const double* g_t = grads + (long long)t * n_grad;
        const double* r_i = ratio + i * h_out;
        const double* r_j = ratio + j * h_out;
        for (int h = 0; h < h_out; ++h) {
            double g = g_t[column(cols, h, n_grad)];
            bad += isfinite(g) ? 0 : 1;
            if (normalize)
                g = __dsub_rn(__ddiv_rn(g, s), __dmul_rn(__dmul_rn(0.5, kn), __dadd_rn(r_i[h], r_j[h])));
            g = __dmul_rn(g, scale[h]);
            dK[ij * h_out + h] = g;
            dK[ji * h_out + h] = g;
        }
    }
    if (bad) atomicAdd(counts, bad);
    if (bad_k) atomicAdd(counts + 1, bad_k);
}
