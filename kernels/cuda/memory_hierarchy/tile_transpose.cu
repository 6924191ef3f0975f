// Transpose every 32x32 tile of a batch through shared memory, three ways.
//
// in holds ntiles row-major 32x32 tiles, one after the other; out receives
// their transposes. A block of 32 x 8 threads loads one tile with coalesced
// row reads into shared memory, then writes the output rows, which are the
// tile's columns. In shared memory a column read means lane l reads row l of
// the tile, and the three kernels differ only in where element (r, c) is kept:
//
//   tile_transpose_plain     tile[r * 32 + c]         column = 32-way bank conflict
//   tile_transpose_padded    tile[r * 33 + c]         one padding word per row
//   tile_transpose_swizzled  tile[r * 32 + (c ^ r)]   XOR swizzle, no extra space
//
// The column reads are repeated `reps` times (and summed, through a volatile
// pointer so that they are really repeated) to make the shared-memory phase
// dominate the global-memory traffic: out = reps * transpose(in).
// Launch: grid (ntiles), block (32, 8).
#define TILE 32
#define ROWS 8

template <int MODE>
__device__ __forceinline__ int tile_slot(int r, int c)
{
    if (MODE == 0) return r * TILE + c;              // plain
    if (MODE == 1) return r * (TILE + 1) + c;        // padded
    return r * TILE + (c ^ r);                       // swizzled
}

template <int MODE>
__device__ __forceinline__ void tile_transpose(const float* __restrict__ in,
                                               float* __restrict__ out,
                                               int ntiles, int reps)
{
    __shared__ float tile[TILE * (TILE + 1)];
    int t = blockIdx.x;
    if (t >= ntiles) {
        return;
    }
    const float* src = in + (long long)t * TILE * TILE;
    float* dst = out + (long long)t * TILE * TILE;
    int tx = threadIdx.x, ty = threadIdx.y;

    for (int r = ty; r < TILE; r += ROWS) {
        tile[tile_slot<MODE>(r, tx)] = src[r * TILE + tx];   // row write: conflict-free
    }
    __syncthreads();

    const volatile float* s = tile;
    for (int r = ty; r < TILE; r += ROWS) {
        // out[r][tx] = in[tx][r]: lane tx reads column r of the tile
        float acc = 0.0f;
        for (int k = 0; k < reps; ++k) {
            acc += s[tile_slot<MODE>(tx, r)];
        }
        dst[r * TILE + tx] = acc;
    }
}

extern "C" __global__ void tile_transpose_plain(const float* __restrict__ in, float* __restrict__ out,
                                                int ntiles, int reps)
{
    tile_transpose<0>(in, out, ntiles, reps);
}

extern "C" __global__ void tile_transpose_padded(const float* __restrict__ in, float* __restrict__ out,
                                                 int ntiles, int reps)
{
    tile_transpose<1>(in, out, ntiles, reps);
}

extern "C" __global__ void tile_transpose_swizzled(const float* __restrict__ in, float* __restrict__ out,
                                                   int ntiles, int reps)
{
    tile_transpose<2>(in, out, ntiles, reps);
}
