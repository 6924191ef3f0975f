"""How fast the CPU backend (kernels.cpu) runs the course's kinds of kernels, against numba's simulator.

The CPU backend compiles CUDA C with the system's C++ compiler and runs a grid on one core; numba's
CUDA simulator (NUMBA_ENABLE_CUDASIM=1) interprets a Python twin of the kernel with one Python
thread per CUDA thread. Both give CUDA's results without a GPU; this script measures what each
costs. Kernels (the course's from kernels/cuda/, the two that only measure the backend from
bench_cpu_backend.cu beside this script):

  tree reduction     2^20 floats, 256 threads per block, one element per thread, a shared-memory
                     tree with __syncthreads() (reduce/tree.cu's reduce_sequential)
  shuffle reduction  the same sum with two elements per thread, __shfl_down_sync inside each warp
                     and one __syncthreads() (reduce/tree.cu's reduce_shuffle)
  tiled SGEMM        C = A B, 256 x 256 x 256, 16 x 16 tiles staged in shared memory
                     (gemm/smem_tiled.cu's gemm_smem<16>)
  vector add         2^22 floats, no barriers (gpu_architecture/vector_add.cu)
  ... with a barrier the same with one __syncthreads(): a kernel without barriers should not pay
                     for them, so the first of the two rows must be far below the second
  empty launch       one thread that does nothing: the cost of a launch (fork, wait, checks)

Every result is checked against NumPy before it is timed. Times are wall-clock seconds, the best of
several runs, on this machine's CPU: they say nothing about any GPU. The numba simulator is far
slower, so it runs a smaller size and its time is scaled linearly to the full size (marked "~").

Run from the repository root (no GPU needed):

    PYTHONPATH=. python benchmarks/bench_cpu_backend.py            # about a minute
    PYTHONPATH=. python benchmarks/bench_cpu_backend.py --quick    # small sizes, a smoke test
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH_SOURCE = os.path.join(HERE, "bench_cpu_backend.cu")  # the kernels only this benchmark runs

NUMBA_TWINS = textwrap.dedent('''
    import sys, time
    import numpy as np
    from numba import cuda, float32

    BLOCK = 256

    @cuda.jit
    def tree_sum(x, partial, n):
        buf = cuda.shared.array(256, float32)
        t = cuda.threadIdx.x
        i = cuda.blockIdx.x * cuda.blockDim.x + t
        buf[t] = x[i] if i < n else 0.0
        cuda.syncthreads()
        s = cuda.blockDim.x // 2
        while s > 0:
            if t < s:
                buf[t] += buf[t + s]
            cuda.syncthreads()
            s //= 2
        if t == 0:
            partial[cuda.blockIdx.x] = buf[0]

    @cuda.jit
    def shuffle_sum(x, partial, n):
        totals = cuda.shared.array(32, float32)
        lane = cuda.threadIdx.x % 32
        warp = cuda.threadIdx.x // 32
        i = cuda.blockIdx.x * (2 * cuda.blockDim.x) + cuda.threadIdx.x
        v = x[i] if i < n else float32(0.0)
        if i + cuda.blockDim.x < n:
            v += x[i + cuda.blockDim.x]
        d = 16
        while d > 0:
            v += cuda.shfl_down_sync(0xffffffff, v, d)
            d //= 2
        if lane == 0:
            totals[warp] = v
        cuda.syncthreads()
        if warp == 0:
            v = totals[lane] if lane < cuda.blockDim.x // 32 else float32(0.0)
            d = 16
            while d > 0:
                v += cuda.shfl_down_sync(0xffffffff, v, d)
                d //= 2
            if lane == 0:
                partial[cuda.blockIdx.x] = v

    name, n = sys.argv[1], int(sys.argv[2])
    kernel = {"tree": tree_sum, "shuffle": shuffle_sum}[name]
    x = np.random.default_rng(0).random(n, dtype=np.float32)
    per_block = BLOCK if name == "tree" else 2 * BLOCK  # the shuffle kernel adds two elements while loading
    grid = (n + per_block - 1) // per_block
    partial = np.zeros(grid, np.float32)
    start = time.perf_counter()
    kernel[grid, BLOCK](x, partial, n)
    elapsed = time.perf_counter() - start
    assert abs(partial.astype(np.float64).sum() - x.astype(np.float64).sum()) < 1e-3 * n
    print(elapsed)
''')


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def numba_time(name: str, n: int, timeout: float) -> tuple[float | None, str]:
    """(seconds the numba CUDA simulator takes for the twin kernel at size n, or None; why not)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    try:
        done = subprocess.run([sys.executable, "-c", NUMBA_TWINS, name, str(n)], capture_output=True, text=True,
                              env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"over {timeout:g} s at 2^{n.bit_length() - 1}"
    if done.returncode != 0:
        last = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed"
        if "shfl_down_sync" in last:
            return None, "the simulator has no shfl_down_sync"
        return None, last[:60]
    return float(done.stdout.strip().splitlines()[-1]), ""


def cpu_description() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores (the CPU backend uses one per launch)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, no numba simulator (a smoke test)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (the best is reported)")
    args = parser.parse_args()

    from kernels.cpu import RawModule, xp
    from kernels.cpu.toolchain import compiler, supported_platform
    from kernels.sources import include_options, resolve

    problem = supported_platform()
    if problem:
        print(f"bench_cpu_backend: {problem}", file=sys.stderr)
        return 1
    quick = args.quick
    repeat = 1 if quick else max(1, args.repeat)
    n_reduce = 2**14 if quick else 2**20
    size = 64 if quick else 256
    n_add = 2**16 if quick else 2**22

    start = time.perf_counter()
    module = RawModule(path=BENCH_SOURCE)
    tree = RawModule(path=str(resolve("reduce/tree.cu")))
    gemm = RawModule(path=str(resolve("gemm/smem_tiled.cu")), options=include_options(),
                     name_expressions=["gemm_smem<16>"])
    vector_add = RawModule(path=str(resolve("gpu_architecture/vector_add.cu")))
    compile_s = time.perf_counter() - start
    rows = []

    rng = np.random.default_rng(0)
    host = rng.random(n_reduce, dtype=np.float32)
    x = xp.asarray(host)
    block = 256
    for label, name in (("tree reduction", "reduce_sequential"), ("shuffle reduction", "reduce_shuffle")):
        kernel = tree.get_function(name)
        one_per_thread = name == "reduce_sequential"  # reduce_shuffle adds two elements while loading
        grid = n_reduce // (block if one_per_thread else 2 * block)
        partial = xp.zeros(grid, np.float32)
        shared = 4 * block if one_per_thread else 0

        def run(kernel=kernel, grid=grid, partial=partial, shared=shared):
            kernel((grid,), (block,), (x, partial, n_reduce), shared_mem=shared)
        run()
        got = float(partial.get().astype(np.float64).sum())
        assert abs(got - host.astype(np.float64).sum()) < 1e-6 * n_reduce, (label, got)
        cpu_s = best_of(run, repeat)
        sim, note = None, "not run (--quick)"
        if not quick:
            small = 2**11
            t, note = numba_time("tree" if one_per_thread else "shuffle", small, timeout=600)
            sim = None if t is None else t * n_reduce / small
        rows.append((label, f"2^{n_reduce.bit_length() - 1} floats, 256 thr/block", cpu_s, sim, 2.0, note))

    a = rng.random((size, size), dtype=np.float32)
    b = rng.random((size, size), dtype=np.float32)
    A, B, C = xp.asarray(a), xp.asarray(b), xp.zeros((size, size), np.float32)
    sgemm = gemm.get_function("gemm_smem<16>")
    alpha, beta = np.float32(1.0), np.float32(0.0)  # C = A B

    def run_sgemm():
        sgemm((size // 16, size // 16), (16, 16), (A, B, C, size, size, size, alpha, beta))
    run_sgemm()
    np.testing.assert_allclose(C.get(), a.astype(np.float64) @ b, rtol=1e-4)
    rows.append(("tiled SGEMM", f"{size}x{size}x{size}, 16x16 tiles", best_of(run_sgemm, repeat), None, 5.0, ""))

    p, q, out = xp.ones(n_add, np.float32), xp.full(n_add, 2.0, np.float32), xp.zeros(n_add, np.float32)
    def time_add(kernel) -> float:
        out[:] = 0
        kernel((n_add // 256,), (256,), (p, q, out, n_add))
        assert bool((out == 3).all())
        return best_of(lambda: kernel((n_add // 256,), (256,), (p, q, out, n_add)), repeat)

    plain_s = time_add(vector_add.get_function("vector_add"))
    barrier_s = time_add(module.get_function("vector_add_with_barrier"))
    added = f"2^{n_add.bit_length() - 1} floats"
    rows.append(("vector add (no barriers)", added, plain_s, None, None, ""))
    rows.append(("... with one __syncthreads", added, barrier_s, None, None,
                 f"{barrier_s / plain_s:.1f}x the time without it"))

    empty = module.get_function("nothing")
    launches = [best_of(lambda: empty((1,), (1,), ()), 1) for _ in range(10 if quick else 50)]
    rows.append(("empty launch (overhead)", "1 thread, median", statistics.median(launches), None, None, ""))

    print(f"CPU backend benchmark on {cpu_description()}; compiler {compiler().version}")
    print(f"compile time of the four modules (cached after the first run): {compile_s:.2f} s")
    print("Wall-clock seconds, best of {} run(s); '~' = numba simulator at 2^11 elements, scaled linearly.".format(
        repeat))
    print("These are CPU timings: they say nothing about how fast the kernels run on a GPU.\n")
    header = (f"{'kernel':26s} {'size':32s} {'CPU backend':>12s} {'budget':>7s} {'numba sim':>11s} "
              f"{'sim/CPU':>8s}  note")
    print(header)
    print("-" * (len(header) + 30))
    for label, shape, cpu_s, sim, budget, note in rows:
        cpu_text = f"{cpu_s * 1e3:.2f} ms" if cpu_s < 0.1 else f"{cpu_s:.3f} s"
        budget_text = f"{budget:g} s" if budget else "-"
        sim_text = f"~{sim:.0f} s" if sim is not None else "-"
        ratio = f"{sim / cpu_s:.0f}x" if sim is not None else "-"
        print(f"{label:26s} {shape:32s} {cpu_text:>12s} {budget_text:>7s} {sim_text:>11s} {ratio:>8s}  {note}")
    slow = [row[0] for row in rows if row[4] and row[2] > row[4] and not quick]
    if slow:
        print(f"\nover budget: {', '.join(slow)}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
