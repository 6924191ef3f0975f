"""benchmarks/ncu_validate.py without a GPU: its parsers of ncu and racecheck output, and --dry-run."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "ncu_validate.py"
spec = importlib.util.spec_from_file_location("ncu_validate", SCRIPT)
validate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(validate)

LONG_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "copy_strided": 0%....50%....100% - 3 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(128, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","request","1,024"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(128, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","sector","8,192"
"1","4242","python3.12","127.0.0.1","transpose_tiled","1","7","(32, 8, 1)","(8, 8, 1)","0","9.0","Command line profiler metrics","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","","63488"
'''

WIDE_CSV = '''"ID","Kernel Name","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","smsp__inst_executed_op_shared_ld.sum"
"","","sector","inst"
"0","copy_vec4","4096","0"
"1","bank_stride","256","128"
'''

RACECHECK = '''========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at missing_barrier+0x150 in /tmp/tmpabc/kernel.cu:30:missing_barrier
=========     and Read access at missing_barrier+0x1a0 in /tmp/tmpabc/kernel.cu:31:missing_barrier [248 hazards]
=========
========= Warning: Race reported between Write access at warp_tail+0x3c0 in /tmp/tmpabc/kernel.cu:68:warp_tail
=========     and Read access at warp_tail+0x3e0 in /tmp/tmpabc/kernel.cu:69:warp_tail [16 hazards]
========= ERROR: Potential WAR hazard detected at __shared__ 0x40 in block (1, 0, 0) :
=========     Read Thread (16, 0, 0) at war_in_place+0x1e0 in /tmp/tmpabc/kernel.cu:51:war_in_place
=========     Write Thread (239, 0, 0) at war_in_place+0x210 in /tmp/tmpabc/kernel.cu:52:war_in_place
========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warnings)
'''


def test_parse_ncu_long_csv():
    launches = validate.parse_ncu_csv(LONG_CSV)
    assert [l["kernel"] for l in launches] == ["copy_strided", "transpose_tiled"]
    assert launches[0]["metrics"] == {"l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": 1024.0,
                                      "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": 8192.0}
    assert launches[1]["metrics"]["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == 63488.0


def test_parse_ncu_wide_csv_skips_the_units_row():
    launches = validate.parse_ncu_csv(WIDE_CSV)
    assert [(l["id"], l["kernel"]) for l in launches] == [(0, "copy_vec4"), (1, "bank_stride")]
    assert launches[1]["metrics"]["smsp__inst_executed_op_shared_ld.sum"] == 128.0
    assert validate.parse_ncu_csv("no csv here") == []


def test_parse_racecheck_both_report_formats():
    found = validate.parse_racecheck(RACECHECK)
    assert set(found) == {"missing_barrier", "warp_tail", "war_in_place"}
    assert found["missing_barrier"] == {"hazards": 1, "severities": ["error"], "line_pairs": [[30, 31]]}
    assert found["warp_tail"]["severities"] == ["warning"]
    assert found["war_in_place"]["line_pairs"] == [[51, 52]]


# The format of compute-sanitizer 2025 (CUDA 13), as printed on an H100: no kernel after the line.
RACECHECK_2025 = '''========= COMPUTE-SANITIZER
========= Warning: (Warp Level Programming) Potential RAW hazard detected at __shared__ 0x684 in block (0,0,0) :
=========     Write Thread (161,0,0) at missing_barrier+0x220 in 7da045ccf46e80c2.cubin.cu:30
=========     Read Thread (160,0,0) at missing_barrier+0x230 in 7da045ccf46e80c2.cubin.cu:31
=========     Current Value : 9
========= RACECHECK SUMMARY: 1 hazard displayed (0 errors, 1 warning)
'''


def test_parse_racecheck_2025_format_and_summary():
    found = validate.parse_racecheck(RACECHECK_2025)
    assert found == {"missing_barrier": {"hazards": 1, "severities": ["warning"], "line_pairs": [[30, 31]]}}
    assert validate.racecheck_summary(RACECHECK_2025) == (0, 1)
    assert validate.racecheck_summary(RACECHECK) == (2, 1)
    assert validate.racecheck_summary("========= ERROR SUMMARY: 0 errors") is None


def test_race_rows_use_the_totals_and_leave_failed_runs_out():
    ours = {"a": {"shared": True, "expected_racy": True}, "b": {"shared": True, "expected_racy": False},
            "c": {"shared": True, "expected_racy": True}}
    seen = {"a": {"hazards": 0, "severities": [], "line_pairs": [], "failed": False, "errors": 3, "warnings": 0},
            "b": {"hazards": 0, "severities": [], "line_pairs": [], "failed": False, "errors": 0, "warnings": 0},
            "c": {"hazards": 0, "severities": [], "line_pairs": [], "failed": True}}
    rows = {r["kernel"]: r["racecheck"] for r in validate.race_rows(ours, seen)}
    assert rows == {"a": True, "b": False, "c": None}
    assert all(r["racecheck"] is None for r in validate.race_rows(ours, None))


def test_comparison_rules():
    from tooling import traffic_testset as testset

    assert testset.matches("global_load_sectors", 4096, 4096.0) and not testset.matches("global_load_sectors", 4096, 4097)
    assert testset.matches("shared_load_bank_conflicts", 105, 100) and not testset.matches("shared_load_bank_conflicts",
                                                                                          120, 100)


def test_racecheck_agreement_picks_the_warp_rule():
    rows = [{"shared": True, "racecheck": True, "ours_syncwarp": True, "ours_collectives": False},
            {"shared": True, "racecheck": False, "ours_syncwarp": False, "ours_collectives": False}]
    assert validate.agreeing_fences(rows) == "syncwarp"
    rows[0]["racecheck"] = False
    assert validate.agreeing_fences(rows) == "collectives"


def test_dry_run_writes_the_files_and_prints_the_commands(tmp_path: Path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out), "--dry-run", "--kernels",
                           "copy_stride_2,bank_stride_2"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "ncu --clock-control none --metrics l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum," in done.stdout
    assert "compute-sanitizer --tool racecheck" in done.stdout and "Traceback" not in done.stderr
    recorded = json.loads((out / "ncu_h100.json").read_text())
    assert recorded["source"] == "dry-run" and set(recorded["kernels"]) == {"copy_stride_2", "bank_stride_2"}
    assert recorded["kernels"]["copy_stride_2"]["grid"] == [128] and recorded["races"]["missing_barrier"]["racy"]
    table = (out / "comparison.md").read_text()
    assert "| copy_stride_2 | global_load_sectors |  | 8192 | n/a |" in table
    assert "| shuffle_only | True | race | n/a | race | none |" in table


def test_without_a_gpu_it_says_so(tmp_path: Path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--ncu", "/nonexistent/ncu"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    assert done.returncode == 1 and "needs a CUDA GPU" in done.stderr and "Traceback" not in done.stderr


def test_unknown_kernel_names_are_refused(tmp_path: Path):
    done = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path), "--dry-run", "--kernels", "copy_typo"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2 and "no test-set kernel 'copy_typo'" in done.stderr


@pytest.mark.parametrize("name", ["ncu", "compute-sanitizer"])
def test_tools_given_by_a_missing_path_are_not_found(name: str):
    assert validate.find_tool(name, "/nonexistent/tool") is None
