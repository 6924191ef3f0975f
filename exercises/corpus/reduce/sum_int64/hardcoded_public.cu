// expect: hidden_failed
// why: answers hard-coded for the sizes of the public cases; the hidden cases catch it
extern "C" __global__ void sum_partials(const int* x, int n, long long* partial)
{
    if (threadIdx.x != 0) return;
    long long total = 0;
    if (n == 1) total = -824LL;
    if (n == 2) total = 4294967294LL;
    if (n == 33) total = -70866960384LL;
    if (n == 1000) total = -5543LL;
    if (n == 4099) total = 84986764804LL;
    if (n == 65537) total = 140739635773439LL;
    if (n == 1000003) total = -146437019631LL;
    if (n == 2100003) total = 163749096315LL;
    if (n == 16777259) total = -5642237382232LL;
    partial[blockIdx.x] = blockIdx.x == 0 ? total : 0;
}
