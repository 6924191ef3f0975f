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
import threading
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


class Limited:
    """A running process under the limits: a watchdog thread kills its whole process group after
    ``timeout`` seconds or above ``memory_mb`` of resident memory, while the caller talks to it."""

    def __init__(self, argv: list[str], *, timeout: float, memory_mb: int | None = None, address_space: bool = False,
                 env: dict[str, str] | None = None, cwd: str | Path | None = None, file_mb: int = 512,
                 pass_fds: tuple[int, ...] = ()):
        self._tmp = tempfile.TemporaryDirectory(prefix="grade-io-")
        self.out_path, self.err_path = Path(self._tmp.name) / "stdout", Path(self._tmp.name) / "stderr"
        self.timeout, self.memory_mb = timeout, memory_mb
        self.outcome = ProcessOutcome(None)
        self._peak = 0
        with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
            self.start = time.monotonic()
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, cwd=cwd,
                                         start_new_session=True, pass_fds=pass_fds)
        _limit(self.proc.pid, memory_mb, address_space, file_mb)
        self._stop = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, daemon=True)
        self._watchdog.start()

    @property
    def deadline(self) -> float:
        return self.start + self.timeout

    def _watch(self) -> None:
        while not self._stop.is_set() and self.proc.poll() is None:
            if time.monotonic() - self.start > self.timeout:
                self.outcome.timed_out = True
                self.kill()
                return
            if self.memory_mb:
                rss = _group_rss_kb(self.proc.pid)
                self._peak = max(self._peak, rss)
                if rss > self.memory_mb * 1024:
                    self.outcome.memory_exceeded = True
                    self.kill()
                    return
            self._stop.wait(POLL_SECONDS)

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def finish(self, wait: float = 10.0) -> ProcessOutcome:
        """Wait for the process (killing it after ``wait`` seconds), kill what it left, and report."""
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.kill()
        outcome = self.outcome
        outcome.returncode = self.proc.wait()
        self._stop.set()
        self._watchdog.join()
        self.kill()  # anything the child left behind in its group
        outcome.seconds = time.monotonic() - self.start
        outcome.peak_rss_mb = self._peak / 1024
        outcome.stdout, outcome.stderr = _tail(self.out_path), _tail(self.err_path)
        self._tmp.cleanup()
        if "MemoryError" in outcome.stderr or "std::bad_alloc" in outcome.stderr or "out of memory" in outcome.stderr.lower():
            outcome.memory_exceeded = outcome.memory_exceeded or outcome.returncode != 0
        return outcome


def run_limited(argv: list[str], *, timeout: float, memory_mb: int | None = None, address_space: bool = False,
                env: dict[str, str] | None = None, cwd: str | Path | None = None,
                file_mb: int = 512) -> ProcessOutcome:
    """Run ``argv``; kill its whole process group after ``timeout`` seconds or above ``memory_mb``."""
    limited = Limited(argv, timeout=timeout, memory_mb=memory_mb, address_space=address_space, env=env, cwd=cwd,
                      file_mb=file_mb)
    while limited.proc.poll() is None and not limited.outcome.timed_out and not limited.outcome.memory_exceeded:
        time.sleep(POLL_SECONDS)
    return limited.finish(wait=0.0 if limited.outcome.timed_out or limited.outcome.memory_exceeded else 10.0)
