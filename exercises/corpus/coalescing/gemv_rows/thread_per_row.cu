// expect: passed | too_slow
// expect-cpu: passed
// why: one thread per row (G = 1): the lanes of a warp read addresses cols floats apart, and the traffic feedback flags it, but for the speed case's rows of 24 floats a warp's 32 rows are 3 KB of contiguous memory whose sectors L1 keeps between the loop's iterations. On an H100 it passed at 76 % of copy, faster than the reference solution (72 %); on an H200 it was too slow. It is slow where rows are long (the chapter's thread-per-row GEMV)
#define ROWS_PER_BLOCK 256
extern "C" __global__ void gemv(const float* A, const float* x, float* y, int rows, int cols)
{
    const int row = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x;
    if (row >= rows) return;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += A[(long long)row * cols + c] * x[c];
    y[row] = acc;
}
