// expect: unwritten | wrong_result | oob_write
// why: wrong index mapping: x runs along the rows, so a non-square matrix is covered wrongly
extern "C" __global__ void scale_rows_add_cols(const float* a, const float* row_scale,
                                               const float* col_bias, float* out, int rows, int cols)
{
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    const int c = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        const long long i = (long long)r * cols + c;
        out[i] = a[i] * row_scale[r] + col_bias[c];
    }
}
