// expect: race | wrong_result | nan
// expect-cpu: race
// why: no __syncthreads() between filling the tile and reading its columns: a thread reads slots that other warps of the block have not written yet
#define TILE 32
#define BLOCK_ROWS 8
extern "C" __global__ void transpose_tiled(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    const int x = blockIdx.x * TILE + threadIdx.x;
    const int y0 = blockIdx.y * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        if (y0 + j < rows && x < cols) tile[j][threadIdx.x] = in[(long long)(y0 + j) * cols + x];
    }
    const int ox = blockIdx.y * TILE + threadIdx.x;
    const int oy0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        if (oy0 + j < cols && ox < rows) out[(long long)(oy0 + j) * rows + ox] = tile[threadIdx.x][j];
    }
}
