// expect: passed
// why: a valid alternative without padding: element (i, c) of the tile is kept at tile[i][c ^ i], so a row is still filled by one warp and a column read tile[lane][j ^ lane] touches 32 different banks
#define TILE 32
#define BLOCK_ROWS 8
extern "C" __global__ void transpose_tiled(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE];
    const int lane = threadIdx.x;
    const int x = blockIdx.x * TILE + lane;
    const int y0 = blockIdx.y * TILE;
    for (int i = threadIdx.y; i < TILE; i += BLOCK_ROWS) {
        if (y0 + i < rows && x < cols) tile[i][lane ^ i] = in[(long long)(y0 + i) * cols + x];
    }
    __syncthreads();
    const int ox = blockIdx.y * TILE + lane;
    const int oy0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        if (oy0 + j < cols && ox < rows) out[(long long)(oy0 + j) * rows + ox] = tile[lane][j ^ lane];
    }
}
