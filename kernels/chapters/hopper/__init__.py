"""The Hopper chapter's host side: tensor maps for TMA, wgmma descriptors, launches, who can run them.

Hopper's copy engine (TMA) and warpgroup tensor cores (wgmma) take operands the earlier chapters never
built: a 128-byte *tensor map* that the host encodes with the driver (``cuTensorMapEncodeTiled``) and
passes by value, and 64-bit *shared-memory matrix descriptors* that the kernel builds. The checks and
encodings are plain Python (``tensor_map_args``, ``wgmma_descriptor``, ``accumulator_position``) so
that they can be read, tested and drawn without a GPU; only ``encode_tensor_map`` and the launches
need one. Kernels are compiled for ``sm_90a``: wgmma exists only there (the ``a`` features are not
carried forward to later architectures).
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ...errors import LaunchConfigError, NoGPUError

#: NVRTC options of every Hopper kernel: the architecture-specific target that has wgmma and setmaxnreg.
ARCH_OPTIONS = ("-arch=sm_90a",)

#: Swizzle widths in bytes -> the suffix of the driver's CU_TENSOR_MAP_SWIZZLE_* enum.
TENSOR_MAP_SWIZZLES = {0: "NONE", 32: "32B", 64: "64B", 128: "128B"}

#: Swizzle widths in bytes -> bits 62-63 of a wgmma matrix descriptor (PTX ISA, "Matrix Descriptor Format").
WGMMA_SWIZZLE_MODES = {0: 0, 128: 1, 64: 2, 32: 3}

TENSOR_MAP_BYTES = 128
MAX_BOX = 256  # elements per box dimension
GEMM_K_MULTIPLE = 8  # fp16 rows must be whole 16-byte units for TMA
#: Dynamic shared memory a kernel asks for beyond its tiles: up to 1024 bytes to align the tiles to the
#: 128-byte swizzle's 1024-byte repeat, and room for the mbarriers after them.
SHARED_SLACK = 1024 + 128


# ------------------------------------------------------------------------------------ tensor maps

@dataclass(frozen=True)
class TensorMapArgs:
    """What ``cuTensorMapEncodeTiled`` is given for a 2-D row-major array, innermost dimension first."""

    address: int
    global_dims: tuple[int, int]  # (columns, rows)
    global_strides: tuple[int]  # bytes from one row to the next (rank - 1 entries)
    box_dims: tuple[int, int]  # (box columns, box rows)
    element_strides: tuple[int, int]
    element_bytes: int
    swizzle_bytes: int

    @property
    def box_bytes(self) -> int:
        """Bytes one copy of a box delivers (also for boxes that hang over the edge: TMA zero-fills)."""
        return self.box_dims[0] * self.box_dims[1] * self.element_bytes


def tensor_map_args(address: int, rows: int, cols: int, box_rows: int, box_cols: int, *,
                    element_bytes: int = 2, swizzle_bytes: int = 0,
                    row_stride_bytes: int | None = None) -> TensorMapArgs:
    """The arguments of a tiled tensor map over a rows x cols row-major array, checked against the
    driver's rules so that a bad one fails here with a sentence instead of CUDA_ERROR_INVALID_VALUE."""
    stride = cols * element_bytes if row_stride_bytes is None else int(row_stride_bytes)
    if element_bytes not in (1, 2, 4, 8):
        raise ValueError(f"element_bytes must be 1, 2, 4 or 8, not {element_bytes}")
    if rows < 1 or cols < 1:
        raise ValueError(f"a tensor map needs a non-empty array, not {rows} x {cols}")
    if address % 16:
        raise ValueError(f"TMA needs a 16-byte aligned base address; this array starts at {address:#x}")
    if stride % 16 or stride < cols * element_bytes:
        raise ValueError(f"TMA needs a row stride that is a multiple of 16 bytes and holds a row; rows of "
                         f"{cols} x {element_bytes}-byte elements {stride} bytes apart are not (for fp16, "
                         f"make the row length a multiple of 8)")
    if stride >= 1 << 40 or cols >= 1 << 32 or rows >= 1 << 32:
        raise ValueError(f"{rows} x {cols} with row stride {stride} bytes is beyond what a tensor map describes")
    for name, size in (("box_rows", box_rows), ("box_cols", box_cols)):
        if not 1 <= size <= MAX_BOX:
            raise ValueError(f"{name} must be in 1..{MAX_BOX}, not {size}")
    if (box_cols * element_bytes) % 16:
        raise ValueError(f"a box row must be a multiple of 16 bytes; {box_cols} x {element_bytes} bytes is not")
    if swizzle_bytes not in TENSOR_MAP_SWIZZLES:
        raise ValueError(f"swizzle_bytes must be one of {sorted(TENSOR_MAP_SWIZZLES)}, not {swizzle_bytes}")
    if swizzle_bytes and box_cols * element_bytes > swizzle_bytes:
        raise ValueError(f"with the {swizzle_bytes}-byte swizzle a box row may hold at most {swizzle_bytes} "
                         f"bytes; {box_cols} x {element_bytes} bytes is more")
    return TensorMapArgs(address=int(address), global_dims=(int(cols), int(rows)), global_strides=(stride,),
                         box_dims=(int(box_cols), int(box_rows)), element_strides=(1, 1),
                         element_bytes=element_bytes, swizzle_bytes=swizzle_bytes)


_DATA_TYPES = {1: "UINT8", 2: "FLOAT16", 4: "FLOAT32", 8: "FLOAT64"}


def _driver() -> Any:
    from cuda.bindings import driver  # cuda-bindings; here, so that the module imports anywhere

    return driver


def _check_driver(result: Any, what: str) -> Any:
    """Unpack a cuda-bindings ``(status, *values)`` tuple, raising one line on a status other than success."""
    driver = _driver()
    status, *values = result
    if int(status) != 0:
        _, name = driver.cuGetErrorName(status)
        _, text = driver.cuGetErrorString(status)
        decode = (lambda b: b.decode() if isinstance(b, bytes) else str(b))
        raise RuntimeError(f"{what} failed: {decode(name)} ({decode(text)})")
    return values[0] if len(values) == 1 else tuple(values)


@functools.lru_cache(maxsize=1)
def _driver_initialised() -> bool:
    _check_driver(_driver().cuInit(0), "cuInit")
    return True


def encode_tensor_map(args: TensorMapArgs) -> bytes:
    """The 128 bytes of the tensor map the driver encodes for ``args`` (fp16 for 2-byte elements).
    L2 promotion of 128 bytes; out-of-bounds elements read as zero."""
    driver = _driver()
    _driver_initialised()
    enum = driver.CUtensorMapDataType
    u64, u32 = driver.cuuint64_t, driver.cuuint32_t
    tensor_map = _check_driver(driver.cuTensorMapEncodeTiled(
        getattr(enum, f"CU_TENSOR_MAP_DATA_TYPE_{_DATA_TYPES[args.element_bytes]}"), 2, args.address,
        [u64(d) for d in args.global_dims], [u64(s) for s in args.global_strides],
        [u32(b) for b in args.box_dims], [u32(e) for e in args.element_strides],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{TENSOR_MAP_SWIZZLES[args.swizzle_bytes]}"),
        driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), "cuTensorMapEncodeTiled")
    return tensor_map_bytes(tensor_map)


def tensor_map_bytes(tensor_map: Any) -> bytes:
    """The 128 bytes of a cuda-bindings ``CUtensorMap``."""
    if hasattr(tensor_map, "getPtr"):
        return ctypes.string_at(int(tensor_map.getPtr()), TENSOR_MAP_BYTES)
    return b"".join(int(word).to_bytes(8, "little") for word in tensor_map.opaque)


def tensor_map_of(array: Any, box_rows: int, box_cols: int, swizzle_bytes: int = 0) -> bytes:
    """The tensor map of a 2-D row-major CuPy array (which must outlive every launch that uses it)."""
    if array.ndim != 2 or not array.flags.c_contiguous:
        raise ValueError(f"a tensor map here describes a 2-D C-contiguous array, not shape {array.shape} "
                         f"(C-contiguous: {array.flags.c_contiguous})")
    rows, cols = array.shape
    return encode_tensor_map(tensor_map_args(array.data.ptr, rows, cols, box_rows, box_cols,
                                             element_bytes=array.itemsize, swizzle_bytes=swizzle_bytes))


# ------------------------------------------------------------------------------- wgmma operands

def wgmma_descriptor(address: int, leading_bytes: int, stride_bytes: int, swizzle_bytes: int,
                     base_offset: int = 0) -> int:
    """A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor Format"), as the kernels'
    ``wgmma_descriptor`` builds it: bits 0-13 address >> 4, 16-29 leading-dimension byte offset >> 4,
    32-45 stride-dimension byte offset >> 4, 49-51 base offset, 62-63 the swizzle mode."""
    for name, value in (("address", address), ("leading_bytes", leading_bytes), ("stride_bytes", stride_bytes)):
        if value % 16 or not 0 <= value < 1 << 18:
            raise ValueError(f"{name} must be a multiple of 16 below 256 KB, not {value}")
    if swizzle_bytes not in WGMMA_SWIZZLE_MODES:
        raise ValueError(f"swizzle_bytes must be one of {sorted(WGMMA_SWIZZLE_MODES)}, not {swizzle_bytes}")
    if not 0 <= base_offset < 8:
        raise ValueError(f"base_offset is 3 bits, not {base_offset}")
    return ((address >> 4) | (leading_bytes >> 4) << 16 | (stride_bytes >> 4) << 32 | base_offset << 49
            | WGMMA_SWIZZLE_MODES[swizzle_bytes] << 62)


def wgmma_descriptor_fields(descriptor: int) -> dict[str, int]:
    """The fields of a descriptor, in bytes where the descriptor stores bytes >> 4."""
    swizzles = {mode: width for width, mode in WGMMA_SWIZZLE_MODES.items()}
    return {"address": (descriptor & 0x3FFF) << 4, "leading_bytes": (descriptor >> 16 & 0x3FFF) << 4,
            "stride_bytes": (descriptor >> 32 & 0x3FFF) << 4, "base_offset": descriptor >> 49 & 0x7,
            "swizzle_bytes": swizzles[descriptor >> 62 & 0x3]}


def swizzled_offset_128b(row: int, col_bytes: int) -> int:
    """Byte offset of byte ``col_bytes`` of row ``row`` of a tile with 128-byte rows that TMA loaded
    with the 128-byte swizzle: the row's 16-byte chunk c lands at chunk c XOR (row % 8)."""
    if not 0 <= col_bytes < 128:
        raise ValueError(f"a 128-byte swizzled row has bytes 0..127, not {col_bytes}")
    chunk, within = divmod(col_bytes, 16)
    return 128 * row + 16 * (chunk ^ (row % 8)) + within


def accumulator_position(thread: int, register: int, n: int = 128) -> tuple[int, int]:
    """(row, column) in the 64 x n fp32 accumulator of wgmma m64nNk16 of register ``register`` of
    thread ``thread`` (0..127) of the warpgroup (PTX ISA, "Matrix fragments for wgmma .m64nNk16")."""
    if not 0 <= thread < 128 or not 0 <= register < n // 2:
        raise ValueError(f"thread must be in 0..127 and register in 0..{n // 2 - 1}")
    warp, lane = divmod(thread, 32)
    row = 16 * warp + lane // 4 + 8 * (register // 2 % 2)
    col = 8 * (register // 4) + 2 * (lane % 4) + register % 2
    return row, col


# ------------------------------------------------------------------------------------ who can run

def hopper_problem() -> str | None:
    """Why the Hopper kernels cannot run here, or None when they can (compute capability 9.0)."""
    from ...backend import backend_name, gpu_available

    needs = ("the Hopper chapter's kernels need an H100 or H200 (compute capability 9.0, compiled for sm_90a): "
             "TMA, mbarrier transaction counts and wgmma exist on no other GPU, and the CPU backend cannot run them")
    if backend_name() == "cpu":
        return f"{needs}; the CPU backend is in use"
    if not gpu_available():
        return f"{needs}; CuPy finds no usable CUDA GPU here"
    from ...device import device_info

    info = device_info()  # under a GPU profile (kernels.profile), the profile's GPU: a T4 run takes the T4's path
    if info.compute_capability != "9.0":
        return f"{needs}; {info.name} has compute capability {info.compute_capability}"
    return None


def requires_hopper(what: str = "this cell") -> None:
    """Raise NoGPUError saying what is needed unless a Hopper GPU runs ``what``."""
    problem = hopper_problem()
    if problem:
        raise NoGPUError(f"{what}: {problem}")


# ------------------------------------------------------------------------------------ launches

def load_hopper_kernel(path: str, name: str) -> Any:
    """Kernel ``name`` (a name expression for a template) of ``path`` compiled for sm_90a: CuPy's
    RawKernel, launched with ``launch`` (the package's argument checks do not know tensor maps)."""
    from ...compile import load_module

    requires_hopper(f"load_hopper_kernel({path!r}, {name!r})")
    return load_module(path, options=ARCH_OPTIONS, name_expressions=(name,)).raw.get_function(name)


def allow_shared_memory(kernel: Any, nbytes: int) -> None:
    """Let ``kernel`` launch with ``nbytes`` of dynamic shared memory (beyond 48 KB needs this)."""
    import cupy

    limit = int(cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["sharedMemPerBlockOptin"])
    if nbytes > limit:
        raise LaunchConfigError(f"{nbytes} bytes of dynamic shared memory exceed this GPU's {limit} per block")
    if kernel.max_dynamic_shared_size_bytes < nbytes:
        kernel.max_dynamic_shared_size_bytes = int(nbytes)


def _parameter(value: Any) -> ctypes._SimpleCData | ctypes.Array:
    """One kernel argument as the bytes the kernel reads: a tensor map, a pointer, an int or a float."""
    if isinstance(value, (bytes, bytearray)):
        if len(value) != TENSOR_MAP_BYTES:
            raise TypeError(f"a tensor map argument has {TENSOR_MAP_BYTES} bytes, not {len(value)}")
        return (ctypes.c_uint64 * 16).from_buffer_copy(value)
    if hasattr(value, "data") and hasattr(value.data, "ptr"):  # a CuPy array: its device pointer
        return ctypes.c_uint64(value.data.ptr)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"kernel arguments here are tensor maps (bytes), CuPy arrays, ints and floats, not "
                        f"{type(value).__name__}")
    if isinstance(value, int):
        if not -(1 << 31) <= value < 1 << 31:
            raise ValueError(f"{value} does not fit the kernel's 32-bit int")
        return ctypes.c_int32(value)
    return ctypes.c_float(value)


def launcher(kernel: Any, grid: Sequence[int], block: Sequence[int], args: Sequence[Any], shared_mem: int = 0,
             *, route: str = "driver") -> Callable[[], None]:
    """A function that launches RawKernel ``kernel`` on the current stream, its arguments packed once
    (so that timing it times the kernel, not the packing). ``route`` "driver" passes each argument's
    bytes to cuLaunchKernel (tensor maps by value); "cupy" goes through CuPy, a tensor map passed as
    a NumPy structured scalar of 128 bytes."""
    grid3 = (tuple(int(g) for g in grid) + (1, 1))[:3]
    block3 = (tuple(int(b) for b in block) + (1, 1))[:3]
    if min(grid3) < 1 or min(block3) < 1:
        raise LaunchConfigError(f"grid {grid3} and block {block3} need every dimension >= 1")
    if route == "cupy":
        return _cupy_launcher(kernel, grid3, block3, args, shared_mem)
    if route != "driver":
        raise ValueError(f"route is 'driver' or 'cupy', not {route!r}")
    import cupy

    values = [_parameter(a) for a in args]
    pointers = (ctypes.c_void_p * max(1, len(values)))(*[ctypes.addressof(v) for v in values])
    driver = _driver()
    _driver_initialised()
    function, shared, where = int(kernel.kernel.ptr), int(shared_mem), f"launching {kernel.name}"

    def run() -> None:
        _ = values  # the packed bytes live as long as this function
        stream = cupy.cuda.get_current_stream().ptr
        _check_driver(driver.cuLaunchKernel(function, *grid3, *block3, shared, int(stream),
                                            ctypes.addressof(pointers), 0), where)

    return run


def _cupy_launcher(kernel: Any, grid: tuple[int, ...], block: tuple[int, ...], args: Sequence[Any],
                   shared_mem: int) -> Callable[[], None]:
    import numpy as np

    record = np.dtype({"names": ["opaque"], "formats": [(np.uint64, (16,))], "itemsize": TENSOR_MAP_BYTES},
                      align=True)

    def convert(a: Any) -> Any:
        if isinstance(a, (bytes, bytearray)):
            return np.frombuffer(bytes(a), dtype=record)[0]
        if isinstance(a, bool) or not isinstance(a, (int, float)):
            return a
        return np.int32(a) if isinstance(a, int) else np.float32(a)

    converted = tuple(convert(a) for a in args)
    return lambda: kernel(grid, block, converted, shared_mem=int(shared_mem))


def launch(kernel: Any, grid: Sequence[int], block: Sequence[int], args: Sequence[Any], shared_mem: int = 0,
           *, route: str = "driver") -> None:
    """Launch RawKernel ``kernel`` once (see ``launcher``)."""
    launcher(kernel, grid, block, args, shared_mem, route=route)()


# ---------------------------------------------------------------------------- the chapter's kernels

@dataclass(frozen=True)
class GemmKernel:
    """One Hopper GEMM kernel: where it is, its block tile and threads, and its shared memory."""

    path: str
    name: str
    block_rows: int
    block_cols: int
    threads: int
    shared_bytes: int
    a_box_rows: int
    cluster: int = 1  # blocks per cluster, stacked along M
    multicast: bool = False  # the cluster's blocks share B^T's box through TMA multicast

    @property
    def b_box_rows(self) -> int:
        """Rows of B^T one block loads per stage: its slice of the box when a cluster shares it."""
        return self.block_cols // self.cluster if self.multicast else self.block_cols

    def grid(self, M: int, N: int) -> tuple[int, int]:
        """Blocks across N and down M; the rows of blocks rounded up to whole clusters (the extra
        blocks' tiles lie below C: TMA reads zeros there and the epilogue stores nothing)."""
        rows = -(-M // self.block_rows)
        return (-(-N // self.block_cols), -(-rows // self.cluster) * self.cluster)


def wgmma_pipelined(block_cols: int = 128, stages: int = 4, in_flight: int = 1) -> GemmKernel:
    """The warp-specialised kernel: 128 x ``block_cols`` tiles (128 or 256), ``stages`` stages of
    A's 128 x 64 box and B^T's block_cols x 64 box; ``in_flight`` wgmma groups left running (0 or 1)."""
    if block_cols not in (128, 256) or not 2 <= stages <= 6 or in_flight not in (0, 1):
        raise ValueError(f"block_cols is 128 or 256, stages 2..6 and in_flight 0 or 1; got {block_cols}, {stages}, "
                         f"{in_flight}")
    stage_bytes = (128 + block_cols) * 64 * 2
    return GemmKernel("hopper/wgmma_pipelined.cu", f"gemm_wgmma_pipelined<{block_cols}, {stages}, {in_flight}>",
                      128, block_cols, 384, stages * stage_bytes + SHARED_SLACK, 128)


#: (block_cols, stages, cluster) of the instantiated warp-specialised kernels (the .cu file's list); a
#: cluster of 2 shares B^T's box through TMA multicast.
SPECIALISED_CONFIGS: list[tuple[int, int, int]] = [(256, 4, 1), (256, 4, 2), (256, 3, 1), (256, 3, 2),
                                                   (128, 4, 1), (128, 6, 1), (128, 6, 2)]
#: The one cluster configuration also built without multicast: what the cluster alone changes.
CLUSTER_WITHOUT_MULTICAST = (256, 4, 2)


def wgmma_specialised(block_cols: int = 256, stages: int = 4, cluster: int = 1, *,
                      multicast: bool = True) -> GemmKernel:
    """The warp-specialised kernel with setmaxnreg (producer 40 registers, consumers 232); with
    ``cluster`` 2, two blocks stacked along M run together and (``multicast``) share B^T's box
    through TMA multicast. ``wgmma_specialised(256, 4, 2, multicast=False)`` is the cluster alone."""
    shares = cluster > 1 and multicast
    key = (block_cols, stages, cluster)
    if not (key in SPECIALISED_CONFIGS if shares or cluster == 1 else key == CLUSTER_WITHOUT_MULTICAST):
        raise ValueError(f"gemm_wgmma_specialised is instantiated for (block_cols, stages, cluster) in "
                         f"{SPECIALISED_CONFIGS}, and for {CLUSTER_WITHOUT_MULTICAST} without multicast; not "
                         f"{key}{'' if shares or cluster == 1 else ' without multicast'}")
    stage_bytes = (128 + block_cols) * 64 * 2
    return GemmKernel("hopper/wgmma_specialised.cu",
                      f"gemm_wgmma_specialised<{block_cols}, {stages}, {cluster}, {int(shares)}>",
                      128, block_cols, 384, stages * stage_bytes + SHARED_SLACK, 128, cluster, shares)


WGMMA_SINGLE = GemmKernel("hopper/wgmma_gemm.cu", "gemm_wgmma", 64, 128, 128, 24 * 1024 + SHARED_SLACK, 64)


def check_gemm_operands(A: Any, B_t: Any, C: Any) -> tuple[int, int, int]:
    """(M, N, K) of C = A B with B given as B^T, after one-line checks of shapes, types and K."""
    if A.ndim != 2 or B_t.ndim != 2 or A.shape[1] != B_t.shape[1]:
        raise ValueError(f"A is M x K and B^T is N x K (B column-major); got {A.shape} and {B_t.shape}")
    M, K = A.shape
    N = B_t.shape[0]
    if str(A.dtype) != "float16" or str(B_t.dtype) != "float16" or str(C.dtype) != "float32":
        raise TypeError(f"A and B^T are float16 and C float32; got {A.dtype}, {B_t.dtype}, {C.dtype}")
    if C.shape != (M, N) or not (A.flags.c_contiguous and B_t.flags.c_contiguous and C.flags.c_contiguous):
        raise ValueError(f"C must be a C-contiguous {M} x {N} array and A, B^T C-contiguous")
    if K % GEMM_K_MULTIPLE:
        raise ValueError(f"K = {K}: TMA reads rows of A and B^T that are whole 16-byte units, so K must be a "
                         f"multiple of {GEMM_K_MULTIPLE} (pad K with zeros); M and N may be anything")
    return M, N, K


def gemm_launcher(kernel: GemmKernel, A: Any, B_t: Any, C: Any, *, route: str = "driver") -> Callable[[], None]:
    """A function computing C = A B with ``kernel`` on a Hopper GPU; B given as B^T (N x K row-major).
    The arrays must outlive it (its tensor maps hold their addresses)."""
    M, N, K = check_gemm_operands(A, B_t, C)
    raw = load_hopper_kernel(kernel.path, kernel.name)
    allow_shared_memory(raw, kernel.shared_bytes)
    a_map = tensor_map_of(A, kernel.a_box_rows, 64, swizzle_bytes=128)
    b_map = tensor_map_of(B_t, kernel.b_box_rows, 64, swizzle_bytes=128)
    return launcher(raw, kernel.grid(M, N), (kernel.threads,), (a_map, b_map, C, M, N, K),
                    shared_mem=kernel.shared_bytes, route=route)


def tile_copy_launcher(src: Any, dst: Any, box_rows: int = 128, box_cols: int = 64, *, tma_store: bool = True,
                       route: str = "driver") -> Callable[[], None]:
    """A function doing dst[...] = src for 2-D fp16 arrays, one box per block through TMA
    (hopper/tma_copy.cu); out through a second tensor map with ``tma_store``, else plain stores."""
    if src.ndim != 2 or src.shape != dst.shape or str(src.dtype) != "float16" or str(dst.dtype) != "float16":
        raise ValueError(f"src and dst are 2-D float16 arrays of one shape; got {src.shape} {src.dtype} and "
                         f"{dst.shape} {dst.dtype}")
    rows, cols = src.shape
    if cols % 8:
        raise ValueError(f"{cols} columns: TMA needs rows of whole 16-byte units, a multiple of 8 fp16 columns")
    name = f"tma_copy_{'tma' if tma_store else 'plain'}_store<{box_rows}, {box_cols}>"
    raw = load_hopper_kernel("hopper/tma_copy.cu", name)
    shared = box_rows * box_cols * 2 + SHARED_SLACK
    allow_shared_memory(raw, shared)
    src_map = tensor_map_of(src, box_rows, box_cols)
    args = (src_map, tensor_map_of(dst, box_rows, box_cols)) if tma_store else (src_map, dst, rows, cols)
    return launcher(raw, (-(-cols // box_cols), -(-rows // box_rows)), (128,), args, shared_mem=shared, route=route)


# ------------------------------------------------------------------ distributed shared memory

#: Cluster sizes of hopper/cluster_histogram.cu (the portable ones: at most 8 blocks).
HISTOGRAM_CLUSTERS = (1, 2, 4, 8)
HISTOGRAM_THREADS = 512


def histogram_shared_bytes(bins: int, cluster: int) -> int:
    """Dynamic shared memory of one block: its slice of the bins, 4 bytes each."""
    return 4 * -(-int(bins) // int(cluster))


def histogram_launcher(values: Any, counts: Any, cluster: int, *, blocks: int | None = None) -> Callable[[], None]:
    """A function adding the histogram of ``values`` (1-D uint32) into ``counts`` (uint32, one per bin;
    values >= len(counts) are ignored), the bins split across the shared memory of the ``cluster``
    blocks of each cluster (hopper/cluster_histogram.cu). ``blocks`` defaults to as many as fit on
    the GPU at once, rounded down to whole clusters."""
    if cluster not in HISTOGRAM_CLUSTERS:
        raise ValueError(f"cluster is one of {HISTOGRAM_CLUSTERS}, not {cluster}")
    if values.ndim != 1 or str(values.dtype) != "uint32" or counts.ndim != 1 or str(counts.dtype) != "uint32":
        raise TypeError(f"values and counts are 1-D uint32 arrays; got {values.dtype} {values.shape} and "
                        f"{counts.dtype} {counts.shape}")
    bins = int(counts.size)
    if bins < 1:
        raise ValueError("counts needs at least one bin")
    if values.size >= 1 << 31:
        raise ValueError(f"{values.size} values: the kernel counts them with a 32-bit int; split the array")
    requires_hopper("the cluster histogram")
    import cupy

    shared = histogram_shared_bytes(bins, cluster)
    properties = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    limit = int(properties["sharedMemPerBlockOptin"])
    if shared > limit:
        raise LaunchConfigError(f"{bins} bins in clusters of {cluster}: {shared} bytes of shared memory per block, "
                                f"more than this GPU's {limit}; use a larger cluster")
    raw = load_hopper_kernel("hopper/cluster_histogram.cu", f"histogram_cluster<{cluster}>")
    allow_shared_memory(raw, shared)
    if blocks is None:
        per_sm = max(1, min(int(properties["maxThreadsPerMultiProcessor"]) // HISTOGRAM_THREADS,
                            int(properties["sharedMemPerMultiprocessor"]) // (shared + 1024)))
        blocks = max(cluster, int(properties["multiProcessorCount"]) * per_sm // cluster * cluster)
    if blocks < 1 or blocks % cluster:
        raise LaunchConfigError(f"blocks must be a positive multiple of the cluster size {cluster}, not {blocks}")
    return launcher(raw, (blocks,), (HISTOGRAM_THREADS,), (values, int(values.size), counts, bins),
                    shared_mem=shared)


__all__ = ["ARCH_OPTIONS", "TensorMapArgs", "tensor_map_args", "encode_tensor_map", "tensor_map_of",
           "wgmma_descriptor", "wgmma_descriptor_fields", "swizzled_offset_128b", "accumulator_position",
           "hopper_problem", "requires_hopper", "load_hopper_kernel", "allow_shared_memory", "launcher", "launch",
           "GemmKernel", "WGMMA_SINGLE", "wgmma_pipelined", "SPECIALISED_CONFIGS", "wgmma_specialised",
           "check_gemm_operands", "gemm_launcher", "tile_copy_launcher", "HISTOGRAM_CLUSTERS", "histogram_shared_bytes",
           "histogram_launcher"]
