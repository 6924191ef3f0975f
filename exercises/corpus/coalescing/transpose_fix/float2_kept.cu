// expect: crash
// why: bounds checks added, but the float2 store into the pitch-65 tile is still misaligned for odd rows
#define TILE_R 32
#define TILE_C 64
#define BLOCK_Y 8
extern "C" __global__ void transpose_tile(const float* in, float* out, int rows, int cols)
{
    __shared__ float tile[TILE_R][TILE_C + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int r0 = blockIdx.y * TILE_R, c0 = blockIdx.x * TILE_C;
    for (int r = ty; r < TILE_R; r += BLOCK_Y) {
        const int gr = r0 + r, gc = c0 + 2 * tx;
        float2 v = make_float2(0.0f, 0.0f);
        if (gr < rows && gc < cols) v.x = in[(long long)gr * cols + gc];
        if (gr < rows && gc + 1 < cols) v.y = in[(long long)gr * cols + gc + 1];
        *reinterpret_cast<float2*>(&tile[r][2 * tx]) = v;
    }
    __syncthreads();
    for (int c = ty; c < TILE_C; c += BLOCK_Y) {
        const int orow = c0 + c, ocol = r0 + tx;
        if (orow < cols && ocol < rows) out[(long long)orow * rows + ocol] = tile[tx][c];
    }
}
