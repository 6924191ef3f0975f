// Convolution as a matrix multiplication (im2col): the sidebar of the GEMM chapter.
//
// A 2-D convolution of one image x (C channels, H x W, row-major per channel) with F filters of
// C x R x S weights, stride `stride` and zero padding `pad`, has output size P x Q with
// P = (H + 2 pad - R) / stride + 1 and Q = (W + 2 pad - S) / stride + 1, and
//   y[f][p][q] = sum over c, r, s of w[f][c][r][s] *
//   x[c][p * stride - pad + r][q * stride - pad + s].
// im2col writes the (C R S) x (P Q) matrix X with X[(c R + r) S + s][p Q + q] = that x value (0 in
// the padding). Then y = Wmat X, where Wmat is the F x (C R S) weight array as it is: one GEMM
// with M = F, N = P Q, K = C R S. The price is memory: X holds every input value up to R S times.
//
// One thread per element of X; consecutive threads write consecutive (p, q), so the writes are
// coalesced. Launch: any 1-D grid covering C R S P Q threads.
extern "C" __global__ void im2col(const float* __restrict__ x, float* __restrict__ cols,
                                  int C, int H, int W, int R, int S, int stride, int pad, int P, int Q)
{
    const long long total = (long long)C * R * S * P * Q;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int q = (int)(i % Q), p = (int)(i / Q % P);
        const long long row = i / ((long long)P * Q);            // (c R + r) S + s
        const int s = (int)(row % S), r = (int)(row / S % R), c = (int)(row / ((long long)R * S));
        const int h = p * stride - pad + r, w = q * stride - pad + s;
        cols[i] = (h >= 0 && h < H && w >= 0 && w < W) ? x[((long long)c * H + h) * W + w] : 0.0f;
    }
}
