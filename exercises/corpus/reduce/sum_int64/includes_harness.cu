// expect: forbidden_code
// why: includes files from outside the kernel (the harness, a host header)
#include "../../kernels/grading/harness.py"
#include <cstdio>
extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)
{
    partial[blockIdx.x] = 0;
}
