// expect: wrong_signature
// why: the coefficients are double and n is missing
extern "C" __global__ void axpby(const float* x, const float* y, float* out, double a, double b)
{
    out[threadIdx.x] = a * x[threadIdx.x] + b * y[threadIdx.x];
}
