// expect: wrong_result | nan | race
// expect-cpu: nan
// why: the second phase reads a row of the tile (tile[j][threadIdx.x]) instead of a column: each tile lands in its transposed place but is itself not transposed, and in the edge tiles it reads slots that were never loaded (NaN-poisoned on the CPU backend) On a GPU those slots hold whatever an earlier block left in shared memory, which changes from run to run, so the grader's second run can see a race first
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
    __syncthreads();
    const int ox = blockIdx.y * TILE + threadIdx.x;
    const int oy0 = blockIdx.x * TILE;
    for (int j = threadIdx.y; j < TILE; j += BLOCK_ROWS) {
        if (oy0 + j < cols && ox < rows) out[(long long)(oy0 + j) * rows + ox] = tile[j][threadIdx.x];
    }
}
