// mgkflow: the two small kernels of an exact Gaussian process's dense algebra on the device
// (host side: mgkflow/gpu/dense.py; cuSOLVER factors and inverts, these read and finish).
//
// Matrices are n x n, column-major with leading dimension n (a symmetric host array in C order is
// the same bytes). cuSOLVER's potri leaves K^-1 in the lower triangle; dense_fill turns it into the
// full symmetric weight matrix W = scale * K^-1 + 1/2 a a^T of the gradient (a: n x m, column-major),
// as the host's objectives.py _weights does.

#define DENSE_TILE 32

// d[i] = A[i, i].
extern "C" __global__ void dense_diagonal(const double* __restrict__ A, double* __restrict__ d, const int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) d[i] = A[(long long)i * (n + 1)];
}

// One 32 x 32 tile (blockIdx.x = tile row, blockIdx.y = tile column) of the lower triangle per block:
// W[r, c] = scale * W[r, c] + 1/2 sum_k a[r, k] a[c, k] for r >= c, then mirrored into W[c, r]
// through shared memory so that both the reads and the mirrored writes are coalesced. Blocks above the
// diagonal return at once; the upper triangle is only written, never read.
extern "C" __global__ void dense_fill(
    double* __restrict__ W,
    const double* __restrict__ a,
    const int n,
    const int m,
    const double scale)
{
    __shared__ double tile[DENSE_TILE][DENSE_TILE + 1];
    const int R = blockIdx.x, C = blockIdx.y;
    if (R < C) return;
    const int tx = threadIdx.x;
    for (int ty = threadIdx.y; ty < DENSE_TILE; ty += blockDim.y) {
        const int r = R * DENSE_TILE + tx, c = C * DENSE_TILE + ty;
        double v = 0.0;
        if (r < n && c < n && r >= c) {
            const long long at = (long long)c * n + r;
            double s = 0.0;
            for (int k = 0; k < m; ++k) s += a[(long long)k * n + r] * a[(long long)k * n + c];
            v = scale * W[at] + 0.5 * s;
            W[at] = v;
        }
        tile[ty][tx] = v;
    }
    __syncthreads();
    for (int ty = threadIdx.y; ty < DENSE_TILE; ty += blockDim.y) {
        const int r = R * DENSE_TILE + ty, c = C * DENSE_TILE + tx;
        if (r < n && c < n && r > c) W[(long long)r * n + c] = tile[tx][ty];
    }
}
