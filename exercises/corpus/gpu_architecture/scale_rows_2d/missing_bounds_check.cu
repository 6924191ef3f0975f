// expect: oob_write
// why: no bounds check: the threads of the last blocks write past the end of out
extern "C" __global__ void scale_rows_add_cols(const float* a, const float* row_scale,
                                               const float* col_bias, float* out, int rows, int cols)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    const long long i = (long long)r * cols + c;
    out[i] = a[i] * row_scale[r] + col_bias[c];
}
