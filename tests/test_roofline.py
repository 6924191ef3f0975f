"""Roofline arithmetic and plot, from hand-made ceilings (no GPU needed)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from kernels.ceilings import Ceilings, fma_blocks, fma_flops  # noqa: E402
from kernels.roofline import RooflinePoint, attainable_tflops, ridge_point, roofline_plot  # noqa: E402

C = Ceilings(device="Test GPU", copy_gbps=2000.0, fma_tflops=50.0, l2_bytes=50 << 20, sm_count=132,
             measured="2025-01-01")


def test_ridge_point_is_where_the_roofs_meet() -> None:
    ridge = ridge_point(C)
    assert ridge == pytest.approx(25.0)  # 50e12 / 2000e9
    assert attainable_tflops(ridge, C) == pytest.approx(C.fma_tflops)
    assert C.ridge_flop_per_byte == pytest.approx(ridge)


def test_attainable_is_bandwidth_bound_then_flat() -> None:
    assert attainable_tflops(1.0, C) == pytest.approx(2.0)  # 1 FLOP/B x 2 TB/s
    assert attainable_tflops(0.125, C) == pytest.approx(0.25)
    assert attainable_tflops(1000.0, C) == pytest.approx(50.0)
    values = attainable_tflops(np.array([0.5, 25.0, 100.0]), C)
    np.testing.assert_allclose(values, [1.0, 50.0, 50.0])


def test_point_properties() -> None:
    # SAXPY-like: 2 FLOPs per 12 bytes, 1e8 elements in 1 ms.
    p = RooflinePoint("saxpy", flops=2e8, nbytes=12e8, seconds=1e-3)
    assert p.intensity == pytest.approx(1 / 6)
    assert p.achieved_tflops == pytest.approx(0.2)
    assert p.achieved_gbps == pytest.approx(1200.0)
    assert p.fraction_of_roof(C) == pytest.approx(0.2 / (2000e9 / 6 / 1e12))


def test_plot_draws_roofs_ridge_and_labelled_points() -> None:
    points = [RooflinePoint("saxpy", 2e8, 12e8, 1e-3), RooflinePoint("gemm", 2e12, 1e10, 0.1)]
    fig = roofline_plot(C, points, title="my title")
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert ax.get_title() == "my title"
    lines = {line.get_gid(): line for line in ax.get_lines() if line.get_gid()}
    bw, roof, ridge = lines["bandwidth"], lines["compute"], lines["ridge"]
    np.testing.assert_allclose(bw.get_ydata(), np.asarray(bw.get_xdata()) * 2.0)  # slope = 2 TB/s
    np.testing.assert_allclose(roof.get_ydata(), 50.0)
    assert bw.get_xdata()[-1] == pytest.approx(25.0) and roof.get_xdata()[0] == pytest.approx(25.0)
    assert ridge.get_xdata()[0] == pytest.approx(25.0)
    gemm = lines["point:gemm"]
    assert gemm.get_xdata()[0] == pytest.approx(200.0) and gemm.get_ydata()[0] == pytest.approx(20.0)
    texts = [t.get_text() for t in ax.texts]
    assert "gemm: 40 % of roof" in texts  # 20 of 50 TFLOP/s
    saxpy_pct = 100 * points[0].fraction_of_roof(C)
    assert f"saxpy: {saxpy_pct:.0f} % of roof" in texts
    x_lo, x_hi = ax.get_xlim()
    assert x_lo < points[0].intensity and x_hi > points[1].intensity
    plt.close(fig)


def test_clustered_labels_do_not_overlap_and_a_point_above_its_roof_says_so() -> None:
    """Points at almost the same place (the GEMM ladder's rungs 4 to 7b) get labels that do not cover
    each other; a point faster than the roof at its counted intensity is not labelled "758 % of roof"."""
    cluster = [RooflinePoint(f"rung {k}", 2e12, 1e10 * (1 + 0.02 * k), 0.1 * (1 + 0.03 * k)) for k in range(6)]
    naive = RooflinePoint("naive", 2e12, 2e12, 0.2)    # intensity 1: roof 2 TFLOP/s, achieved 10
    fig = roofline_plot(C, cluster + [naive])
    ax = fig.axes[0]
    fig.canvas.draw()
    from matplotlib.text import Text  # an annotation's own extent includes its leader line

    renderer = fig.canvas.get_renderer()
    boxes = [Text.get_window_extent(t, renderer) for t in ax.texts if t.get_text().startswith("rung")]
    frame = ax.get_window_extent(renderer)
    assert all(frame.y0 <= b.y0 and b.y1 <= frame.y1 for b in boxes)          # inside the plot
    assert len(boxes) == 6
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b), (a, b)
    texts = [t.get_text() for t in ax.texts]
    assert "naive: above its roof" in texts and not any("500 % of roof" in t for t in texts)
    assert any("caches served" in label for label in ax.get_legend_handles_labels()[1])
    plt.close(fig)


def test_plot_into_given_axes_and_without_points() -> None:
    fig, ax = plt.subplots()
    assert roofline_plot(C, [], ax=ax) is fig
    assert "Test GPU" in ax.get_title()
    plt.close(fig)


def test_zero_flop_point_is_refused() -> None:
    with pytest.raises(ValueError, match="copy"):
        roofline_plot(C, [RooflinePoint("copy", 0.0, 1e9, 1e-3)])


def test_ceilings_text() -> None:
    assert str(C) == "Test GPU: copy 2000 GB/s, FP32 FMA 50.0 TFLOP/s (measured 2025-01-01)"
    assert "2000 GB/s" in C._repr_html_()


def test_fma_work_is_counted_exactly() -> None:
    import re

    from kernels.ceilings import FMA_SOURCE, FMAS_PER_ITER
    from kernels.sources import source

    code = source(FMA_SOURCE)
    chains = int(re.search(r"#define CHAINS (\d+)", code).group(1))
    unroll = int(re.search(r"#define UNROLL (\d+)", code).group(1))
    assert chains * unroll == FMAS_PER_ITER
    assert fma_flops(iters=10, threads=256) == 2 * 128 * 10 * 256
    assert fma_blocks(sm_count=132, max_threads_per_sm=2048) == 132 * 8 * 4
    assert fma_blocks(sm_count=40, max_threads_per_sm=1024) == 40 * 4 * 4
