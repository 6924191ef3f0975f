// Where the tiled transpose loses bandwidth when the input's number of rows is not a multiple of 8.
// out (cols x rows) = in (rows x cols)^T, both row-major fp32; benchmarks/bench_transpose.py runs
// these kernels beside transpose_tiled from transpose.cu and a flat device copy.
//
// An output row is `rows` floats long. When rows % 8 != 0, output row orow starts at float
// orow * rows, part-way into a 32-byte sector (8 floats), and its misalignment m = (row address / 4)
// % 8 changes from row to row. In every row with m != 0, a warp of transpose_tiled<32, R, 1> stores
// its 32 floats (128 bytes) into 5 sectors instead of 4, two of them only partly written. Measured on
// an H100 (ECC on), the padded transpose reaches about 90 % of a flat copy at 8192 x 8192 but about
// 60 % at 8193 x 8192, 8191 x 8192 and 8191 x 8193, and about 70 % at 8196 x 8196; a number of columns
// that is not a multiple of 8 (which misaligns the loads instead) cost nothing: 8192 x 8193 ran at 90 %.
//
// Both kernels use tiles of T x T elements and blocks of T x R threads (blockDim = (T, R)), as in
// transpose.cu: thread (tx, ty) handles rows ty, ty + R, ty + 2R, ... of its tile.
//
// transpose_store_pattern   transpose_tiled's phase 2 with nothing read: the same stores, with the
//                           same bounds guards, write 1.0f. On an H100 it wrote about 2935 GB/s
//                           when rows % 8 == 0 and about 1340 GB/s when not: the loss is in the stores.
//                           Grid: (ceil(cols / T), ceil(rows / T)).
// transpose_aligned_stores  an attempted fix: every output row's store window is shifted left by
//                           the row's misalignment m (0..7 floats), so that each warp's stores
//                           cover whole sectors. Lane tx writes output column
//                           blockIdx.y * T + tx - m, up to 7 columns before the block's own T
//                           columns of output: the tile holds T + 8 input rows, a halo of 8 rows
//                           above the block's T rows (its first row is never read; the first
//                           tile's halo lies outside the input and is not loaded). Because every
//                           block's window is shifted left by up to 7, the last columns of an
//                           output row need one more block: the grid is
//                           (ceil(cols / T), ceil((rows + 7) / T)), one tile row more than
//                           transpose_tiled when rows % T is 0 or at least T - 6. Each
//                           output element is written by exactly one block, since for a given
//                           output row the windows of consecutive blocks are consecutive. On an
//                           H100 it ran at about 76-80 % of a flat copy at misaligned shapes, and
//                           only about 76-81 % at aligned ones (m = 0 there for a 32-byte-aligned
//                           output, but the halo is still loaded): it does not get back to the
//                           90 % of the aligned case.
//
// The tile's pitch is T + 1 floats (as transpose_tiled<T, R, 1>), so a column of it lies in T
// different banks for T = 32; each element is stored to shared memory on its own.
//
// name_expressions: transpose_store_pattern<32, 8>, transpose_store_pattern<64, 8>, transpose_aligned_stores<32, 8>, transpose_aligned_stores<64, 8>

template <int T, int R>
__global__ void transpose_store_pattern(float* __restrict__ out, int rows, int cols)
{
    int oc = blockIdx.y * T + threadIdx.x;                     // column of out = row of in
    for (int j = threadIdx.y; j < T; j += R) {
        int orow = blockIdx.x * T + j;                        // row of out = column of in
        if (orow < cols && oc < rows) {
            out[(long long)orow * rows + oc] = 1.0f;
        }
    }
}

template <int T, int R>
__global__ void transpose_aligned_stores(const float* __restrict__ in,
                                         float* __restrict__ out,
                                         int rows, int cols)
{
    __shared__ float tile[T + 8][T + 1];                      // 8 halo rows above the block's T rows
    const int tx = threadIdx.x;

    // Phase 1: input rows r0 .. r0 + T + 7 -> rows 0 .. T + 7 of `tile` (lanes read consecutive columns).
    const int r0 = blockIdx.y * T - 8;
    int c = blockIdx.x * T + tx;
    for (int j = threadIdx.y; j < T + 8; j += R) {
        int r = r0 + j;
        if (r >= 0 && r < rows && c < cols) {
            tile[j][tx] = in[(long long)r * cols + c];
        }
    }
    __syncthreads();   // the whole tile is loaded before any thread reads a column of it

    // Phase 2: columns of `tile` -> rows of the output, each row's window shifted left by its
    // misalignment m so that the warp's stores start on a sector boundary.
    for (int j = threadIdx.y; j < T; j += R) {
        int orow = blockIdx.x * T + j;                        // row of out = column of in
        if (orow < cols) {
            float* row = out + (long long)orow * rows;
            int m = (int)(((unsigned long long)row / sizeof(float)) % 8);
            int oc = blockIdx.y * T + tx - m;                 // column of out = row of in
            if (oc >= 0 && oc < rows) {
                row[oc] = tile[tx - m + 8][j];                // tile row oc - r0
            }
        }
    }
}
