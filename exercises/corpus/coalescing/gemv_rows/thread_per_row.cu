// expect: too_slow
// expect-cpu: passed
// why: correct but uncoalesced: one thread per row, so the lanes of a warp read addresses cols floats apart
#define ROWS_PER_BLOCK 256
extern "C" __global__ void gemv(const float* A, const float* x, float* y, int rows, int cols)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += A[(long long)row * cols + c] * x[c];
    y[row] = acc;
}
