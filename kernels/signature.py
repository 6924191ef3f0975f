"""Read a kernel's C parameter list and convert Python arguments to exactly those C types.

CuPy passes a Python int as a 64-bit ``long long`` and a Python float as a ``double`` whatever the C
parameter says, and passes an array's pointer even when the array is a strided view. Each of those
silently gives wrong answers, so the launcher checks every argument against the parsed signature and
raises one clear ``KernelArgumentError`` instead.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from .errors import KernelArgumentError, KernelNotFoundError  # noqa: F401  (raised here, exported here too)


# --------------------------------------------------------------------------------------------------
# Masking: comments, string literals and preprocessor lines blanked out, offsets kept.
# --------------------------------------------------------------------------------------------------

def mask_code(code: str) -> str:
    """``code`` with comments, literal contents and ``#`` lines replaced by spaces (same length).

    Structural searches (braces, parentheses, keywords) run on the mask and slice the original, so a
    brace inside a comment or a string never confuses them.
    """
    out = list(code)
    i, n = 0, len(code)
    line_start = True
    while i < n:
        c = code[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c in " \t":
            i += 1
            continue
        if line_start and c == "#":  # preprocessor directive, with backslash continuations
            j = i
            while j < n and code[j] != "\n":
                if code[j] == "\\" and j + 1 < n and code[j + 1] == "\n":
                    j += 2
                    continue
                j += 1
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
            continue
        line_start = False
        if code.startswith("//", i):
            j = code.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif code.startswith("/*", i):
            j = code.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and code[j] != c and code[j] != "\n":
                j += 2 if code[j] == "\\" else 1
            for k in range(i + 1, min(j, n)):
                out[k] = " "
            i = j + 1
        else:
            i += 1
    return "".join(out)


def _match_close(m: str, i: int, open_: str, close: str) -> int:
    """Index of the bracket closing the one at ``m[i]`` (``len(m)`` if unbalanced)."""
    depth = 0
    for j in range(i, len(m)):
        if m[j] == open_:
            depth += 1
        elif m[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return len(m)


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside (), [], {} and <> so that template arguments stay whole."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


# --------------------------------------------------------------------------------------------------
# Finding functions
# --------------------------------------------------------------------------------------------------

_ATTRS_WITH_ARGS = {"__launch_bounds__", "__maxnreg__", "__cluster_dims__", "__align__",
                    "__attribute__", "alignas", "__declspec", "__nv_register_params__"}
_IDENT = re.compile(r"[A-Za-z_]\w*")


@dataclass
class FunctionSpan:
    """Where one ``__global__`` or ``__device__`` function sits in a source (offsets into it)."""

    name: str
    kind: str  # "__global__" or "__device__"
    start: int  # start of the declaration (``extern "C"``, ``template`` or the first keyword)
    params_open: int
    params_close: int
    end: int  # one past the closing brace, or past ``;`` for a declaration
    is_definition: bool
    template_params: list[tuple[str, str | None]] = field(default_factory=list)  # (name, default)


def _template_params(header: str) -> list[tuple[str, str | None]]:
    t = re.search(r"\btemplate\s*<", header)
    if not t:
        return []
    open_ = t.end() - 1
    inner = header[open_ + 1:_match_close(header, open_, "<", ">")]
    result = []
    for part in split_top_level(inner):
        decl, _, default = part.partition("=")
        names = _IDENT.findall(decl)
        if names:
            result.append((names[-1], default.strip() or None))
    return result


def find_functions(code: str, kinds: Iterable[str] = ("__global__",)) -> list[FunctionSpan]:
    """Every function declared with one of ``kinds`` (``__global__``, ``__device__``), in order."""
    kinds = tuple(kinds)
    m = mask_code(code)
    spans: list[FunctionSpan] = []
    skip_until = -1
    for hit in re.finditer(r"\b(__global__|__device__)\b", m):
        if hit.start() < skip_until:
            continue  # inside a function body found already (a lambda, say)
        kind = hit.group(1)
        start = max(m.rfind(ch, 0, hit.start()) for ch in ";{}") + 1
        while start < hit.start() and m[start].isspace():
            start += 1
        header = m[start:hit.start()]
        if kind == "__device__" and re.search(r"\b__global__\b", header):
            continue
        span = _scan_declaration(m, hit.end())
        if span is None:
            continue
        name, p_open, p_close = span
        j = p_close + 1
        while j < len(m) and (m[j].isspace() or m[j].isalpha() or m[j] == "_"):
            j += 1  # trailing qualifiers such as noexcept
        is_def = j < len(m) and m[j] == "{"
        end = _match_close(m, j, "{", "}") + 1 if is_def else j + 1
        if is_def:
            skip_until = end
        if kind not in kinds:
            continue
        spans.append(FunctionSpan(name, kind, start, p_open, p_close, min(end, len(m)), is_def,
                                  _template_params(m[start:hit.start()] + m[hit.end():p_open])))
    return spans


def _scan_declaration(m: str, pos: int) -> tuple[str, int, int] | None:
    """From just after ``__global__``: (function name, '(' offset, ')' offset), or None."""
    n = len(m)
    while pos < n:
        while pos < n and m[pos].isspace():
            pos += 1
        ident = _IDENT.match(m, pos)
        if ident:
            word, pos = ident.group(), ident.end()
            k = pos
            while k < n and m[k].isspace():
                k += 1
            if word in _ATTRS_WITH_ARGS:
                if k < n and m[k] == "(":
                    pos = _match_close(m, k, "(", ")") + 1
                continue
            if k < n and m[k] == "(":
                return word, k, _match_close(m, k, "(", ")")
            if k < n and m[k] == "<":
                pos = _match_close(m, k, "<", ">") + 1
            continue
        if pos < n and m[pos] in "*&:":
            pos += 1
            continue
        return None
    return None


def kernel_names(code: str) -> list[str]:
    """Names of the ``__global__`` functions defined in ``code``, in order, without repeats."""
    return list(dict.fromkeys(f.name for f in find_functions(code)))


def template_kernels(code: str) -> list[str]:
    """Names of the ``__global__`` function templates (they compile only when instantiated)."""
    return list(dict.fromkeys(f.name for f in find_functions(code) if f.template_params))


# --------------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------------

_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__",
               "struct", "register"}
_INT_WORDS = {"unsigned", "signed", "long", "short", "int", "char"}
_TYPE_KEYWORDS = _INT_WORDS | {"float", "double", "bool", "void"}


@dataclass(frozen=True)
class Param:
    """One kernel parameter: ``const float* __restrict__ x`` -> base "float", pointer, const."""

    name: str
    ctype: str  # the declaration without the name, e.g. "const float* __restrict__"
    base: str  # the canonical pointee or value type, e.g. "float", "unsigned long long"
    is_pointer: bool
    is_const: bool  # for pointers: the pointee is const (an input)

    @property
    def short(self) -> str:
        """``const float*`` style text for messages."""
        return f"{'const ' if self.is_const else ''}{self.base}{'*' if self.is_pointer else ''}"


def canonical_type(words: Sequence[str]) -> str:
    """Canonical spelling of a C type: ``unsigned`` -> "unsigned int", ``long long int`` -> "long long"."""
    words = [w.removeprefix("std::").removeprefix("::") for w in words if w not in _QUALIFIERS]
    if words and set(words) <= _INT_WORDS:
        unsigned = "unsigned" in words
        prefix = "unsigned " if unsigned else ""
        if "char" in words:
            return "unsigned char" if unsigned else ("signed char" if "signed" in words else "char")
        if "short" in words:
            return prefix + "short"
        longs = words.count("long")
        if longs >= 2:
            return prefix + "long long"
        if longs == 1:
            return prefix + "long"
        return prefix + "int"
    return " ".join(words)


def _parse_param(text: str, index: int) -> Param:
    text = " ".join(text.split("=")[0].split())  # drop a default value, normalise spaces
    array = text.endswith("]")
    if array:
        text = text[:text.index("[")].strip()
    tokens = re.findall(r"[A-Za-z_][\w]*(?:::[A-Za-z_]\w*)*|\*|&", text)
    stars = [i for i, t in enumerate(tokens) if t == "*"]
    is_pointer = bool(stars) or array
    words = [t for t in tokens if t not in ("*", "&")]
    plain = [w for w in words if w not in _QUALIFIERS]
    name = ""
    if len(plain) >= 2 and plain[-1] not in _TYPE_KEYWORDS:
        name = plain[-1]
    type_tokens = tokens[:]
    if name:
        last = len(tokens) - 1 - tokens[::-1].index(name)
        type_tokens = tokens[:last]
    first_star = next((i for i, t in enumerate(type_tokens) if t == "*"), len(type_tokens))
    before_star = type_tokens[:first_star]
    base_words = [t for t in before_star if t not in ("&",)]
    base = canonical_type(base_words)
    depth = type_tokens.count("*") + (1 if array else 0)
    if depth > 1:
        base += "*" * (depth - 1)
    is_const = "const" in before_star
    ctype = " ".join(type_tokens).replace(" *", "*").replace(" &", "&")
    if array:
        ctype += "*"
    return Param(name or f"arg{index}", ctype, base, is_pointer, is_const)


def parse_name_expression(expression: str) -> tuple[str, list[str]]:
    """``"foo<float, 256>"`` -> ("foo", ["float", "256"])."""
    expression = expression.strip()
    if "<" not in expression:
        return expression, []
    name, _, rest = expression.partition("<")
    return name.strip(), split_top_level(rest[:rest.rfind(">")])


def _find_kernel(code: str, name: str) -> FunctionSpan:
    spans = [f for f in find_functions(code) if f.name == name]
    if not spans:
        found = kernel_names(code)
        listing = ", ".join(found) if found else "none"
        raise KernelNotFoundError(
            f"no __global__ function named {name!r} in this CUDA source (kernels found: {listing})")
    return next((s for s in spans if s.is_definition), spans[0])


def parse_signature(code: str, name: str, template_args: dict[str, str] | None = None) -> list[Param]:
    """The parameters of the ``__global__`` function ``name`` in ``code``.

    ``name`` may be a name expression such as ``"foo<float, 256>"``; its template arguments (or
    ``template_args``, by template parameter name) replace the template parameters in the types.
    """
    base_name, positional = parse_name_expression(name)
    span = _find_kernel(code, base_name)
    bound: dict[str, str] = {}
    for (tname, default), value in zip(span.template_params, positional + [None] * 99):
        chosen = value if value is not None else default
        if chosen is not None:
            bound[tname] = chosen
    bound.update(template_args or {})
    text = mask_code(code)[span.params_open + 1:span.params_close]
    for tname, value in bound.items():
        text = re.sub(rf"\b{re.escape(tname)}\b", value, text)
    parts = split_top_level(text)
    if parts == ["void"]:
        return []
    return [_parse_param(p, i) for i, p in enumerate(parts)]


# --------------------------------------------------------------------------------------------------
# Argument conversion
# --------------------------------------------------------------------------------------------------

SCALAR_DTYPES: dict[str, str] = {
    "float": "float32", "double": "float64", "__half": "float16", "half": "float16",
    "int": "int32", "int32_t": "int32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long long": "int64", "int64_t": "int64", "long": "int64", "ptrdiff_t": "int64",
    "intptr_t": "int64", "ssize_t": "int64",
    "unsigned long long": "uint64", "uint64_t": "uint64", "unsigned long": "uint64",
    "size_t": "uint64", "uintptr_t": "uint64",
    "short": "int16", "int16_t": "int16", "unsigned short": "uint16", "uint16_t": "uint16",
    "char": "int8", "signed char": "int8", "int8_t": "int8",
    "unsigned char": "uint8", "uint8_t": "uint8", "bool": "bool",
}

# vector type -> (component dtype, width)
VECTOR_TYPES: dict[str, tuple[str, int]] = {
    "float2": ("float32", 2), "float3": ("float32", 3), "float4": ("float32", 4),
    "double2": ("float64", 2), "double4": ("float64", 4),
    "int2": ("int32", 2), "int3": ("int32", 3), "int4": ("int32", 4),
    "uint2": ("uint32", 2), "uint3": ("uint32", 3), "uint4": ("uint32", 4),
    "__half2": ("float16", 2), "half2": ("float16", 2),
    "char4": ("int8", 4), "uchar4": ("uint8", 4), "short2": ("int16", 2), "ushort2": ("uint16", 2),
    "longlong2": ("int64", 2), "ulonglong2": ("uint64", 2),
}
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}
_BFLOAT16 = {"__nv_bfloat16", "nv_bfloat16"}


def is_device_array(obj: Any, array_types: Sequence[type] = ()) -> bool:
    """True for a CuPy array (by module name, so no import is needed) or one of ``array_types``."""
    if array_types and isinstance(obj, tuple(array_types)):
        return True
    module = type(obj).__module__ or ""
    return module.split(".")[0] == "cupy" and hasattr(obj, "dtype") and hasattr(obj, "shape")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"numpy.ndarray of {value.dtype} with shape {value.shape}"
    if hasattr(value, "dtype") and hasattr(value, "shape"):
        library = type(value).__module__.split(".")[0]
        return f"{library} array of {value.dtype} with shape {tuple(value.shape)}"
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


class _Converter:
    """Converts the arguments of one launch; holds the kernel name for messages."""

    def __init__(self, kernel: str, array_types: Sequence[type]):
        self.kernel = kernel
        self.array_types = tuple(array_types)

    def fail(self, p: Param, problem: str) -> KernelArgumentError:
        return KernelArgumentError(f"{self.kernel}: argument '{p.name}' ({p.short}): {problem}")

    # pointers ---------------------------------------------------------------------------------
    def pointer(self, p: Param, value: Any) -> Any:
        if not is_device_array(value, self.array_types):
            if isinstance(value, np.ndarray):
                raise self.fail(p, f"got a {_describe(value)}, which lives in CPU memory; "
                                   f"copy it to the GPU first with cupy.asarray(...)")
            if hasattr(value, "__cuda_array_interface__"):
                raise self.fail(p, f"got a {type(value).__name__}; wrap it with cupy.asarray(...) "
                                   f"so that the launcher can check it")
            raise self.fail(p, f"expected a cupy array{self._dtype_hint(p)}, got {_describe(value)}")
        try:
            dtype: Any = np.dtype(value.dtype)
        except TypeError:  # a dtype NumPy does not know by that spelling (bfloat16)
            dtype = str(value.dtype)
        self._check_dtype(p, value, dtype)
        flags = getattr(value, "flags", None)
        if flags is not None and not _c_contiguous(flags):
            strides = getattr(value, "strides", "?")
            raise self.fail(p, f"the array is not C-contiguous (shape {tuple(value.shape)}, strides "
                               f"{strides}: a transposed, sliced or strided view), so the kernel "
                               f"would read the wrong elements; pass cupy.ascontiguousarray(...)")
        return value

    def _dtype_hint(self, p: Param) -> str:
        base = p.base
        if base in SCALAR_DTYPES:
            return f" of {SCALAR_DTYPES[base]}"
        if base in VECTOR_TYPES:
            return f" of {VECTOR_TYPES[base][0]}"
        return ""

    def _check_dtype(self, p: Param, value: Any, dtype: Any) -> None:
        base = p.base
        name = getattr(dtype, "name", str(dtype))
        if base == "void" or base.endswith("*"):
            if base.endswith("*") and name not in ("uint64", "int64"):
                raise self.fail(p, f"a pointer-to-pointer needs an array of uint64 addresses, got {name}")
            return
        if base in _BFLOAT16:
            if name not in ("bfloat16", "uint16"):
                raise self.fail(p, f"expected an array of bfloat16 (or its uint16 bits), got {name}")
            return
        if base in SCALAR_DTYPES:
            want = SCALAR_DTYPES[base]
            if name != want:
                raise self.fail(p, f"expected an array of {want}, got an array of {name}; "
                                   f"convert it with .astype(cupy.{want}) or change the C type")
            return
        if base in VECTOR_TYPES:
            comp, width = VECTOR_TYPES[base]
            if name == _COMPLEX_OF.get(comp) and width % 2 == 0:
                width //= 2
            elif name != comp:
                raise self.fail(p, f"expected an array of {comp} ({width} per {base}), got {name}")
            size = int(getattr(value, "size", math.prod(value.shape)))
            if size % width:
                raise self.fail(p, f"the array has {size} elements, not a multiple of {width}, "
                                   f"so it is not a whole number of {base} values")
            return
        # a struct or an unknown type: nothing to check but the memory layout

    # scalars ----------------------------------------------------------------------------------
    def scalar(self, p: Param, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        if is_device_array(value, self.array_types) or isinstance(value, np.ndarray):
            raise self.fail(p, f"expected a number, got {_describe(value)}; "
                               f"pass a Python number (e.g. x.item())")
        want = SCALAR_DTYPES.get(p.base)
        if want is None:
            return value  # a struct, a vector type or an uninstantiated template type: pass as is
        dtype = np.dtype(want)
        if dtype.kind == "b":
            return self._bool(p, value)
        if dtype.kind in "iu":
            return self._int(p, value, dtype)
        return self._float(p, value, dtype)

    def _bool(self, p: Param, value: Any) -> np.bool_:
        if isinstance(value, (bool, np.bool_)):
            return np.bool_(value)
        if isinstance(value, (int, np.integer)) and value in (0, 1):
            return np.bool_(value)
        raise self.fail(p, f"expected True or False, got {_describe(value)}")

    def _int(self, p: Param, value: Any, dtype: np.dtype) -> Any:
        if isinstance(value, (float, np.floating)):
            raise self.fail(p, f"got float {value!r}, but the parameter is an integer; "
                               f"pass an int (e.g. int(x)) or declare the parameter as float")
        if not isinstance(value, (int, np.integer, np.bool_)):
            raise self.fail(p, f"expected an int, got {_describe(value)}")
        number = int(value)
        info = np.iinfo(dtype)
        if info.min <= number <= info.max:
            return dtype.type(number)
        if number < 0 and info.min == 0:
            raise self.fail(p, f"{number} is negative but the parameter is unsigned ({dtype.name})")
        if -2**63 <= number < 2**63 and info.bits < 64:
            fix = "; declare the parameter as long long"
        elif 0 <= number < 2**64 and dtype != np.uint64:
            fix = "; declare the parameter as unsigned long long"
        else:
            fix = ""
        raise self.fail(p, f"{number} does not fit in {dtype.name}{fix}")

    def _float(self, p: Param, value: Any, dtype: np.dtype) -> Any:
        if not isinstance(value, (int, float, np.integer, np.floating, np.bool_)):
            raise self.fail(p, f"expected a real number, got {_describe(value)}")
        try:
            number = float(value)
        except OverflowError:
            raise self.fail(p, f"{value} is too large for {dtype.name}") from None
        limit = float(np.finfo(dtype).max)
        if math.isfinite(number) and abs(number) > limit:
            fix = "; declare the parameter as double" if dtype.itemsize < 8 else ""
            raise self.fail(p, f"{number:g} does not fit in {dtype.name} (largest {limit:g}){fix}")
        return dtype.type(number)


def _c_contiguous(flags: Any) -> bool:
    try:
        return bool(flags.c_contiguous)
    except AttributeError:
        return bool(flags["C_CONTIGUOUS"])


def format_signature(params: Sequence[Param]) -> str:
    """``(const float* x, int n)``, for messages."""
    return "(" + ", ".join(f"{p.short} {p.name}" for p in params) + ")"


def convert_args(params: Sequence[Param], args: Any, *, kernel: str = "kernel",
                 array_types: Sequence[type] = ()) -> tuple:
    """Check ``args`` against ``params`` and return them converted to the exact C types.

    Pointers need C-contiguous CuPy arrays (or ``array_types``) of the pointee's dtype; integers and
    floats become NumPy scalars of the parameter's width after a range check.
    """
    if not isinstance(args, (tuple, list)):
        raise KernelArgumentError(
            f"{kernel}: pass the kernel arguments as a tuple, e.g. (x, y, n), not {_describe(args)}; "
            f"a single argument needs a trailing comma: (x,)")
    if len(args) != len(params):
        raise KernelArgumentError(
            f"{kernel} takes {len(params)} argument{'s' if len(params) != 1 else ''} "
            f"{format_signature(params)} but got {len(args)}")
    conv = _Converter(kernel, array_types)
    return tuple(conv.pointer(p, a) if p.is_pointer else conv.scalar(p, a) for p, a in zip(params, args))


__all__ = ["Param", "parse_signature", "convert_args", "KernelArgumentError", "KernelNotFoundError",
           "find_functions", "kernel_names", "template_kernels", "mask_code", "parse_name_expression",
           "canonical_type", "is_device_array", "format_signature", "split_top_level"]
