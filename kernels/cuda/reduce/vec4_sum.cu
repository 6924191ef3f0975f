// The last rungs of the reduction ladder: many elements per thread, 16-byte vector loads, a grid
// that fills the GPU once, and a finish inside the same launch.
//
// Every thread walks the array with a grid-stride loop over 16-byte vectors (float4 or int4),
// four vectors per iteration so that four independent loads are in flight before the first
// addition. Any grid works; the fast launch is one full wave of blocks (the occupancy limit
// times the number of SMs). blockDim.x must be a multiple of 32 (up to 1024); n < 2^31.
//
// Alignment: a 16-byte load needs an address that is a multiple of 16. x itself only has to be
// aligned to its element (x may be a slice such as x + 1). The first 0-3 elements before the
// first 16-byte boundary (the head) and the 0-3 after the last whole vector (the tail) are added
// one at a time by the first threads of the grid.

#define FULL_MASK 0xffffffffu

template <typename T>
__device__ T warp_sum(T v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(FULL_MASK, v, offset);
    return v;
}

// Sum of v over the block, valid in thread 0. Shuffles within each warp, then warp 0 sums the
// warp totals. Called by every thread of the block.
template <typename Acc>
__device__ Acc block_sum(Acc v)
{
    __shared__ Acc warp_totals[32];
    unsigned int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    v = warp_sum(v);
    __syncthreads();                       // warp_totals may still be read by an earlier call
    if (lane == 0) warp_totals[warp] = v;
    __syncthreads();
    v = lane < blockDim.x / 32 ? warp_totals[lane] : Acc(0);
    if (warp == 0) v = warp_sum(v);
    return v;
}

// This thread's share of x[0..n): the head, the whole vectors in a grid-stride loop, the tail.
// T4 is the 16-byte vector type of T (float4 for float, int4 for int). Acc is the accumulator.
template <typename T, typename T4, typename Acc>
__device__ Acc thread_sum(const T* __restrict__ x, int n)
{
    const int tid = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = gridDim.x * blockDim.x;

    unsigned long long address = (unsigned long long)x;
    int head = (int)(((16 - (address & 15)) & 15) / sizeof(T));   // elements before a 16-byte boundary
    if (head > n) head = n;
    const T4* v = reinterpret_cast<const T4*>(x + head);
    const int n4 = (n - head) / 4;                                 // whole vectors
    const int tail = head + 4 * n4;                                // first element after them

    Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;                            // four independent sums
    if (tid < head) a0 += x[tid];
    if (tid < n - tail) a1 += x[tail + tid];

    int i = tid;
    for (; i + 3 * stride < n4; i += 4 * stride) {                 // four loads in flight
        T4 p = __ldg(v + i), q = __ldg(v + i + stride);            // __ldg: read-only data path
        T4 r = __ldg(v + i + 2 * stride), s = __ldg(v + i + 3 * stride);
        a0 += p.x; a1 += p.y; a2 += p.z; a3 += p.w;
        a0 += q.x; a1 += q.y; a2 += q.z; a3 += q.w;
        a0 += r.x; a1 += r.y; a2 += r.z; a3 += r.w;
        a0 += s.x; a1 += s.y; a2 += s.z; a3 += s.w;
    }
    for (; i < n4; i += stride) {                                  // the last 0-3 vectors
        T4 p = __ldg(v + i);
        a0 += p.x; a1 += p.y; a2 += p.z; a3 += p.w;
    }
    return (a0 + a1) + (a2 + a3);
}

// Every block writes its sum to partial[blockIdx.x]; the host finishes (a second launch with
// one block, on the partial sums).
extern "C" __global__ void sum_vec4_partials(const float* __restrict__ x, float* partial, int n)
{
    float v = block_sum(thread_sum<float, float4, float>(x, n));
    if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

// One launch: every block writes its partial sum, and the block that finishes last adds up all
// gridDim.x partial sums in a fixed order and writes *out.
//   __threadfence() makes the block's partial visible to the whole GPU before the block takes a
//   ticket from the counter; the block that draws ticket gridDim.x - 1 knows every other block
//   has published its partial. It reads them with __ldcg (from L2, never a stale L1 line).
//   *counter must be 0 before the first launch; the last block resets it, so the next launch in
//   the stream starts from 0 again. partial needs gridDim.x elements.
template <typename T, typename T4, typename Acc>
__device__ void single_pass(const T* __restrict__ x, Acc* partial, unsigned int* counter, Acc* out, int n)
{
    __shared__ bool is_last;
    Acc v = block_sum(thread_sum<T, T4, Acc>(x, n));
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = v;
        __threadfence();
        unsigned int ticket = atomicAdd(counter, 1u);
        is_last = ticket == gridDim.x - 1;
    }
    __syncthreads();
    if (!is_last) return;                  // the whole block leaves together
    __threadfence();
    Acc s = 0;
    for (unsigned int b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        s += __ldcg(&partial[b]);
    s = block_sum(s);
    if (threadIdx.x == 0) {
        *out = s;
        *counter = 0;                      // ready for the next launch
    }
}

extern "C" __global__ void sum_vec4_single_pass(const float* __restrict__ x, float* partial,
                                                unsigned int* counter, float* out, int n)
{
    single_pass<float, float4, float>(x, partial, counter, out, n);
}

// int32 input, 64-bit accumulation: exact for any n < 2^31 (|sum| < 2^62).
extern "C" __global__ void sum_int_single_pass(const int* __restrict__ x, long long* partial,
                                               unsigned int* counter, long long* out, int n)
{
    single_pass<int, int4, long long>(x, partial, counter, out, n);
}
