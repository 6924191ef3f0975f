// expect: forbidden_code
// why: host code: a launcher and a main function, which the harness never runs (and must not)
extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)
{
    long long s = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += x[i];
    atomicAdd((unsigned long long*)&partial[blockIdx.x], (unsigned long long)s);
}

void launch_sum(const int* x, int n, long long* partial)
{
    sum_partials<<<1, 256>>>(x, n, partial);
}

int main() { return 0; }
