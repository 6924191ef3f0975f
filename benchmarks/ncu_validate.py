"""Check kernels.analyze against Nsight Compute and compute-sanitizer on a GPU machine.

    python benchmarks/ncu_validate.py --out DIR            # on a machine with a CUDA GPU, ncu and CuPy
    python benchmarks/ncu_validate.py --out DIR --dry-run  # anywhere: the CPU side and the commands only

For every kernel of the test set (tests/tooling/traffic_testset.py) the script
1. analyses the launch on the CPU backend (``kernels.analyze``);
2. launches the same kernel with the same launch once on the GPU, in a child Python process run
   under ``ncu --clock-control none --metrics ... --csv`` (all kernels in one profiling session;
   a kernel missing from it is profiled again on its own), and reads the global load/store requests
   and sectors, the shared-memory instructions, wavefronts and bank conflicts;
3. runs the planted-race kernels (kernels/cuda/traffic/races.cu) under ``compute-sanitizer --tool
   racecheck`` and compares the hazards it reports with the races the analysis finds, under both
   rules for warp synchronisation (``__syncwarp()`` only, or any warp collective).

It writes DIR/ncu_h100.json (the schema of tests/tooling/ncu_h100.json, with "source": "ncu",
the GPU and the date: copy it there to make the tests compare with the measurement), and
DIR/comparison.md and DIR/comparison.json (kernel, metric, ncu value, our value, match). It takes
a minute or two; every kernel is handled on its own, so one failure is reported and the rest goes on.
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import glob
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test set lives with the tests, not in the package

from kernels.traffic.report import NCU_METRICS  # noqa: E402
from tooling import traffic_testset as testset  # noqa: E402

EXTRA_METRICS = ("smsp__inst_executed_op_global_ld.sum", "smsp__inst_executed_op_global_st.sum")
SEARCH = {"ncu": ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/*/ncu", "/usr/local/cuda-*/bin/ncu"),
          "compute-sanitizer": ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda-*/bin/compute-sanitizer",
                                "/usr/local/cuda/compute-sanitizer/compute-sanitizer")}
PROFILE_TIMEOUT_S = 150
SINGLE_TIMEOUT_S = 60
RACECHECK_TIMEOUT_S = 120


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------------

def find_tool(name: str, given: str | None = None) -> str | None:
    """The path of ``ncu`` or ``compute-sanitizer``: the one given, on PATH, or in the usual places."""
    if given:
        return given if Path(given).is_file() or shutil.which(given) else None
    found = shutil.which(name)
    if found:
        return found
    for pattern in SEARCH[name]:
        hits = sorted(glob.glob(pattern))
        if hits:
            return hits[-1]
    return None


def tool_version(path: str | None) -> str:
    if not path:
        return ""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def available_metrics(ncu: str) -> set[str] | None:
    """Base names of the metrics ncu knows for the GPU here (None: could not ask)."""
    try:
        out = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    names = set(re.findall(r"^([a-z0-9_]+__[a-z0-9_]+)", out, re.M))
    return names or None


def metric_list(known: set[str] | None) -> list[str]:
    wanted = list(dict.fromkeys([*NCU_METRICS.values(), *EXTRA_METRICS]))
    if known is None:
        return wanted
    kept = [m for m in wanted if m.rsplit(".", 1)[0] in known]
    if len(kept) < len(wanted) / 2:  # a listing in another form than expected: ask for all, ncu will say
        log("note: ncu's metric list does not look as expected; asking for every metric")
        return wanted
    for m in wanted:
        if m not in kept:
            log(f"note: ncu does not list {m} for this GPU; it is left out")
    return kept


def ncu_command(ncu: str, metrics: list[str], kernel_regex: str, child: list[str]) -> list[str]:
    return [ncu, "--clock-control", "none", "--metrics", ",".join(metrics), "--csv", "--print-units", "base",
            "--kernel-name-base", "function", "-k", f"regex:{kernel_regex}", *child]


def racecheck_command(sanitizer: str, child: list[str]) -> list[str]:
    return [sanitizer, "--tool", "racecheck", "--racecheck-report", "all", "--print-level", "info", *child]


def child_command(mode: str, names: list[str]) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), mode, ",".join(names)]


# --------------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------------

def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if not text or text.lower() in ("n/a", "nan"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[dict[str, Any]]:
    """One dict per profiled launch, in launch order: {"id", "kernel", "metrics": {name: value}}.

    Reads the long format (one row per metric: ID, Kernel Name, Metric Name, Metric Value) and the
    wide "raw" page (one row per launch, a column per metric, then a row of units).
    """
    start = text.find('"ID"')
    if start < 0:
        return []
    rows = list(csv.reader(io.StringIO(text[start:])))
    header = rows[0]
    launches: dict[str, dict[str, Any]] = {}
    if "Metric Name" in header and "Metric Value" in header:
        i_id, i_kernel = header.index("ID"), header.index("Kernel Name")
        i_name, i_value = header.index("Metric Name"), header.index("Metric Value")
        for row in rows[1:]:
            if len(row) <= max(i_id, i_kernel, i_name, i_value):
                continue
            entry = launches.setdefault(row[i_id], {"id": int(row[i_id]), "kernel": row[i_kernel], "metrics": {}})
            value = _number(row[i_value])
            if value is not None:
                entry["metrics"][row[i_name]] = value
    else:
        i_id, i_kernel = header.index("ID"), header.index("Kernel Name")
        for row in rows[1:]:
            if len(row) != len(header) or not row[i_id].strip().isdigit():
                continue  # the units row
            entry = {"id": int(row[i_id]), "kernel": row[i_kernel], "metrics": {}}
            for name, cell in zip(header, row):
                value = _number(cell) if "__" in name else None
                if value is not None:
                    entry["metrics"][name] = value
            launches[row[i_id]] = entry
    return sorted(launches.values(), key=lambda e: e["id"])


# "at KERNEL+0xOFFSET in FILE:LINE" (compute-sanitizer 2024 and later) or "... in FILE:LINE:KERNEL"
_LOCATION = re.compile(r"\bat (?P<at>[A-Za-z_]\w*)\+0x[0-9a-fA-F]+ in (?P<file>[^\s:]+):(?P<line>\d+)(?::(?P<func>[A-Za-z_]\w*))?")
_SUMMARY = re.compile(r"RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")


def parse_racecheck(text: str) -> dict[str, dict[str, Any]]:
    """Per kernel: the hazards racecheck displayed, their severity and the pairs of source lines.

    Reads both report formats: "Race reported between Write access at KERNEL+0x.. in FILE:LINE and
    Read access at ..." (analysis) and "Potential RAW hazard detected ... / Write Thread (..) at
    KERNEL+0x.. in FILE:LINE / Read Thread ..." (hazard). racecheck displays at most 100 hazards
    per process; racecheck_summary() reads the totals.
    """
    found: dict[str, dict[str, Any]] = {}
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.search(r"(Error|Warning|Info|ERROR|WARNING|INFO)\b.*?(Race reported between|Potential (\w+) hazard)",
                      line)
        if not m:
            continue
        severity = m.group(1).lower()
        locations = list(_LOCATION.finditer(" ".join(lines[i:i + 3])))
        kernel = (locations[0].group("func") or locations[0].group("at")) if locations else "?"
        entry = found.setdefault(kernel, {"hazards": 0, "severities": [], "line_pairs": []})
        entry["hazards"] += 1
        if severity not in entry["severities"]:
            entry["severities"].append(severity)
        if len(locations) >= 2:
            pair = sorted([int(locations[0].group("line")), int(locations[1].group("line"))])
            if pair not in entry["line_pairs"]:
                entry["line_pairs"].append(pair)
    return found


def racecheck_summary(text: str) -> tuple[int, int] | None:
    """(errors, warnings) from racecheck's summary line, or None when it printed none."""
    m = _SUMMARY.search(text)
    return (int(m.group(2)), int(m.group(3))) if m else None


# --------------------------------------------------------------------------------------------------
# The child: launch the kernels on the GPU (run under ncu or compute-sanitizer)
# --------------------------------------------------------------------------------------------------

def child_launch(names: list[str], races: bool) -> int:
    os.environ["COURSE_BACKEND"] = "cupy"
    import cupy as cp

    import kernels

    manifest = []
    for name in names:
        try:
            if races:
                k = next(r for r in testset.RACE_SET if r.name == name)
                source, expression = k.source, k.name
            else:
                k = testset.by_name(name)
                source, expression = k.source, k.kernel
            launch = testset.launch_of(k)
            kernel = kernels.load_kernel(source, expression, options=("-lineinfo",))
            args = tuple(cp.asarray(a) if hasattr(a, "shape") and getattr(a, "ndim", 0) else a for a in launch.args)
            kernel(launch.grid, launch.block, args, shared_mem=launch.shared_mem)
            cp.cuda.runtime.deviceSynchronize()
            manifest.append(name)
        except Exception as exc:  # one kernel failing must not stop the others
            log(f"child: {name} failed on the GPU: {type(exc).__name__}: {exc}")
    print("MANIFEST " + json.dumps(manifest), flush=True)
    return 0


# --------------------------------------------------------------------------------------------------
# The parent
# --------------------------------------------------------------------------------------------------

def cpu_side(names: list[str]) -> dict[str, dict[str, Any]]:
    """Our analysis of every test-set kernel (CPU backend)."""
    ours = {}
    for name in names:
        k = testset.by_name(name)
        try:
            report = testset.analyze_kernel(k)
            launch = testset.launch_of(k)
            ours[name] = {"source": k.source, "kernel": k.kernel, "what": k.what, "grid": list(launch.grid),
                          "block": list(launch.block), "shared_mem": launch.shared_mem,
                          "metrics": {m: v for m, v in report.metrics().items() if m in testset.RULES}}
        except Exception as exc:
            log(f"analysis of {name} failed: {type(exc).__name__}: {exc}")
    return ours


def cpu_races() -> dict[str, dict[str, Any]]:
    out = {}
    for k in testset.RACE_SET:
        entry: dict[str, Any] = {"shared": k.shared, "expected_racy": k.racy}
        for fences in ("syncwarp", "collectives"):
            try:
                races = testset.analyze_kernel(k, warp_fences=fences).races
                entry[fences] = {"racy": bool(races),
                                 "line_pairs": sorted({tuple(sorted(r.lines)) for r in races})}
            except Exception as exc:
                log(f"race analysis of {k.name} failed: {type(exc).__name__}: {exc}")
        out[k.name] = entry
    return out


def _run(cmd: list[str], timeout: float) -> tuple[int, str, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
        return done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as exc:
        partial = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return -1, partial, f"timed out after {timeout:.0f} s"
    except OSError as exc:
        return -1, "", str(exc)


def _manifest(stdout: str) -> list[str]:
    m = re.search(r"^MANIFEST (.*)$", stdout, re.M)
    return json.loads(m.group(1)) if m else []


def kernel_regex(names: list[str]) -> str:
    """ncu's -k filter for the kernels of these test-set entries (a prefix: template instances carry
    their arguments in the name)."""
    bases = sorted({testset.by_name(n).kernel.split("<")[0] for n in names})
    return "^(" + "|".join(bases) + ")"


def profile(ncu: str, metrics: list[str], names: list[str]) -> dict[str, dict[str, float]]:
    """ncu's numbers per test-set kernel: one session for all, then one per kernel that is missing."""
    regex = kernel_regex
    measured: dict[str, dict[str, float]] = {}
    code, out, err = _run(ncu_command(ncu, metrics, regex(names), child_command("--child", names)), PROFILE_TIMEOUT_S)
    launched, launches = _manifest(out), parse_ncu_csv(out)
    if code == 0 and len(launched) == len(launches):
        measured.update({name: e["metrics"] for name, e in zip(launched, launches)})
    else:
        log(f"the profiling session returned {code} with {len(launches)} profiled launches for {len(launched)} "
            f"kernels launched; profiling one kernel at a time. {err.strip()[-400:]}")
    for name in names:
        if name in measured:
            continue
        code, out, err = _run(ncu_command(ncu, metrics, regex([name]), child_command("--child", [name])),
                              SINGLE_TIMEOUT_S)
        launches = parse_ncu_csv(out)
        if launches:
            measured[name] = launches[-1]["metrics"]
        else:
            log(f"ncu gave nothing for {name} (exit {code}): {err.strip()[-400:]}")
    return measured


def racecheck(sanitizer: str) -> tuple[dict[str, dict[str, Any]], str]:
    """Run each race kernel in its own racecheck process: racecheck displays only the first 100
    hazards of a process, so one process for all kernels would show only the first racy one."""
    found: dict[str, dict[str, Any]] = {}
    texts = []
    for name in [k.name for k in testset.RACE_SET]:
        code, out, err = _run(racecheck_command(sanitizer, child_command("--child-races", [name])), RACECHECK_TIMEOUT_S)
        text = out + "\n" + err
        texts.append(f"##### {name}\n{text}")
        totals = racecheck_summary(text)
        entry: dict[str, Any] = {"hazards": 0, "severities": [], "line_pairs": [], "failed": totals is None}
        for seen in parse_racecheck(text).values():
            entry["hazards"] += seen["hazards"]
            entry["severities"] += [s for s in seen["severities"] if s not in entry["severities"]]
            entry["line_pairs"] += [p for p in seen["line_pairs"] if p not in entry["line_pairs"]]
        if totals is None:
            log(f"racecheck printed no summary for {name} (exit {code}): {err.strip()[-400:]}")
        else:
            entry["errors"], entry["warnings"] = totals
        found[name] = entry
    return found, "\n".join(texts)


def compare(ours: dict[str, dict[str, Any]], measured: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    rows = []
    for name, entry in ours.items():
        k = testset.by_name(name)
        got = measured.get(name)
        for metric, value in entry["metrics"].items():
            ncu_name = NCU_METRICS[metric]
            theirs = None if got is None else got.get(ncu_name)
            rows.append({"kernel": name, "metric": metric, "ncu_metric": ncu_name, "ncu": theirs, "ours": value,
                         "informational": metric in k.informational,
                         "match": None if theirs is None else testset.matches(metric, value, theirs)})
    return rows


def race_rows(ours: dict[str, dict[str, Any]], sanitizer: dict[str, dict[str, Any]] | None) -> list[dict[str, Any]]:
    rows = []
    for name, entry in ours.items():
        seen = None if sanitizer is None else sanitizer.get(name)
        if sanitizer is None or (seen is not None and seen.get("failed")):
            rc_racy = None
        else:
            rc_racy = bool(seen) and (seen.get("errors", 0) + seen.get("warnings", 0) > 0
                                      or any(s in ("error", "warning") for s in seen["severities"]))
        row = {"kernel": name, "shared": entry["shared"], "expected": entry["expected_racy"], "racecheck": rc_racy,
               "racecheck_severities": seen["severities"] if seen else [],
               "racecheck_line_pairs": seen["line_pairs"] if seen else []}
        for fences in ("syncwarp", "collectives"):
            row[f"ours_{fences}"] = entry.get(fences, {}).get("racy")
            row[f"ours_{fences}_line_pairs"] = [list(p) for p in entry.get(fences, {}).get("line_pairs", [])]
        rows.append(row)
    return rows


def agreeing_fences(rows: list[dict[str, Any]]) -> str | None:
    """The warp-synchronisation rule under which our verdicts equal racecheck's on every shared-memory kernel."""
    for fences in ("syncwarp", "collectives"):
        relevant = [r for r in rows if r["shared"] and r["racecheck"] is not None]
        if relevant and all(r[f"ours_{fences}"] == r["racecheck"] for r in relevant):
            return fences
    return None


def markdown(gpu: str, rows: list[dict[str, Any]], races: list[dict[str, Any]], fences: str | None) -> str:
    out = [f"# kernels.analyze against Nsight Compute and racecheck ({gpu})", "",
           "| kernel | metric | ncu | ours | match |", "|---|---|---:|---:|---|"]
    for r in rows:
        mark = "n/a" if r["match"] is None else ("yes" if r["match"] else "NO")
        if r["informational"] and r["match"] is False:
            mark = "differs (compiler-dependent)"
        ncu = "" if r["ncu"] is None else f"{r['ncu']:.0f}"
        out.append(f"| {r['kernel']} | {r['metric']} | {ncu} | {r['ours']} | {mark} |")
    out += ["", "| race kernel | shared | expected | racecheck | ours (__syncwarp only) | ours (any collective) |",
            "|---|---|---|---|---|---|"]
    for r in races:
        rc = "n/a" if r["racecheck"] is None else ("race" if r["racecheck"] else "none")
        out.append(f"| {r['kernel']} | {r['shared']} | {'race' if r['expected'] else 'none'} | {rc} "
                   f"| {'race' if r['ours_syncwarp'] else 'none'} | {'race' if r['ours_collectives'] else 'none'} |")
    out += ["", f"Warp rule that agrees with racecheck: {fences or 'neither (see the table)'}", ""]
    return "\n".join(out)


def gpu_description() -> dict[str, Any]:
    import cupy as cp

    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props.get("name", b"?")
    return {"gpu": name.decode() if isinstance(name, bytes) else str(name),
            "compute_capability": f"{props['major']}.{props['minor']}",
            "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(), "cuda_driver": cp.cuda.runtime.driverGetVersion(),
            "cupy": cp.__version__}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("--child", "--child-races"):
        names = argv[1].split(",") if len(argv) > 1 and argv[1] else []
        return child_launch(names, races=argv[0] == "--child-races")
    parser = argparse.ArgumentParser(prog="python benchmarks/ncu_validate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for ncu_h100.json, comparison.md and comparison.json")
    parser.add_argument("--dry-run", action="store_true", help="the CPU analysis and the command lines only (no GPU)")
    parser.add_argument("--kernels", default="", help="comma-separated test-set names (default: all)")
    parser.add_argument("--ncu", default=None, help="path of ncu (default: PATH, /usr/local/cuda/bin, /opt/nvidia)")
    parser.add_argument("--sanitizer", default=None, help="path of compute-sanitizer")
    args = parser.parse_args(argv)
    started = time.monotonic()
    names = [n for n in args.kernels.split(",") if n] or [k.name for k in testset.TEST_SET]
    try:
        for n in names:
            testset.by_name(n)
    except KeyError as exc:
        log(str(exc.args[0]))
        return 2
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    ncu = find_tool("ncu", args.ncu)
    sanitizer = find_tool("compute-sanitizer", args.sanitizer)
    if not args.dry_run:
        problems = []
        try:
            gpu = gpu_description()
        except Exception as exc:
            gpu = {}
            problems.append(f"no CUDA GPU through CuPy ({type(exc).__name__}: {exc})")
        if ncu is None:
            problems.append("ncu was not found (PATH, /usr/local/cuda/bin, /opt/nvidia/nsight-compute/*/); pass --ncu")
        if problems:
            log("ncu_validate needs a CUDA GPU: " + "; ".join(problems) + ". Use --dry-run to check the CPU side.")
            return 1
    else:
        gpu = {"gpu": None}

    log(f"analysing {len(names)} launches on the CPU backend ...")
    ours = cpu_side(names)
    our_races = cpu_races()
    metrics = metric_list(available_metrics(ncu) if (ncu and not args.dry_run) else None)
    profile_cmd = ncu_command(ncu or "ncu", metrics, kernel_regex(names), child_command("--child", names))
    race_cmd = racecheck_command(sanitizer or "compute-sanitizer",
                                 child_command("--child-races", [k.name for k in testset.RACE_SET]))
    if args.dry_run:
        print("ncu command (one session for all kernels):")
        print("  " + shlex.join(profile_cmd))
        print("compute-sanitizer command (run once per race kernel; shown for all):")
        print("  " + shlex.join(race_cmd))
        measured: dict[str, dict[str, float]] = {}
        rc_found = None
        rc_text = ""
    else:
        log(f"profiling on {gpu.get('gpu')} with {ncu} ...")
        measured = profile(ncu, metrics, list(ours))
        rc_found, rc_text = (racecheck(sanitizer) if sanitizer else (None, ""))
        if sanitizer is None:
            log("compute-sanitizer was not found: the races are not compared (pass --sanitizer)")
    rows = compare(ours, measured)
    races = race_rows(our_races, rc_found)
    fences = agreeing_fences(races)
    recorded = {
        "schema": 1, "source": "dry-run" if args.dry_run else "ncu", **gpu,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tools": {"ncu": tool_version(ncu) if not args.dry_run else "", "compute-sanitizer":
                  tool_version(sanitizer) if not args.dry_run else ""},
        "warp_fences": fences,
        "kernels": {name: {**{k: v for k, v in entry.items() if k != "metrics"},
                           "metrics": {m: int(round(measured[name][NCU_METRICS[m]]))
                                       for m in entry["metrics"] if NCU_METRICS[m] in measured.get(name, {})},
                           "ncu_raw": measured.get(name, {})}
                    for name, entry in ours.items()},
        "races": {r["kernel"]: {"racy": r["racecheck"] if (r["shared"] and r["racecheck"] is not None) else r["expected"],
                                "shared": r["shared"], "racecheck_severities": r["racecheck_severities"],
                                "racecheck_line_pairs": r["racecheck_line_pairs"]} for r in races},
    }
    (out_dir / "ncu_h100.json").write_text(json.dumps(recorded, indent=1) + "\n", encoding="utf-8")
    (out_dir / "comparison.json").write_text(json.dumps({"metrics": rows, "races": races}, indent=1) + "\n",
                                             encoding="utf-8")
    table = markdown(f"{gpu.get('gpu') or 'dry run, no GPU'}, {recorded['date'][:10]}", rows, races, fences)
    (out_dir / "comparison.md").write_text(table, encoding="utf-8")
    if rc_text:
        (out_dir / "racecheck.txt").write_text(rc_text, encoding="utf-8")
    print(table)
    required = [r for r in rows if r["match"] is not None and not r["informational"]]
    failed = [r for r in required if not r["match"]]
    log(f"{len(required) - len(failed)} of {len(required)} compared metrics match; "
        f"{time.monotonic() - started:.0f} s; results in {out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
