// expect: oob_write
// why: bounds-checked against the whole array (first + j < total) instead of the chunk (j < n): the last block of every chunk but the last writes past the chunk's end, into the next chunk's part of out (in a pipeline, while that chunk's data may still be in flight)
extern "C" __global__ void smooth3(const float* in, float* out, int n, int first, int total)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    const int g = first + j;
    if (g < total) {
        const float left = g > 0 ? in[j - 1] : in[j];
        const float right = g < total - 1 ? in[j + 1] : in[j];
        out[j] = (left + in[j] + right) / 3.0f;
    }
}
