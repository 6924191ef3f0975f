"""The "Coalescing" chapter's kernels, on every backend (fixture ``k``, see conftest.py).

Every kernel is checked with kernels.check against a float64 NumPy reference on fresh random inputs,
with sizes that are not multiples of the block or tile (1 and primes among them) and NaN-poisoned
outputs.
"""
from __future__ import annotations

import re

import numpy as np
import pytest
from kernel_backends import gpu_only

from kernels.sources import name_expressions_in, source

BLOCK = 256
PER_THREAD = 4
SIZES = [1, 31, 257, 1009, 100_003]
SHAPES = [(1, 1), (1, 97), (97, 1), (31, 33), *gpu_only((1000, 777)), (33, 4097), (4097, 33), (64, 64)]
# Every instantiation the chapter launches (its tile sweep included): the name_expressions line of
# transpose.cu, which the compile tests also read, so a new one cannot be left unchecked.
TILED = [tuple(int(v) for v in re.findall(r"-?\d+", expr))
         for expr in name_expressions_in(source("coalescing/transpose.cu")) if expr.startswith("transpose_tiled<")]
# transpose_stores.cu (benchmarks/bench_transpose.py): every instantiation its name_expressions line
# lists, as (name, template arguments). Its kernels compute each output row's misalignment from the
# row's address, so the shapes add numbers of rows that are not multiples of 8 (every misalignment
# 0..7 occurs for 7 rows) and fewer than 8.
STORES = [(expr.split("<")[0], tuple(int(v) for v in re.findall(r"-?\d+", expr.split("<", 1)[1])))
          for expr in name_expressions_in(source("coalescing/transpose_stores.cu"))]
STORE_SHAPES = [*SHAPES, (9, 5), (7, 300), (300, 7), (2, 3), (61, 19)]
# (kernel, (T, S, R)): transpose_aligned_strip and its 16-byte twin transpose_aligned_strip_vec4
STRIPS = [(name, args) for name, args in STORES if name.startswith("transpose_aligned_strip")]


def strip_shapes(strip):
    """STORE_SHAPES and numbers of rows around the strip height S, for S = 256 (the chapter's choice)
    and for this strip's S: just above S (the last block row holds 1..7 input rows, and its shifted
    windows start in the rows before, its halo) and just below S (one block row holds every input
    row; the extra block row of the grid writes the last columns of the misaligned output rows)."""
    T, S, R = strip[1]
    # cols % 4 == 0 (40, 36, 300) takes the 16-byte loads of transpose_aligned_strip_vec4
    extra = [(257, 5), (263, 33), (250, 40), (S + 1, 5), (S + 7, 33), (S - 6, 40), (2 * S + 3, 9), (61, 36)]
    return [*STORE_SHAPES, *(shape for shape in dict.fromkeys(extra) if shape not in STORE_SHAPES)]


def strip_cases():
    """(strip, shape) for every strip instantiation and each of its shapes (gpu_only marks kept)."""
    cases = []
    for strip in STRIPS:
        for shape in strip_shapes(strip):
            if hasattr(shape, "marks"):    # a gpu_only(...) parameter
                cases.append(pytest.param(strip, *shape.values, marks=shape.marks,
                                          id=f"{strip[0]}{strip[1]}-{shape.values[0]}"))
            else:
                cases.append(pytest.param(strip, shape, id=f"{strip[0]}{strip[1]}-{shape}"))
    return cases


def grid_for(k, n):
    return k.ceil_div(n, BLOCK * PER_THREAD)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("stride", [1, 2, 3, 8, 32])
def test_copy_strided(k, n, stride):
    kernel = k.load_kernel("coalescing/access_patterns.cu", "copy_strided")
    report = k.check(lambda x, y, n, s: kernel(grid_for(k, n), BLOCK, (x, y, n, s)),
                     lambda x, n, s: x[::s][:n],
                     inputs={"x": k.rand((n - 1) * stride + 1), "n": n, "s": stride},
                     outputs={"y": (n, np.float32)}, tol=0)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("offset", [0, 1, 7, 8, 31, 32])
def test_copy_offset(k, n, offset):
    kernel = k.load_kernel("coalescing/access_patterns.cu", "copy_offset")
    report = k.check(lambda x, y, n, o: kernel(grid_for(k, n), BLOCK, (x, y, n, o)),
                     lambda x, n, o: x[o:o + n],
                     inputs={"x": k.rand(n + offset), "n": n, "o": offset},
                     outputs={"y": (n, np.float32)}, tol=0)
    assert report, str(report)


@pytest.mark.parametrize("n", SIZES)
def test_aos_and_soa(k, n):
    aos = k.load_kernel("coalescing/aos_soa.cu", "scale_x_aos")
    soa = k.load_kernel("coalescing/aos_soa.cu", "scale_x_soa")
    r1 = k.check(lambda p, out: aos(grid_for(k, n), BLOCK, (p, out, n)), lambda p: 2 * p[:, 0],
                 inputs={"p": k.rand((n, 4))}, outputs={"out": (n, np.float32)}, tol=0)
    r2 = k.check(lambda xs, out: soa(grid_for(k, n), BLOCK, (xs, out, n)), lambda xs: 2 * xs,
                 inputs={"xs": k.rand(n)}, outputs={"out": (n, np.float32)}, tol=0)
    assert r1, str(r1)
    assert r2, str(r2)


@pytest.mark.parametrize("name", ["matmul_naive", "matmul_swapped"])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (1, 37, 5), (31, 1, 17), (67, 131, 29), *gpu_only((300, 333, 129))])
def test_matmul(k, name, mnk):
    M, N, K = mnk
    kernel = k.load_kernel("coalescing/matmul_naive.cu", name)
    block = (32, 8)

    def launch(A, B, M, N, K, C):
        if name == "matmul_naive":
            grid = (k.ceil_div(N, 32), k.ceil_div(M, 8))
        else:
            grid = (k.ceil_div(M, 32), k.ceil_div(N, 8))
        kernel(grid, block, (A, B, C, M, N, K))

    report = k.check(launch, lambda A, B, M, N, K: A @ B,
                     inputs={"A": k.rand((M, K)), "B": k.rand((K, N)), "M": M, "N": N, "K": K},
                     outputs={"C": ((M, N), np.float32)}, tol=1e-5)
    assert report, str(report)


def _launch_tiles(k, kernel, a, out, tile, rows_per_pass):
    rows, cols = a.shape
    kernel((k.ceil_div(cols, tile), k.ceil_div(rows, tile)), (tile, rows_per_pass), (a, out, rows, cols))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("block", [(32, 8), (16, 4), (64, 16)])
def test_copy_tiled_and_naive_transpose(k, shape, block):
    copy = k.load_kernel("coalescing/transpose.cu", "copy_tiled")
    naive = k.load_kernel("coalescing/transpose.cu", "transpose_naive")
    rows, cols = shape
    r1 = k.check(lambda a, out: _launch_tiles(k, copy, a, out, *block), lambda a: a,
                 inputs={"a": k.rand(shape)}, outputs={"out": (shape, np.float32)}, tol=0)
    r2 = k.check(lambda a, out: _launch_tiles(k, naive, a, out, *block), lambda a: a.T,
                 inputs={"a": k.rand(shape)}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert r1, str(r1)
    assert r2, str(r2)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("tile, rows_per_pass, pad", TILED)
def test_transpose_tiled(k, shape, tile, rows_per_pass, pad):
    kernel = k.load_kernel("coalescing/transpose.cu", f"transpose_tiled<{tile}, {rows_per_pass}, {pad}>")
    rows, cols = shape
    report = k.check(lambda a, out: _launch_tiles(k, kernel, a, out, tile, rows_per_pass), lambda a: a.T,
                     inputs={"a": k.rand(shape)}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert report, str(report)


def _launch_strip(k, kernel, strip, a, out, grid_rows, strips_along_x=0):
    """Launch with ceil(grid_rows / S) strips, in either grid order (the kernel's last argument)."""
    T, S, R = strip[1]
    rows, cols = a.shape
    strips, column_blocks = k.ceil_div(grid_rows, S), k.ceil_div(cols, T)
    grid = (strips, column_blocks) if strips_along_x else (column_blocks, strips)
    kernel(grid, (T, R), (a, out, rows, cols, strips_along_x))


@pytest.mark.parametrize("strips_along_x", [0, 1])
@pytest.mark.parametrize("strip, shape", strip_cases())
def test_transpose_aligned_strip(k, strip, shape, strips_along_x):
    """Tall strips with each output row's window shifted to whole sectors; one more strip in the grid,
    which may be laid out either way round."""
    name, (T, S, R) = strip
    kernel = k.load_kernel("coalescing/transpose_stores.cu", f"{name}<{T}, {S}, {R}>")
    rows, cols = shape
    report = k.check(lambda a, out: _launch_strip(k, kernel, strip, a, out, rows + 7, strips_along_x),
                     lambda a: a.T, inputs={"a": k.rand(shape)}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert report, str(report)


@pytest.mark.parametrize("shape", [(61, 36), (9, 300), *gpu_only((1000, 776))])
def test_vec4_strip_reads_an_unaligned_input_one_float_at_a_time(k, shape):
    """cols % 4 == 0, but the input starts 4 bytes past a 16-byte boundary (a view one float into a
    buffer): the float4 loads would be misaligned, so the kernel must take its one-float path."""
    from kernels.chapters.coalescing import strip_launch

    kernel = k.load_kernel("coalescing/transpose_stores.cu", "transpose_aligned_strip_vec4<32, 128, 16>")
    rows, cols = shape
    xp = k.xp
    values = np.random.default_rng(7).random(rows * cols + 1, dtype=np.float32)
    a = xp.asarray(values)[1:].reshape(rows, cols)
    out = xp.full((cols, rows), np.nan, dtype=np.float32)
    launch = strip_launch(rows, cols, 32, 128, 16)
    kernel(launch.grid, launch.block, (a, out, rows, cols, launch.strips_along_x))
    np.testing.assert_array_equal(xp.asnumpy(out), values[1:].reshape(rows, cols).T)


@pytest.mark.parametrize("shape", [(1, 1), (300, 7), (7, 300), (1000, 777), (263, 4097), (4097, 33)])
def test_strip_launch_drives_the_kernel(k, shape):
    """kernels.chapters.coalescing.strip_launch's grid and order, as the chapter and the benchmark launch it."""
    from kernels.chapters.coalescing import strip_launch

    kernel = k.load_kernel("coalescing/transpose_stores.cu", "transpose_aligned_strip<32, 256, 16>")
    rows, cols = shape
    launch = strip_launch(rows, cols)
    report = k.check(lambda a, out: kernel(launch.grid, launch.block, (a, out, rows, cols, launch.strips_along_x)),
                     lambda a: a.T, inputs={"a": k.rand(shape)}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert report, str(report)


@pytest.mark.parametrize("strip", STRIPS)
def test_aligned_strip_needs_the_extra_block_row(k, strip):
    """With the ordinary grid ceil(rows / S) the last columns of some output rows are never written.

    rows = S - 1 is odd, so the first 8 output rows (cols = 8) start at every misalignment m = 0..7;
    one strip then covers output columns -m .. S - 1 - m, which misses column S - 2 when m >= 2.
    The grid ceil((rows + 7) / S) adds the block row that writes them.
    """
    name, (T, S, R) = strip
    kernel = k.load_kernel("coalescing/transpose_stores.cu", f"{name}<{T}, {S}, {R}>")
    shape = rows, cols = S - 1, 8
    assert k.ceil_div(rows, S) < k.ceil_div(rows + 7, S)
    short = k.check(lambda a, out: _launch_strip(k, kernel, strip, a, out, rows), lambda a: a.T,
                    inputs={"a": k.rand(shape)}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert not short, "the ordinary grid wrote every element"
    assert short.outputs[0].unwritten > 0 and short.outputs[0].mismatched == short.outputs[0].unwritten, str(short)
    full = k.check(lambda a, out: _launch_strip(k, kernel, strip, a, out, rows + 7), lambda a: a.T,
                   inputs={"a": k.rand(shape)}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert full, str(full)


@pytest.mark.parametrize("shape", STORE_SHAPES)
@pytest.mark.parametrize("tile, rows_per_pass", [args for name, args in STORES if name == "transpose_store_pattern"])
def test_transpose_store_pattern(k, shape, tile, rows_per_pass):
    """transpose_tiled's stores with nothing read: every element of out is written, with 1."""
    kernel = k.load_kernel("coalescing/transpose_stores.cu", f"transpose_store_pattern<{tile}, {rows_per_pass}>")
    rows, cols = shape

    def launch(rows, cols, out):
        kernel((k.ceil_div(cols, tile), k.ceil_div(rows, tile)), (tile, rows_per_pass), (out, rows, cols))

    report = k.check(launch, lambda rows, cols: np.ones((cols, rows)),
                     inputs={"rows": rows, "cols": cols}, outputs={"out": ((cols, rows), np.float32)}, tol=0)
    assert report, str(report)


def test_every_transpose_stores_kernel_is_checked():
    """Every kernel of transpose_stores.cu is tested above, with every instantiation its name_expressions line lists."""
    assert sorted({name for name, _ in STORES}) == ["transpose_aligned_strip", "transpose_aligned_strip_vec4",
                                                     "transpose_store_pattern"]
    assert ("transpose_aligned_strip", (32, 256, 16)) in STRIPS
    assert ("transpose_aligned_strip_vec4", (32, 128, 16)) in STRIPS
    for _, (T, S, R) in STRIPS:   # the launch rules the tests (and the benchmark) rely on
        assert T % 32 == 0 and S % 32 == 0 and T * R % 32 == 0 and T * R <= 1024, (T, S, R)


@pytest.mark.parametrize("kind", ["thread", "warp"])
@pytest.mark.parametrize("shape", [(1, 1), (1, 5003), *gpu_only((1001, 257)), (37, 31), (4099, 33), (7, 97)])
def test_gemv(k, kind, shape):
    M, N = shape
    name = "gemv_thread_per_row" if kind == "thread" else "gemv_warp_per_row"
    kernel = k.load_kernel("coalescing/gemv.cu", name)
    threads = M if kind == "thread" else 32 * M
    # Non-negative inputs: a dot product of signed values can cancel to nearly zero (one row of
    # 5003 terms did, for about one seed in twelve), and its relative error is then unbounded.
    # Without cancellation float32 summation of N terms is within N * 2^-24 of the exact sum.
    report = k.check(lambda A, x, y: kernel(k.ceil_div(threads, BLOCK), BLOCK, (A, x, y, M, N)),
                     lambda A, x: A @ x, inputs={"A": k.rand((M, N), low=0.0), "x": k.rand(N, low=0.0)},
                     outputs={"y": (M, np.float32)}, tol=max(1e-5, N * 2.0**-24))
    assert report, str(report)


def test_tile_of_64_by_64_threads_is_refused(k):
    """The chapter's sweep records this launch as an error: 4096 threads exceed the block limit."""
    cp = k.xp
    kernel = k.load_kernel("coalescing/transpose.cu", "transpose_tiled<64, 64, 1>")
    a = cp.zeros((64, 64), dtype=cp.float32)
    with pytest.raises(Exception):
        _launch_tiles(k, kernel, a, cp.empty_like(a), 64, 64)
        cp.cuda.Device().synchronize()


def _add_one_reference(pattern):
    def reference(a0, n, step):
        a = a0.copy()
        if pattern == "offset":
            a[step:step + n] += 1.0
        else:
            a[::step][:n] += 1.0
        return a
    return reference


@pytest.mark.parametrize("pattern", ["offset", "strided"])
@pytest.mark.parametrize("n, step", [(1, 1), (31, 2), (1009, 7), (1009, 8), (4099, 32), (33, 33)])
@pytest.mark.parametrize("grid", [1, None])   # one block striding over everything, or one element per thread
def test_read_modify_write(k, pattern, n, step, grid):
    """a[i + s] += 1 or a[i * s] += 1 for i < n; every other element of a is left as it was."""
    kernel = k.load_kernel("coalescing/read_modify_write.cu", f"add_one_{pattern}")
    size = n + step if pattern == "offset" else (n - 1) * step + 1
    blocks = grid or k.ceil_div(n, 256)

    def launch(a0, n, step, a):
        a[...] = a0              # in place: start from the input, then let the kernel change it
        kernel((blocks,), (256,), (a, n, step))

    # tol 1e-6: a[i] + 1 rounds to float32 in the kernel, not in the float64 reference; an element
    # incremented twice, or not at all, is off by about 1 and fails.
    report = k.check(launch, _add_one_reference(pattern), inputs={"a0": k.rand(size), "n": n, "step": step},
                     outputs={"a": (size, np.float32)}, tol=1e-6)
    assert report, str(report)


def test_read_modify_write_offset_zero(k):
    kernel = k.load_kernel("coalescing/read_modify_write.cu", "add_one_offset")

    def launch(a0, n, a):
        a[...] = a0
        kernel((3,), (64,), (a, n, 0))

    report = k.check(launch, lambda a0, n: a0 + 1.0, inputs={"a0": k.rand(1000), "n": 1000},
                     outputs={"a": (1000, np.float32)}, tol=1e-6)
    assert report, str(report)
