"""Launch geometry for the "Coalescing" chapter's strip transpose (``transpose_stores.cu``).

``transpose_aligned_strip<T, S, R>`` works with its grid in either order; which order is faster
depends on the shape (see the kernel's header comment): the blocks that run at the same time are
consecutive in ``blockIdx.x``, and they should cover whole rows of memory. :func:`strip_launch`
puts along x whichever of the two block counts is smaller, so a wave of blocks spans the whole of
that dimension.
"""
from __future__ import annotations

from dataclasses import dataclass

SECTOR_FLOATS = 8  # floats per 32-byte sector: the most a strip's store window shifts left
MAX_GRID_Y = 65535  # CUDA's limit on gridDim.y (x may reach 2^31 - 1)


@dataclass(frozen=True)
class StripLaunch:
    """Grid, block and the kernel's ``strips_along_x`` argument for one shape."""

    grid: tuple[int, int]
    block: tuple[int, int]
    strips_along_x: int
    strips: int
    column_blocks: int


def strip_launch(rows: int, cols: int, tile: int = 32, strip: int = 256, rows_per_pass: int = 16,
                 strips_along_x: bool | None = None) -> StripLaunch:
    """How to launch ``transpose_aligned_strip<tile, strip, rows_per_pass>`` on a rows x cols input.

    ``strips_along_x`` forces an order; by default strips go along x when there are fewer of them
    than column blocks.
    """
    for name, value in (("rows", rows), ("cols", cols), ("tile", tile), ("strip", strip),
                        ("rows_per_pass", rows_per_pass)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if tile % 32 or strip % 32:
        raise ValueError(f"tile and strip must be multiples of 32 (a warp), got tile={tile}, strip={strip}")
    # The windows shift left by up to 7 floats, so the last columns of an output row may need one
    # more strip than ceil(rows / strip).
    strips = -(-(rows + SECTOR_FLOATS - 1) // strip)
    column_blocks = -(-cols // tile)
    if strips_along_x is None:
        along_x = strips < column_blocks
        if (column_blocks if along_x else strips) > MAX_GRID_Y:   # only x may exceed 65535 blocks
            along_x = not along_x
    else:
        along_x = bool(strips_along_x)
    on_y = column_blocks if along_x else strips
    if on_y > MAX_GRID_Y:
        raise ValueError(f"a {rows} x {cols} input needs {strips} strips x {column_blocks} column blocks: "
                         f"{on_y} blocks along y is more than CUDA allows ({MAX_GRID_Y})")
    grid = (strips, column_blocks) if along_x else (column_blocks, strips)
    return StripLaunch(grid, (tile, rows_per_pass), int(along_x), strips, column_blocks)


__all__ = ["MAX_GRID_Y", "SECTOR_FLOATS", "StripLaunch", "strip_launch"]
