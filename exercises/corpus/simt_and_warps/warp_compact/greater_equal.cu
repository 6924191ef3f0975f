// expect: wrong_result
// why: keeps elements equal to the threshold (>= instead of >); the statement keeps only those greater than it
#define FULL_MASK 0xffffffffu

extern "C" __global__ void warp_compact(const float* x, float* out, int* counts, float threshold, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x % 32;
    const int g = i / 32;
    const float v = i < n ? x[i] : 0.0f;
    const bool keep = i < n && v >= threshold;
    const unsigned mask = __ballot_sync(FULL_MASK, keep);
    const int count = __popc(mask);
    if (32 * g < n) {
        if (keep) out[32 * g + __popc(mask & ((1u << lane) - 1))] = v;
        if (lane >= count) out[32 * g + lane] = 0.0f;
        if (lane == 0) counts[g] = count;
    }
}
