// Where the tiled transpose loses bandwidth when the input's number of rows is not a multiple of 8,
// and a kernel that gets it back. out (cols x rows) = in (rows x cols)^T, both row-major fp32;
// benchmarks/bench_transpose.py runs these kernels beside transpose_tiled from transpose.cu and a
// flat device copy. Numbers below come from its recorded table,
// benchmarks/results/bench_transpose_h100.txt (an H100 80GB HBM3 with ECC enabled, 2026-11-27),
// unless they are labelled as from exploratory runs or from an earlier table in git history;
// percentages are of the flat copy's bandwidth at the same shape.
//
// An output row is `rows` floats long. When rows % 8 != 0, output row orow starts at float
// orow * rows, part-way into a 32-byte sector (8 floats), and its misalignment m = (row address /
// 4) % 8 changes from row to row. In every row with m != 0, a warp of transpose_tiled<32, R, 1>
// stores its 32 floats (128 bytes) into 5 sectors instead of 4, two of them only partly written.
// The padded transpose_tiled<32, 8, 1> reached 90.5 % at 8192 x 8192 but 60.9 % at 8191 x 8193,
// 60.5 % at 8193 x 8192, 72.4 % at 8196 x 8196 and 70.8 % at 4097 x 4095; transpose_tiled<64, 8, 1>
// 94.9 % at 8192 x 8192 and 70.3 % at 8191 x 8193. (A number of columns that is not a multiple of 8
// misaligns the loads instead, and cost little: 8192 x 8193 ran at 90.4 %.)
//
// transpose_store_pattern<T, R>    transpose_tiled's phase 2 with nothing read: the same stores,
//                                  with the same bounds guards, write 1.0f. It wrote 2846 to 2991
//                                  GB/s at the shapes with rows % 8 == 0 except 1000 x 50000
//                                  (2696), 1795 GB/s at 8196 x 8196 (rows % 8 == 4) and 1339 to
//                                  1351 GB/s where rows is odd: the loss is in the stores. Grid
//                                  (ceil(cols / T), ceil(rows / T)), block (T, R).
// transpose_aligned_strip<T, S, R> the fix: a tall strip per block, with aligned stores. A block of
//                                  (T, R) threads owns T input columns (its column block) and S
//                                  input rows (its strip; S and T multiples of 32). Phase 1 loads
//                                  input rows strip * S - 8 .. strip * S + S - 1 into
//                                  tile[S + 8][T + 1]: 8 halo rows above the block's S rows (rows
//                                  outside the input are not loaded). Phase 2: each warp writes one
//                                  output row at a time, the S-float window starting at column
//                                  strip * S - m, m that row's misalignment, so that every warp
//                                  store covers whole 32-byte sectors. In one output row the
//                                  windows of consecutive strips are consecutive: every element is
//                                  written exactly once, and no sector is written partly by two
//                                  blocks. Windows shift left by up to 7, so the last columns of a
//                                  row may need one more strip: ceil((rows + 7) / S) strips,
//                                  ceil(cols / T) column blocks, block (T, R). strips_along_x = 0:
//                                  grid (column blocks, strips); strips_along_x = 1: grid (strips,
//                                  column blocks). Both are correct;
//                                  kernels.coalescing.strip_launch picks one (see below).
//
// Why a tall strip: an earlier attempt shifted the windows the same way with a square T x T tile
// and the same 8-row halo, so every block read 8 extra input rows per T (25 % more for T = 32,
// against 3 % for S = 256); it reached 79 to 89 % of the copy at every shape, which cost the
// aligned shapes more than it gained (the first table recorded by benchmarks/bench_transpose.py, in
// git history). In exploratory runs a tall strip without the shift (S = 256, R = 16) got 84 to 92 %
// at misaligned shapes: partial sectors remain at the strip boundaries.
// transpose_aligned_strip<32, 256, 16> is the chapter's choice: 512 threads, (256 + 8) x 33 x 4 =
// 34848 bytes of static shared memory, under the 48 KB static limit, so it also runs on a T4. In
// exploratory runs made before the grid order was chosen per shape, <32, 256, 32> (1024 threads, 2
// blocks per SM) ran at only 62 to 77 % and <32, 256, 8> at 82 to 89 %; <32, 128, 8> ran at 83.6 to
// 91.5 % in the table recorded then (git history), with column blocks along x at every shape. In
// the current table, with the grid order strip_launch chooses, <32, 128, 8> reached 90.6 to 96.2 %,
// level with <32, 256, 16>'s 90.1 to 96.3 %.
//
// Why the grid order matters: blocks are observed to start roughly in order of their linear index
// (blockIdx.x fastest; CUDA does not promise any order), so the blocks resident at one time are a
// run of consecutive x. With strips along y, that run is one strip of many column blocks: it reads
// whole input rows, but writes only an S-float window (1 KB) of each output row it touches. When
// the input has few rows, output rows are short (rows floats) and those windows are spaced rows * 4
// bytes apart all over the output: at 1024 x 50000 (a 4 KB output row) the strips-along-y order
// reached only 83.8 % of the copy, at 1000 x 50000 88.4 %. With strips along x the run is all
// strips of fewer column blocks: each column block writes its T output rows completely, so the
// stores are contiguous, and at those two shapes the kernel reached 92.7 and 93.7 %. When the input
// has many rows and few columns (50000 x 1000) strips along x read a T-column slice of rows spaced
// cols * 4 bytes apart, and reached 88.0 %, against 92.3 % with column blocks along x. strip_launch
// therefore puts along x whichever of the two counts is smaller: strips when there are fewer strips
// than column blocks, column blocks otherwise. The rule is a heuristic: at some shapes the other
// order is a little faster, by up to 2.5 points (8192 x 8193: 92.6 against 90.1 %; 16384 x 4096:
// 94.4 against 92.6 %), both above 90 %. (All from the table recorded by
// benchmarks/bench_transpose.py, which times <32, 256, 16> in both orders:
// benchmarks/results/bench_transpose_h100.txt.)
//
// The tile's pitch is T + 1 floats (as transpose_tiled<T, R, 1>): a warp reading a column of it
// (32 consecutive rows) touches 32 different banks. Each element is stored to shared memory on its
// own.
//
// transpose_aligned_strip_vec4<T, S, R> is the same kernel (blocks, grid, halo, shifted windows)
// tuned for a GPU whose DRAM outpaces its SMs' instruction issue, such as the H200 (the H100's SMs
// and clocks, 43 % more DRAM bandwidth by the datasheets). On an H200 Nsight Compute put
// transpose_aligned_strip<32, 128, 8> at 8192 x 8192 at 71 % of the SMs' peak throughput beside 72 %
// of DRAM's (benchmarks/results/ncu_ladder_tops_h200.txt): the instructions, not DRAM alone, set the
// pace. Three changes, each measured on an H200 in exploratory runs (a copy of the same bytes timed
// in the same run; 8192 x 8192, 1000 x 50000, 8196 x 8196):
//   - 16 bytes per load and store: phase 1 loads each input row's T floats as T / 4 float4 (when
//     cols % 4 == 0 and the input is 16-byte aligned; otherwise one float at a time, as above),
//     phase 2 stores each window as float4 (a window starts on a 32-byte sector, so each of its float4
//     is 16-byte aligned; a float4 that would cross the row's first or last column is stored one
//     float at a time). A quarter of the global instructions: from 83.5-87.1 % of the copy to
//     90.1-92.3 % at <32, 256, 16> in one run (88.9 to 92.3 % over three). Reading the 4
//     consecutive tile rows of one float4 costs 4-way bank conflicts (at pitch T + 1, rows 4 apart
//     share a bank); the instructions saved are worth more, and a tile stored transposed and
//     XOR-swizzled to avoid them was 1 to 3 points slower.
//   - every load of phase 1 issued before the first is stored: each thread keeps its
//     ceil((S + 8) / rows per pass) values in registers (unrolled, guarded), instead of a loop that
//     waits for each load before issuing the next. More bytes in flight per SM.
//   - __launch_bounds__(T * R, 2048 / (T * R)): the register budget that keeps 2048 threads per SM
//     resident (32 registers). With the batched loads and no bound the compiler used 40 to 56 and
//     fewer blocks fit: <32, 128, 16> at 3 blocks per SM ran about 4 points slower than at 4.
// In the table recorded on the H200 by benchmarks/bench_ladder_tops.py --candidates
// (benchmarks/results/ladder_tops_h200.txt, L2 flushed and back to back)
// transpose_aligned_strip_vec4<32, 128, 16> (512 threads, 3 passes of 64 rows) reached 92.5 to 95.5 %
// at the three shapes and <32, 64, 8> 91.1 to 95.0 %, where transpose_aligned_strip<32, 256, 16>
// reached 85.1 to 87.5 %. <32, 256, 16> and <32, 128, 8> do not fit 32 registers with their 5
// passes (they spill).
// Where cols % 4 != 0 it loads 4 bytes at a time. In benchmarks/results/bench_transpose_h200.txt
// (twelve shapes, L2 flushed) <32, 128, 16> reached 90.2 to 94.5 % at ten, 4097 x 4095 among them
// (91.0 % of a copy that is itself slow there), but 83.3 % at 8192 x 8193 and 85.2 % at
// 8191 x 8193, no better than transpose_aligned_strip<32, 128, 8> (84.4 and 86.2 %). Also tried:
// loading only the halo rows the block's windows need (none when rows % 8 == 0): about level where
// the loads are 16 bytes, and slower with scalar loads (more registers).
//
// name_expressions: transpose_store_pattern<32, 8>, transpose_store_pattern<64, 8>
// name_expressions: transpose_aligned_strip<32, 256, 16>, transpose_aligned_strip<32, 128, 8>
// name_expressions: transpose_aligned_strip_vec4<32, 128, 16>, transpose_aligned_strip_vec4<32, 64, 8>

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

template <int T, int S, int R>
__global__ void transpose_aligned_strip(const float* __restrict__ in, float* __restrict__ out, int rows, int cols,
                                        int strips_along_x)
{
    constexpr int H = 8;                                   // floats per 32-byte sector
    __shared__ float tile[S + H][T + 1];
    const int col_block = strips_along_x ? blockIdx.y : blockIdx.x;
    const int strip = strips_along_x ? blockIdx.x : blockIdx.y;
    const int c = col_block * T + threadIdx.x;
    const int r0 = strip * S - H;                          // first input row held: H rows of halo
    for (int k = threadIdx.y; k < S + H; k += R) {
        const int r = r0 + k;
        if (r >= 0 && r < rows && c < cols) tile[k][threadIdx.x] = in[(long long)r * cols + c];
    }
    __syncthreads();
    const int lane = threadIdx.x % 32, warp = (threadIdx.y * T + threadIdx.x) / 32;
    constexpr int WARPS = T * R / 32;
    for (int j = warp; j < T; j += WARPS) {                // one output row per warp at a time
        const int orow = col_block * T + j;
        if (orow >= cols) break;
        float* row = out + (long long)orow * rows;
        const int m = (int)(((unsigned long long)row / sizeof(float)) % H);   // floats past a sector start
        const int base = strip * S - m;                    // this block's window, shifted to whole sectors
        for (int i = lane; i < S; i += 32) {
            const int oc = base + i;
            if (oc >= 0 && oc < rows) row[oc] = tile[i - m + H][j];
        }
    }
}

template <int T, int S, int R>
__global__ void __launch_bounds__(T * R, 2048 / (T * R))
transpose_aligned_strip_vec4(const float* __restrict__ in, float* __restrict__ out, int rows, int cols,
                             int strips_along_x)
{
    constexpr int H = 8;                                   // floats per 32-byte sector
    constexpr int PER_ROW = T / 4;                         // float4 per tile row
    constexpr int ROWS_PER_PASS = T * R / PER_ROW;
    constexpr int PASSES = (S + H + ROWS_PER_PASS - 1) / ROWS_PER_PASS;    // float4 loads per thread
    constexpr int SCALAR_PASSES = (S + H + R - 1) / R;                     // float loads per thread
    static_assert(T % 32 == 0 && S % 32 == 0 && (T * R) % PER_ROW == 0, "bad configuration");
    __shared__ float tile[S + H][T + 1];
    const int col_block = strips_along_x ? blockIdx.y : blockIdx.x;
    const int strip = strips_along_x ? blockIdx.x : blockIdx.y;
    const int r0 = strip * S - H;                          // first input row held: H rows of halo
    const int t = threadIdx.y * T + threadIdx.x;
    if (cols % 4 == 0 && ((unsigned long long)in & 15) == 0) {
        const int q = 4 * (t % PER_ROW);                   // this thread's 4 columns of the tile
        const int c = col_block * T + q;                   // cols % 4 == 0: all 4 or none inside
        float4 v[PASSES];                                  // every load issued before the first store
#pragma unroll
        for (int p = 0; p < PASSES; ++p) {
            const int k = t / PER_ROW + p * ROWS_PER_PASS, r = r0 + k;
            if (k < S + H && r >= 0 && r < rows && c < cols)
                v[p] = __ldg(reinterpret_cast<const float4*>(in + (long long)r * cols + c));
        }
#pragma unroll
        for (int p = 0; p < PASSES; ++p) {
            const int k = t / PER_ROW + p * ROWS_PER_PASS, r = r0 + k;
            if (k < S + H && r >= 0 && r < rows && c < cols) {
                tile[k][q] = v[p].x; tile[k][q + 1] = v[p].y; tile[k][q + 2] = v[p].z; tile[k][q + 3] = v[p].w;
            }
        }
    } else {
        const int c = col_block * T + threadIdx.x;
        float v[SCALAR_PASSES];
#pragma unroll
        for (int p = 0; p < SCALAR_PASSES; ++p) {
            const int k = threadIdx.y + p * R, r = r0 + k;
            if (k < S + H && r >= 0 && r < rows && c < cols) v[p] = in[(long long)r * cols + c];
        }
#pragma unroll
        for (int p = 0; p < SCALAR_PASSES; ++p) {
            const int k = threadIdx.y + p * R, r = r0 + k;
            if (k < S + H && r >= 0 && r < rows && c < cols) tile[k][threadIdx.x] = v[p];
        }
    }
    __syncthreads();
    const int lane = t % 32, warp = t / 32;
    constexpr int WARPS = T * R / 32;
    for (int j = warp; j < T; j += WARPS) {                // one output row per warp at a time
        const int orow = col_block * T + j;
        if (orow >= cols) break;
        float* row = out + (long long)orow * rows;
        const int m = (int)(((unsigned long long)row / sizeof(float)) % H);   // floats past a sector start
        const int base = strip * S - m;                    // starts a sector: row + base is 32-byte aligned
#pragma unroll
        for (int i = 4 * lane; i < S; i += 128) {
            const int oc = base + i;
            const int s = i - m + H;
            if (oc >= 0 && oc + 3 < rows) {
                *reinterpret_cast<float4*>(row + oc) = make_float4(tile[s][j], tile[s + 1][j], tile[s + 2][j],
                                                                   tile[s + 3][j]);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (oc + e >= 0 && oc + e < rows) row[oc + e] = tile[s + e][j];
            }
        }
    }
}
