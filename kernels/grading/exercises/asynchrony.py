"""Exercises of the "Asynchrony" chapter: a kernel for a chunked pipeline, and the pipeline's time by hand."""
from __future__ import annotations

import numpy as np

from .. import verdicts as V
from ..cases import random_prime, uniform
from ..pipeline import chunk_bounds, ideal_ms
from ..spec import Case, Exercise, Expected, KernelSpec, LaunchContext, PerfSpec, Question
from . import U32, blocks

SM_BLOCK = 256
PIPE_STREAMS, PIPE_CHUNKS = 4, 16

# --------------------------------------------------------------------------------------------------
# A 3-point smoothing kernel that works on one chunk of a larger array
# --------------------------------------------------------------------------------------------------


def chunk_output(k: int) -> str:
    """The name of chunk ``k``'s output array: every chunk writes into an array of its own."""
    return f"out{k}"


def _smooth_case(rng, n: int, chunks: int, why: str, vis: str) -> Case:
    bounds = chunk_bounds(n, chunks)
    # Each chunk's part of the output is a separate array with guard bands of its own: a kernel that
    # writes past the end of its chunk (into the next chunk's part, which a pipeline may be copying
    # or about to overwrite) then changes a guard band, even though the serial check would overwrite
    # the stray value with the right one.
    outputs = {chunk_output(k): ((hi - lo,), np.float32) for k, (lo, hi) in enumerate(bounds)}
    return Case(f"n = {n:,} in {len(bounds)} chunk{'s' if len(bounds) > 1 else ''}", vis,
                {"inp": uniform(rng, n, -10, 10)}, outputs, {"n": n}, why=why,
                extra={"chunks": bounds}, large=n > 3_000_000)


def _smooth_cases(rng, vis: str) -> list[Case]:
    if vis == "public":
        spec = [(1, 1, "one element: both neighbours are itself"), (2, 1, "two elements"),
                (2, 2, "two chunks of one element"), (3, 3, "three chunks of one element: the middle one has "
                                                           "neighbours on both sides"),
                (257, 1, "one chunk, one element past a block"), (1_000, 1, "one chunk"),
                (1_000, 3, "three chunks: a write past a chunk's end shows"),
                (513, 2, "chunks of 256 and 257 elements: whole blocks, then one element past them"),
                (100_003, 7, "uneven chunks"), (1_000_003, 16, "sixteen chunks"), (8_000_009, 16, "large")]
    else:
        n = random_prime(rng, 1_000, 200_000)
        spec = [(int(rng.integers(3, 40)), int(rng.integers(2, 5)), "tiny chunks"),
                (n, int(rng.integers(2, 30)), "a prime, many chunks"),
                (int(rng.integers(300, 5_000)), int(rng.integers(2, 8)), "chunks that end inside a block"),
                (int(rng.integers(50_000, 500_000)), 1, "one chunk")]
    return [_smooth_case(rng, n, c, why, vis) for n, c, why in spec]


def _smooth_launch(ctx: LaunchContext) -> None:
    n = ctx["n"]
    kernel = ctx.kernel()
    for k, (lo, hi) in enumerate(ctx.case.extra["chunks"]):
        kernel((blocks(hi - lo, SM_BLOCK),), (SM_BLOCK,),
               (ctx["inp"][lo:hi], ctx[chunk_output(k)], hi - lo, lo, n))


def smooth_expected(x: np.ndarray) -> Expected:
    """The whole array's 3-point average, ends clamped, with its error bound."""
    x = np.asarray(x).astype(np.float64)
    left = np.concatenate([x[:1], x[:-1]])
    right = np.concatenate([x[1:], x[-1:]])
    return Expected((left + x + right) / 3, atol=6 * U32 * (np.abs(left) + np.abs(x) + np.abs(right)) / 3 + 1e-30)


def _smooth_reference(case: Case) -> dict:
    whole = smooth_expected(case.inputs["inp"])
    return {chunk_output(k): Expected(whole.value[lo:hi], atol=whole.atol[lo:hi])
            for k, (lo, hi) in enumerate(case.extra["chunks"])}


def _smooth_perf(ex: Exercise, loaded: dict, runtime, rng, macros) -> "PerfResult":
    import kernels
    from kernels.timing import CupyEvents

    from ..perf import PerfResult
    from ..pipeline import Pipeline

    kernel = loaded["smooth3"]
    n = 1 << 26
    total = n

    def launch(lo: int, hi: int, stream) -> None:
        kernel((blocks(hi - lo, SM_BLOCK),), (SM_BLOCK,), (pipe.d_in[lo:hi], pipe.d_out[lo:hi], hi - lo, lo, total),
               stream=stream)

    pipe = Pipeline(n, launch, halo=1, streams=PIPE_STREAMS)
    pipe.h_in[:] = rng.uniform(-10, 10, n).astype(np.float32)
    case = Case("perf", "perf", {"inp": np.asarray(pipe.h_in)}, {"out": ((n,), np.float32)}, {"n": n})
    expected = smooth_expected(pipe.h_in)
    device = runtime.device_name()
    wrong = [0]
    sample = np.sort(rng.choice(n, size=1 << 20, replace=False))
    sampled = Expected(expected.value[sample], atol=expected.atol[sample])

    def verify(full: bool = False) -> None:
        """Every timed run is checked on a million random elements, the last ones in full."""
        from ..compare import compare

        got = np.asarray(pipe.h_out)
        ok = compare("out", got, expected, case.tol).ok if full else compare("out", got[sample], sampled, case.tol).ok
        if not ok:
            wrong[0] += 1

    class CheckingEvents(CupyEvents):
        first = True

        def flush_l2(self) -> None:  # before each repetition's start event: untimed
            runtime.synchronize()
            if not self.first:
                verify()
            self.first = False
            pipe.h_out[:] = np.nan
            super().flush_l2()

    try:
        stage = pipe.stage_ms()
        t_serial = kernels.benchmark(lambda: pipe.run(1, 1), warmup=1, repeat=5, events=CheckingEvents())
        runtime.synchronize()
        verify(full=True)
        t_pipe = kernels.benchmark(lambda: pipe.run(PIPE_STREAMS, PIPE_CHUNKS), warmup=1, repeat=10,
                                   events=CheckingEvents())
        runtime.synchronize()
        verify(full=True)
    except Exception as exc:
        return PerfResult(V.CRASH, "speedup", target=ex.perf.target, size=f"2^26 floats",
                          message=f"the pipeline failed: {type(exc).__name__}: {exc}", device=device)
    if wrong[0]:
        return PerfResult(V.WRONG, "speedup", target=ex.perf.target, size="2^26 floats",
                          message=f"{wrong[0]} of the timed pipeline runs gave a wrong result", device=device)
    serial = sum(stage.values())
    ideal = t_serial.median_ms / ideal_ms(stage, PIPE_CHUNKS)
    achieved = t_serial.median_ms / t_pipe.median_ms
    verdict = V.PASSED if achieved >= ex.perf.target * ideal else V.TOO_SLOW
    stages = ", ".join(f"{k} {v:.2f} ms" for k, v in stage.items())
    return PerfResult(verdict, "x speedup", achieved, ideal,
                      f"the ideal speedup for {PIPE_CHUNKS} chunks from the stage times ({stages}; "
                      f"sum {serial:.2f} ms)", ex.perf.target,
                      f"serial {t_serial.median_ms:.2f} ms, {PIPE_STREAMS} streams x {PIPE_CHUNKS} chunks "
                      f"{t_pipe.median_ms:.2f} ms; every timed run checked", "2^26 floats", device=device)


SMOOTH = Exercise(
    id="asynchrony/smooth_chunks",
    title="A kernel for a chunked pipeline",
    kind="write",
    kernels=(KernelSpec("smooth3", "(const float* in, float* out, int n, int first, int total)"),),
    launch_text=("one launch per chunk, blocks of 256 threads and ceil(n / 256) blocks, where n is the chunk's "
                 "length. `in` points at the chunk's first element inside the whole input array, `first` is "
                 "that element's index in the whole array and `total` the whole array's length. `out` points at "
                 "the chunk's part of the output, which the check keeps as an array of its own (`out0`, `out1`, "
                 "... in its table) with guard bands around it, so a write past the end of a chunk shows. On a "
                 "GPU the "
                 "speed test runs the chunks in a pipeline of 4 streams and 16 chunks."),
    make_cases=_smooth_cases, launch=_smooth_launch, reference=_smooth_reference,
    perf=PerfSpec(case=lambda rng, sm: None, metric="x speedup", work=lambda c: 0.0, baseline="ideal", target=0.7,
                  describe="the speedup of the pipelined run over the serial one (one stream, one chunk)",
                  measure=_smooth_perf),
)

# --------------------------------------------------------------------------------------------------
# The pipeline's time, by hand
# --------------------------------------------------------------------------------------------------

STAGES = {"H2D": 21.0, "kernel": 30.0, "D2H": 20.0}


def _pipeline_questions() -> tuple[Question, ...]:
    serial = sum(STAGES.values())
    faster = dict(STAGES, kernel=15.0)
    return (
        Question("serial_ms", "one stream, one chunk: total time in ms", serial, rel_tol=0.01),
        Question("ideal_ms_4", "ideal pipeline time with 4 chunks, ms", ideal_ms(STAGES, 4), rel_tol=0.01),
        Question("speedup_4", "its speedup over the serial run", serial / ideal_ms(STAGES, 4), rel_tol=0.02),
        Question("ideal_ms_16", "ideal pipeline time with 16 chunks, ms", ideal_ms(STAGES, 16), rel_tol=0.01),
        Question("speedup_16", "its speedup over the serial run", serial / ideal_ms(STAGES, 16), rel_tol=0.02),
        Question("speedup_limit", "the speedup with infinitely many chunks", serial / max(STAGES.values()),
                 rel_tol=0.02),
        Question("bottleneck", "which stage bounds the pipeline ('H2D', 'kernel' or 'D2H')", ("kernel", "the kernel")),
        Question("ideal_ms_16_fast_kernel", "ideal time with 16 chunks if the kernel took 15 ms", ideal_ms(faster, 16),
                 rel_tol=0.01),
        Question("copy_engines", "copy engines needed for H2D and D2H to overlap", 2),
    )


def _pipeline_measure(prediction: dict) -> list:
    import kernels

    from ..pipeline import Pipeline
    from ..predict import MeasuredRow

    fma = kernels.load_kernel("asynchrony/fma_chain.cu", "fma_chain")
    n = 1 << 24
    iters = 200

    def launch(lo: int, hi: int, stream) -> None:
        fma((blocks(hi - lo, 256),), (256,), (pipe.d_in[lo:hi], pipe.d_out[lo:hi], hi - lo, iters), stream=stream)

    pipe = Pipeline(n, launch, streams=PIPE_STREAMS)
    pipe.h_in[:] = 1.0
    stage = pipe.stage_ms()
    serial = kernels.benchmark(lambda: pipe.run(1, 1), warmup=1, repeat=5, flush_l2=False).median_ms
    piped = kernels.benchmark(lambda: pipe.run(PIPE_STREAMS, PIPE_CHUNKS), warmup=1, repeat=5, flush_l2=False).median_ms
    stages = ", ".join(f"{k} {v:.2f} ms" for k, v in stage.items())
    return [
        MeasuredRow(f"speedup with 16 chunks: your prediction (stated times) vs this GPU's ideal ({stages})",
                    prediction.get("speedup_16"), round(serial / ideal_ms(stage, PIPE_CHUNKS), 3)),
        MeasuredRow("speedup with 16 chunks measured on this GPU (4 streams)", prediction.get("speedup_16"),
                    round(serial / piped, 3), f"serial {serial:.2f} ms, pipelined {piped:.2f} ms"),
    ]


PIPELINE = Exercise(
    id="asynchrony/pipeline_predict",
    title="Predict a pipeline's speedup",
    kind="predict",
    questions=_pipeline_questions(),
    measure=_pipeline_measure,
)

EXERCISES = [SMOOTH, PIPELINE]
