"""Parsing kernel signatures and converting launch arguments, with fake device arrays (no CuPy)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernels.signature import (KernelArgumentError, KernelNotFoundError, Param, canonical_type,
                               convert_args, find_functions, is_device_array, kernel_names,
                               mask_code, parse_signature, template_kernels)

SOURCE = r'''
#include <cuda_fp16.h>
// a comment that mentions __global__ void decoy(int x) {
/* and a block comment: __global__ void decoy2(float y) { } */
extern "C" __global__ void __launch_bounds__(256, 2)
vector_add(const float* __restrict__ a,   // first input
           const float *__restrict__ b,   /* second input */
           float* c,
           int n)
{
    const char* text = "}{";
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

template <typename T, int BLOCK = 128>
__global__ void reduce(const T* __restrict__ in, T* out, unsigned long long n) {
    auto twice = [] __device__ (T x) { return x + x; };
    __shared__ T tile[BLOCK];
}

__device__ __forceinline__ float helper(float x) { return 2.0f * x; }

extern "C" {
__global__ static void many(unsigned u, long int l, size_t s, short h, unsigned char uc,
                            signed char sc, bool flag, double d, __half hv, float2* v2,
                            const int4* v4, void* raw, int arr[], float* const fixed,
                            uint32_t u32, int64_t i64) {}
}

extern "C" __global__ void no_args() {}
'''


class FakeFlags:
    def __init__(self, c_contiguous: bool):
        self.c_contiguous = c_contiguous


class FakeDeviceArray:
    """Looks like a cupy.ndarray to the duck-typed check: its class lives in a "cupy" module."""

    def __init__(self, shape: tuple[int, ...], dtype: str, contiguous: bool = True):
        self.shape = shape
        self.dtype = np.dtype(dtype)
        self.size = math.prod(shape)
        self.flags = FakeFlags(contiguous)
        self.strides = tuple(8 for _ in shape)


FakeDeviceArray.__module__ = "cupy._core.core"


class InjectedArray:
    """An array type that is accepted only because it is passed as ``array_types``."""

    def __init__(self, dtype: str):
        self.shape = (4,)
        self.dtype = np.dtype(dtype)
        self.size = 4
        self.flags = {"C_CONTIGUOUS": True}


def arr(dtype: str = "float32", shape: tuple[int, ...] = (8,), contiguous: bool = True) -> FakeDeviceArray:
    return FakeDeviceArray(shape, dtype, contiguous)


def params_of(name: str, **kw) -> list[Param]:
    return parse_signature(SOURCE, name, **kw)


# ---------------------------------------------------------------------------------------- parsing

def test_masking_keeps_offsets_and_hides_comments_and_strings():
    masked = mask_code(SOURCE)
    assert len(masked) == len(SOURCE)
    assert "decoy" not in masked and "#include" not in masked
    assert '"}{"' not in masked and "vector_add" in masked


def test_finds_kernels_but_not_comments_lambdas_or_device_functions():
    assert kernel_names(SOURCE) == ["vector_add", "reduce", "many", "no_args"]
    assert template_kernels(SOURCE) == ["reduce"]
    both = [(f.name, f.kind) for f in find_functions(SOURCE, ("__global__", "__device__"))]
    assert ("helper", "__device__") in both
    assert all(name != "twice" for name, _ in both)


def test_vector_add_signature():
    ps = params_of("vector_add")
    assert [p.name for p in ps] == ["a", "b", "c", "n"]
    assert [p.base for p in ps] == ["float", "float", "float", "int"]
    assert [p.is_pointer for p in ps] == [True, True, True, False]
    assert [p.is_const for p in ps] == [True, True, False, False]
    assert "__restrict__" in ps[0].ctype and ps[0].short == "const float*"


def test_template_arguments_from_name_expression_and_defaults():
    ps = params_of("reduce<double, 256>")
    assert [p.base for p in ps] == ["double", "double", "unsigned long long"]
    ps = params_of("reduce", template_args={"T": "__half"})
    assert ps[0].base == "__half"
    ps = params_of("reduce")  # T unknown: kept as written
    assert ps[0].base == "T"


def test_type_spellings_are_canonical():
    ps = {p.name: p for p in params_of("many")}
    assert ps["u"].base == "unsigned int"
    assert ps["l"].base == "long"
    assert ps["s"].base == "size_t"
    assert ps["h"].base == "short"
    assert ps["uc"].base == "unsigned char"
    assert ps["sc"].base == "signed char"
    assert ps["v2"].base == "float2" and ps["v2"].is_pointer
    assert ps["v4"].base == "int4" and ps["v4"].is_const
    assert ps["raw"].base == "void"
    assert ps["arr"].is_pointer and ps["arr"].base == "int"
    assert ps["fixed"].is_pointer and not ps["fixed"].is_const  # const pointer, mutable pointee
    assert canonical_type(["unsigned", "long", "long", "int"]) == "unsigned long long"
    assert canonical_type(["const", "std::size_t"]) == "size_t"


def test_empty_parameter_list():
    assert params_of("no_args") == []
    assert parse_signature('extern "C" __global__ void v(void) {}', "v") == []


def test_missing_kernel_lists_the_ones_found():
    with pytest.raises(KernelNotFoundError, match="vector_add, reduce, many, no_args"):
        params_of("vectorAdd")
    with pytest.raises(KernelNotFoundError):
        params_of("helper")  # a __device__ function is not a kernel


def test_declaration_then_definition_uses_definition():
    code = 'extern "C" __global__ void k(float* x, int n);\nextern "C" __global__ void k(float* y, int m) {}\n'
    assert [p.name for p in parse_signature(code, "k")] == ["y", "m"]


# ------------------------------------------------------------------------------------- converting

VA = params_of("vector_add")


def test_good_arguments_convert_to_exact_types():
    a, b, c = arr(), arr(), arr()
    out = convert_args(VA, (a, b, c, 8), kernel="vector_add")
    assert out[0] is a and out[2] is c
    assert type(out[3]) is np.int32 and out[3] == 8
    out = convert_args(VA, [a, b, c, np.int64(5)], kernel="vector_add")
    assert type(out[3]) is np.int32


def test_int_too_large_for_int32_names_the_fix():
    with pytest.raises(KernelArgumentError) as e:
        convert_args(VA, (arr(), arr(), arr(), 3_000_000_000), kernel="vector_add")
    msg = str(e.value)
    assert msg.startswith("vector_add: argument 'n' (int): 3000000000 does not fit in int32")
    assert "declare the parameter as long long" in msg


def test_float_for_int_parameter_is_refused():
    with pytest.raises(KernelArgumentError, match=r"argument 'n' \(int\): got float 8.0"):
        convert_args(VA, (arr(), arr(), arr(), 8.0), kernel="vector_add")
    with pytest.raises(KernelArgumentError, match="got float"):
        convert_args(VA, (arr(), arr(), arr(), np.float32(8)), kernel="vector_add")


def test_wrong_argument_count_names_the_signature():
    with pytest.raises(KernelArgumentError) as e:
        convert_args(VA, (arr(), arr(), 8), kernel="vector_add")
    assert "vector_add takes 4 arguments (const float* a, const float* b, float* c, int n) but got 3" in str(e.value)


def test_args_must_be_a_tuple():
    one = parse_signature('extern "C" __global__ void k(int n) {}', "k")
    with pytest.raises(KernelArgumentError, match="trailing comma"):
        convert_args(one, 5, kernel="k")


def test_numpy_array_for_pointer_says_to_use_cupy_asarray():
    with pytest.raises(KernelArgumentError) as e:
        convert_args(VA, (np.zeros(8, np.float32), arr(), arr(), 8), kernel="vector_add")
    msg = str(e.value)
    assert "argument 'a' (const float*)" in msg and "cupy.asarray" in msg and "CPU memory" in msg


def test_wrong_dtype_for_pointer():
    with pytest.raises(KernelArgumentError) as e:
        convert_args(VA, (arr("float64"), arr(), arr(), 8), kernel="vector_add")
    assert "expected an array of float32, got an array of float64" in str(e.value)


def test_non_contiguous_view_is_refused():
    with pytest.raises(KernelArgumentError, match="not C-contiguous"):
        convert_args(VA, (arr(), arr(), arr(contiguous=False), 8), kernel="vector_add")


def test_scalar_for_pointer_and_array_for_scalar():
    with pytest.raises(KernelArgumentError, match="expected a cupy array of float32, got float 1.0"):
        convert_args(VA, (1.0, arr(), arr(), 8), kernel="vector_add")
    with pytest.raises(KernelArgumentError, match="expected a number"):
        convert_args(VA, (arr(), arr(), arr(), arr("int32", (1,))), kernel="vector_add")


def test_numpy_zero_dim_array_is_a_scalar():
    out = convert_args(VA, (arr(), arr(), arr(), np.array(7)), kernel="vector_add")
    assert type(out[3]) is np.int32 and out[3] == 7


@pytest.mark.parametrize("ctype, dtype", [
    ("float", "float32"), ("double", "float64"), ("int", "int32"), ("int32_t", "int32"),
    ("unsigned", "uint32"), ("uint32_t", "uint32"), ("long long", "int64"), ("int64_t", "int64"),
    ("unsigned long long", "uint64"), ("uint64_t", "uint64"), ("size_t", "uint64"),
    ("__half", "float16"), ("half", "float16"), ("char", "int8"), ("int8_t", "int8"),
    ("unsigned char", "uint8"), ("uint8_t", "uint8"), ("short", "int16"), ("bool", "bool"),
])
def test_pointer_dtype_table(ctype, dtype):
    ps = parse_signature(f'extern "C" __global__ void k({ctype}* p) {{}}', "k")
    assert convert_args(ps, (arr(dtype),), kernel="k")[0].dtype == np.dtype(dtype)
    other = "float64" if dtype != "float64" else "float32"
    with pytest.raises(KernelArgumentError, match=f"expected an array of {dtype}"):
        convert_args(ps, (arr(other),), kernel="k")


@pytest.mark.parametrize("ctype, dtype, width", [
    ("float2", "float32", 2), ("float4", "float32", 4), ("int2", "int32", 2), ("int4", "int32", 4),
])
def test_vector_pointees_need_whole_vectors(ctype, dtype, width):
    ps = parse_signature(f'extern "C" __global__ void k(const {ctype}* v) {{}}', "k")
    assert convert_args(ps, (arr(dtype, (3 * width,)),), kernel="k")
    with pytest.raises(KernelArgumentError, match=f"not a multiple of {width}"):
        convert_args(ps, (arr(dtype, (3 * width + 1,)),), kernel="k")
    with pytest.raises(KernelArgumentError, match=f"expected an array of {dtype}"):
        convert_args(ps, (arr("float64", (width,)),), kernel="k")


def test_float2_accepts_complex64():
    ps = parse_signature('extern "C" __global__ void k(float2* v) {}', "k")
    assert convert_args(ps, (arr("complex64", (3,)),), kernel="k")


def test_void_pointer_accepts_any_contiguous_array():
    ps = params_of("many")
    raw = next(i for i, p in enumerate(ps) if p.name == "raw")
    p = ps[raw]
    for dtype in ("uint8", "float64", "int16"):
        assert convert_args([p], (arr(dtype),), kernel="many")
    with pytest.raises(KernelArgumentError, match="not C-contiguous"):
        convert_args([p], (arr(contiguous=False),), kernel="many")


@pytest.mark.parametrize("ctype, value, np_type", [
    ("int", -5, np.int32), ("unsigned int", 4_000_000_000, np.uint32), ("long long", 2**40, np.int64),
    ("unsigned long long", 2**63, np.uint64), ("size_t", 10, np.uint64), ("short", -300, np.int16),
    ("unsigned char", 255, np.uint8), ("char", -128, np.int8), ("float", 0.1, np.float32),
    ("double", 0.1, np.float64), ("float", 3, np.float32), ("__half", 1.5, np.float16),
    ("bool", True, np.bool_),
])
def test_scalars_become_the_parameter_type(ctype, value, np_type):
    ps = parse_signature(f'extern "C" __global__ void k({ctype} x) {{}}', "k")
    out = convert_args(ps, (value,), kernel="k")[0]
    assert type(out) is np_type
    assert out == np_type(value)


@pytest.mark.parametrize("ctype, value, text", [
    ("unsigned int", -1, "is negative but the parameter is unsigned"),
    ("unsigned char", 256, "does not fit in uint8"),
    ("short", 40000, "does not fit in int16"),
    ("int", 2**31, "declare the parameter as long long"),
    ("long long", 2**63, "does not fit in int64; declare the parameter as unsigned long long"),
    ("unsigned long long", 2**64, "does not fit in uint64"),
    ("float", 1e39, "does not fit in float32"),
    ("bool", 2, "expected True or False"),
    ("double", "1.0", "expected a real number, got str"),
    ("int", None, "expected an int, got NoneType"),
])
def test_scalar_errors(ctype, value, text):
    ps = parse_signature(f'extern "C" __global__ void k({ctype} x) {{}}', "k")
    with pytest.raises(KernelArgumentError) as e:
        convert_args(ps, (value,), kernel="k")
    assert text in str(e.value) and "argument 'x'" in str(e.value) and str(e.value).startswith("k:")


def test_float32_keeps_infinity_and_nan():
    ps = parse_signature('extern "C" __global__ void k(float x) {}', "k")
    assert np.isinf(convert_args(ps, (float("inf"),), kernel="k")[0])
    assert np.isnan(convert_args(ps, (float("nan"),), kernel="k")[0])


def test_unknown_scalar_types_pass_through():
    ps = parse_signature('struct P { int a; };\nextern "C" __global__ void k(P p) {}', "k")
    sentinel = object()
    assert convert_args(ps, (sentinel,), kernel="k")[0] is sentinel


def test_injected_array_type_and_duck_typing():
    assert is_device_array(arr())
    assert not is_device_array(np.zeros(3))
    injected = InjectedArray("int32")
    assert not is_device_array(injected)
    assert is_device_array(injected, (InjectedArray,))
    ps = parse_signature('extern "C" __global__ void k(int* p) {}', "k")
    assert convert_args(ps, (injected,), kernel="k", array_types=(InjectedArray,))[0] is injected
    with pytest.raises(KernelArgumentError, match="expected a cupy array"):
        convert_args(ps, (injected,), kernel="k")
