// Matrix transpose: out (cols x rows) = in (rows x cols)^T, both row-major fp32.
//
// Every kernel here walks the matrix in square tiles of T x T elements, one tile
// per block, with a block of T x R threads (blockDim = (T, R), T a multiple of
// R): thread (tx, ty) handles rows ty, ty + R, ty + 2R, ... of its tile, so each
// thread moves T / R elements. Grid: (ceil(cols / T), ceil(rows / T)).
//
// copy_tiled       the same bytes and the same tiling, no transpose: the ceiling.
// transpose_naive  reads rows of `in` (coalesced) and writes them as columns of
//                  `out`: the 32 lanes of a warp store 32 floats `rows` floats
//                  apart, 32 sectors per store instead of 4.
// transpose_tiled  stages the tile in shared memory: read rows of `in` into rows
//                  of the tile (coalesced), synchronise, then read columns of the
//                  tile and write them as rows of `out` (coalesced). With PAD = 0
//                  the tile's rows are T floats long; for T = 32 a column of the
//                  tile lies in one shared-memory bank, a 32-way bank conflict.
//                  PAD = 1 makes the pitch T + 1 floats, which puts the 32
//                  elements of a column in 32 different banks. Each element is
//                  stored to shared memory on its own (a scalar store), so the odd
//                  pitch never creates a misaligned vector access.
//
// name_expressions: transpose_tiled<32, 8, 0>, transpose_tiled<32, 8, 1>, transpose_tiled<16, 4, 1>
// name_expressions: transpose_tiled<16, 8, 1>, transpose_tiled<16, 16, 1>
// name_expressions: transpose_tiled<32, 4, 1>, transpose_tiled<32, 16, 1>
// name_expressions: transpose_tiled<32, 32, 1>, transpose_tiled<64, 4, 1>
// name_expressions: transpose_tiled<64, 8, 1>, transpose_tiled<64, 16, 1>
// name_expressions: transpose_tiled<16, 2, 1>, transpose_tiled<16, 1, 1>, transpose_tiled<32, 2, 1>

extern "C" __global__ void copy_tiled(const float* __restrict__ in,
                                      float* __restrict__ out,
                                      int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    for (int j = threadIdx.y; j < (int)blockDim.x; j += blockDim.y) {
        int r = blockIdx.y * blockDim.x + j;
        if (r < rows && c < cols) {
            out[(long long)r * cols + c] = in[(long long)r * cols + c];
        }
    }
}

extern "C" __global__ void transpose_naive(const float* __restrict__ in,
                                           float* __restrict__ out,
                                           int rows, int cols)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;          // column of in = row of out
    for (int j = threadIdx.y; j < (int)blockDim.x; j += blockDim.y) {
        int r = blockIdx.y * blockDim.x + j;                  // row of in = column of out
        if (r < rows && c < cols) {
            out[(long long)c * rows + r] = in[(long long)r * cols + c];
        }
    }
}

template <int T, int R, int PAD>
__global__ void transpose_tiled(const float* __restrict__ in,
                                float* __restrict__ out,
                                int rows, int cols)
{
    __shared__ float tile[T][T + PAD];

    // Phase 1: rows of the input tile -> rows of `tile` (lanes read consecutive columns).
    int c = blockIdx.x * T + threadIdx.x;
    for (int j = threadIdx.y; j < T; j += R) {
        int r = blockIdx.y * T + j;
        if (r < rows && c < cols) {
            tile[j][threadIdx.x] = in[(long long)r * cols + c];
        }
    }
    __syncthreads();   // the whole tile is loaded before any thread reads a column of it

    // Phase 2: columns of `tile` -> rows of the output tile (lanes write consecutive columns).
    int oc = blockIdx.y * T + threadIdx.x;                     // column of out = row of in
    for (int j = threadIdx.y; j < T; j += R) {
        int orow = blockIdx.x * T + j;                        // row of out = column of in
        if (orow < cols && oc < rows) {
            out[(long long)orow * rows + oc] = tile[threadIdx.x][j];
        }
    }
}
