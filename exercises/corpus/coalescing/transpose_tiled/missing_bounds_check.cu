// expect: oob_write | crash
// expect-cpu: oob_write | crash
// why: no bounds checks: unless rows and cols are multiples of 32 the edge blocks read past the end of in and write past the end of out. The CPU backend stops at the first access outside an allocation: oob_read or oob_write when the address falls in the guard band of an argument array, crash when it falls in memory that belongs to none, which depends on where the arrays happen to be placed
#define TILE 32
#define BLOCK_ROWS 8
extern "C" __global__ void transpose_tiled(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE][TILE + 1];
    const int x = blockIdx.x * TILE + threadIdx.x;
    const int y0 = blockIdx.y * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        tile[j][threadIdx.x] = in[(long long)(y0 + j) * cols + x];
    }
    __syncthreads();
    const int ox = blockIdx.y * TILE + threadIdx.x;
    const int oy0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        out[(long long)(oy0 + j) * rows + ox] = tile[threadIdx.x][j];
    }
}
