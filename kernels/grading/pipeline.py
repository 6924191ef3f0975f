"""A copy-in, kernel, copy-out pipeline over CUDA streams, as in the "Asynchrony" chapter (GPU only).

The data is split into chunks; chunk ``c`` goes through its three stages in stream ``c % S``. The
streams start after a fork event of the current stream and the current stream waits for all of them
at the end, so ``kernels.benchmark`` times the whole pipeline between its own events. A chunk's input
copy includes ``halo`` elements on each side (where they exist), for kernels that read neighbours.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

H2D, D2H = 1, 2  # cudaMemcpyKind


def chunk_bounds(n: int, chunks: int) -> list[tuple[int, int]]:
    """``chunks`` contiguous [lo, hi) ranges covering [0, n), as equal as possible."""
    edges = [n * c // chunks for c in range(chunks + 1)]
    return [(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo]


def ideal_ms(stage_ms: dict[str, float], chunks: int) -> float:
    """The slowest stage busy from start to end, plus one chunk's worth of the other two."""
    slowest = max(stage_ms.values())
    return slowest + (sum(stage_ms.values()) - slowest) / chunks


class Pipeline:
    """Pinned host buffers, device buffers and streams for one pipelined job of ``n`` floats."""

    def __init__(self, n: int, launch: Callable[[int, int, Any], None], halo: int = 0, streams: int = 4):
        import cupy
        import cupyx

        self.cupy = cupy
        self.n, self.launch, self.halo = n, launch, halo
        self.h_in = cupyx.empty_pinned(n, dtype=np.float32)
        self.h_out = cupyx.empty_pinned(n, dtype=np.float32)
        self.d_in = cupy.empty(n, dtype=cupy.float32)
        self.d_out = cupy.empty(n, dtype=cupy.float32)
        self.streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(streams)]

    def _copy(self, dst: int, src: int, nbytes: int, kind: int, stream: Any) -> None:
        self.cupy.cuda.runtime.memcpyAsync(dst, src, nbytes, kind, stream.ptr)

    def run(self, n_streams: int, chunks: int) -> None:
        """Queue the pipeline (no synchronisation)."""
        cupy = self.cupy
        main = cupy.cuda.get_current_stream()
        fork = main.record()
        streams = self.streams[:n_streams]
        for s in streams:
            s.wait_event(fork)
        for c, (lo, hi) in enumerate(chunk_bounds(self.n, chunks)):
            s = streams[c % n_streams]
            a, b = max(0, lo - self.halo), min(self.n, hi + self.halo)
            self._copy(self.d_in.data.ptr + 4 * a, self.h_in.ctypes.data + 4 * a, 4 * (b - a), H2D, s)
            self.launch(lo, hi, s)
            self._copy(self.h_out.ctypes.data + 4 * lo, self.d_out.data.ptr + 4 * lo, 4 * (hi - lo), D2H, s)
        for s in streams:
            main.wait_event(s.record())

    def stage_ms(self) -> dict[str, float]:
        """Each stage on the whole data, alone."""
        import kernels

        stream = self.cupy.cuda.get_current_stream()
        nbytes = 4 * self.n
        h2d = kernels.benchmark(lambda: self._copy(self.d_in.data.ptr, self.h_in.ctypes.data, nbytes, H2D, stream),
                                warmup=1, repeat=5, flush_l2=False)
        kernel = kernels.benchmark(lambda: self.launch(0, self.n, stream), warmup=1, repeat=5, flush_l2=False)
        d2h = kernels.benchmark(lambda: self._copy(self.h_out.ctypes.data, self.d_out.data.ptr, nbytes, D2H, stream),
                                warmup=1, repeat=5, flush_l2=False)
        return {"H2D": h2d.median_ms, "kernel": kernel.median_ms, "D2H": d2h.median_ms}
