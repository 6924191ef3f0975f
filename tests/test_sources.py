"""Finding, reading and displaying CUDA sources (run against a temporary kernels/cuda tree)."""
from __future__ import annotations

from pathlib import Path

import IPython.display
import pytest

from kernels import sources

KERNEL_CU = r'''#include "common/util.cuh"

// Adds two vectors.
// One thread per element.
extern "C" __global__ void vector_add(const float* a, const float* b, float* c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { c[i] = add(a[i], b[i]); }  // braces { } in code
}

/* Scales a vector. */
template <typename T>
__global__ void scale(T* x, T s, int n)
{
    const char* brace = "}";
    int i = threadIdx.x;
    if (i < n) x[i] *= s;
}
'''
UTIL_CUH = "__device__ float add(float x, float y) { return x + y; }\n"


@pytest.fixture
def cuda_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "vectors").mkdir()
    (tmp_path / "common").mkdir()
    (tmp_path / "vectors" / "vector_add.cu").write_text(KERNEL_CU)
    (tmp_path / "common" / "util.cuh").write_text(UTIL_CUH)
    (tmp_path / "vectors" / "notes.txt").write_text("not a source")
    monkeypatch.setattr(sources, "CUDA_DIR", tmp_path)
    return tmp_path


def test_all_sources_lists_cu_and_cuh_only(cuda_dir: Path):
    names = [p.relative_to(cuda_dir).as_posix() for p in sources.all_sources()]
    assert names == ["common/util.cuh", "vectors/vector_add.cu"]


def test_source_reads_by_relative_path(cuda_dir: Path):
    assert sources.source("vectors/vector_add.cu") == KERNEL_CU
    assert sources.source("kernels/cuda/vectors/vector_add.cu") == KERNEL_CU


def test_missing_source_lists_available_files_and_suggests(cuda_dir: Path):
    with pytest.raises(FileNotFoundError) as e:
        sources.source("vectors/vectoradd.cu")
    msg = str(e.value)
    assert "vectors/vector_add.cu" in msg and "common/util.cuh" in msg
    assert "Did you mean 'vectors/vector_add.cu'" in msg


def test_function_source_extracts_one_function_with_its_comment():
    text = sources.function_source(KERNEL_CU, "vector_add")
    assert text.startswith("// Adds two vectors.\n// One thread per element.\nextern \"C\"")
    assert text.rstrip().endswith("}")
    assert "scale" not in text and "#include" not in text
    assert text.count("{") == text.count("}")


def test_function_source_handles_templates_block_comments_and_braces_in_strings():
    text = sources.function_source(KERNEL_CU, "scale")
    assert text.startswith("/* Scales a vector. */\ntemplate <typename T>")
    assert text.rstrip().endswith("x[i] *= s;\n}")


def test_function_source_finds_device_functions():
    assert sources.function_source(UTIL_CUH, "add").strip() == UTIL_CUH.strip()


def test_function_source_unknown_name_lists_functions():
    with pytest.raises(ValueError, match="functions: scale, vector_add"):
        sources.function_source(KERNEL_CU, "vector_sub")


def test_markdown_block_fence_outgrows_backticks():
    assert sources.markdown_block("int x;") == "```cuda\nint x;\n```"
    block = sources.markdown_block("// ```quoted```")
    assert block.startswith("````cuda\n") and block.endswith("\n````")


def test_show_source_displays_a_cuda_markdown_block(cuda_dir: Path, monkeypatch: pytest.MonkeyPatch):
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    assert sources.show_source("vectors/vector_add.cu", function="scale") is None
    assert len(shown) == 1 and isinstance(shown[0], IPython.display.Markdown)
    data = shown[0].data
    assert data.startswith("```cuda\n/* Scales a vector. */") and data.endswith("\n```")
    assert "vector_add" not in data
    sources.show_source("vectors/vector_add.cu")
    assert shown[1].data == sources.markdown_block(KERNEL_CU)


def test_include_options_point_at_the_cuda_dir(cuda_dir: Path):
    assert sources.include_options() == (f"--include-path={cuda_dir}",)

