"""Run a command in its own process group with a wall-clock limit, a memory limit and no core dumps.

The grader runs every submission this way, so that a kernel that hangs, crashes the process or
eats memory costs that submission its grade and nothing else. Memory is watched two ways: an
address-space limit (``RLIMIT_AS``) where it is safe (not for CUDA, which reserves huge virtual
ranges), and a watchdog that sums the resident memory of the process group and kills it when the
sum passes the limit.
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TAIL_CHARS = 4000
POLL_SECONDS = 0.05


@dataclass
class ProcessOutcome:
    returncode: int | None
    timed_out: bool = False
    memory_exceeded: bool = False
    peak_rss_mb: float = 0.0
    seconds: float = 0.0
    stdout: str = ""
    stderr: str = ""

    @property
    def signal(self) -> int | None:
        """The signal that ended the process, if one did (and not our own kill)."""
        if self.returncode is not None and self.returncode < 0:
            return -self.returncode
        return None

    @property
    def signal_name(self) -> str:
        sig = self.signal
        if sig is None:
            return ""
        try:
            return signal.Signals(sig).name
        except ValueError:
            return f"signal {sig}"

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.memory_exceeded


def _group_rss_kb(pgid: int) -> int:
    """Resident memory of every process in process group ``pgid`` (Linux /proc), in KB."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            fields = stat[stat.rfind(")") + 2:].split()
            if int(fields[2]) != pgid:  # field 5 of stat: the process group
                continue
            with open(f"/proc/{entry}/status", "rb") as f:
                for line in f.read().decode(errors="replace").splitlines():
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except (OSError, ValueError, IndexError):
            continue
    return total


def _limit(pid: int, memory_mb: int | None, address_space: bool, file_mb: int) -> None:
    """Resource limits of the running child (prlimit, so that no code runs between fork and exec)."""
    try:
        resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (file_mb << 20, file_mb << 20))
        if memory_mb and address_space:
            resource.prlimit(pid, resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
    except (ProcessLookupError, PermissionError, ValueError):
        pass  # the child is already gone, or the system refuses: the watchdog still applies


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError:
        return ""
    return data[-TAIL_CHARS:].decode("utf-8", errors="replace")


def run_limited(argv: list[str], *, timeout: float, memory_mb: int | None = None, address_space: bool = False,
                env: dict[str, str] | None = None, cwd: str | Path | None = None,
                file_mb: int = 512) -> ProcessOutcome:
    """Run ``argv``; kill its whole process group after ``timeout`` seconds or above ``memory_mb``."""
    with tempfile.TemporaryDirectory(prefix="grade-io-") as tmp:
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            start = time.monotonic()
            proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                    start_new_session=True)
            _limit(proc.pid, memory_mb, address_space, file_mb)
            outcome = ProcessOutcome(None)
            peak = 0
            while True:
                code = proc.poll()
                if code is not None:
                    break
                elapsed = time.monotonic() - start
                if elapsed > timeout:
                    outcome.timed_out = True
                    break
                if memory_mb:
                    rss = _group_rss_kb(proc.pid)
                    peak = max(peak, rss)
                    if rss > memory_mb * 1024:
                        outcome.memory_exceeded = True
                        break
                time.sleep(POLL_SECONDS)
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            outcome.returncode = proc.wait()
            try:  # anything the child left behind in its group
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            outcome.seconds = time.monotonic() - start
        outcome.peak_rss_mb = peak / 1024
        outcome.stdout, outcome.stderr = _tail(out_path), _tail(err_path)
    if "MemoryError" in outcome.stderr or "std::bad_alloc" in outcome.stderr or "out of memory" in outcome.stderr.lower():
        outcome.memory_exceeded = outcome.memory_exceeded or outcome.returncode != 0
    return outcome
