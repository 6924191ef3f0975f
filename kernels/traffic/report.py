"""What ``kernels.analyze`` returns: the memory traffic of one launch, per kernel and per source line.

The numbers are those Nsight Compute reports for the same launch (see ``metrics()`` for the names):
global load and store requests (warp-level instructions) with the 32-byte sectors and 128-byte lines
they touch, bytes asked for against bytes moved; shared-memory requests with their wavefronts and
bank conflicts; and, beyond a profiler, the data races between the threads of a block and how
many reads and writes every thread made. Everything comes from one run on the CPU backend, so there
are no cache hit rates and no timings: the model counts what the hardware is asked to do, not how
long it takes.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..cpu import abi
from .banks import BankTraffic, bank_traffic
from .lines import Site
from .races import Race, find_races
from .record import Recording
from .requests import ATOMIC, LOAD, OP_NAMES, STORE, GlobalTraffic, Requests, global_traffic, warp_requests

SPACE_NAMES = {abi.SPACE_GLOBAL: "global", abi.SPACE_SHARED: "shared", abi.SPACE_CONSTANT: "constant"}

#: A line is worth a sentence of advice when it takes this many times the sectors (or wavefronts) it needs.
ADVICE_RATIO = 1.5

#: Our names for the kernel totals, and the Nsight Compute metric each one corresponds to.
NCU_METRICS: dict[str, str] = {
    "global_load_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "global_load_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "global_store_requests": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "global_store_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "shared_load_requests": "smsp__inst_executed_op_shared_ld.sum",
    "shared_load_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "shared_load_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "shared_store_requests": "smsp__inst_executed_op_shared_st.sum",
    "shared_store_wavefronts": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "shared_store_bank_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
}


@dataclass(frozen=True)
class LineTraffic:
    """The requests of one source line, one memory space and one operation, added up."""

    site: Site
    space: str  # "global", "shared" or "constant"
    op: str  # "load", "store" or "atomic"
    names: str  # the arrays or variables it touched
    requests: int
    accesses: int  # lanes, summed over the requests
    sectors: int = 0
    lines: int = 0
    ideal_sectors: int = 0
    bytes_requested: int = 0
    bytes_unique: int = 0
    wavefronts: int = 0
    ideal_wavefronts: int = 0
    max_ways: int = 0
    distinct_words: int = 0  # constant memory: different addresses, summed over the requests
    lane_stride: int | None = None  # bytes between consecutive lanes in a typical request

    @property
    def bytes_moved(self) -> int:
        return self.sectors * 32

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal_sectors_per_request(self) -> float:
        return self.ideal_sectors / self.requests if self.requests else 0.0

    @property
    def lines_per_request(self) -> float:
        return self.lines / self.requests if self.requests else 0.0

    @property
    def efficiency(self) -> float:
        """Distinct bytes asked for / bytes moved (global memory)."""
        return self.bytes_unique / self.bytes_moved if self.bytes_moved else 0.0

    @property
    def wavefronts_per_request(self) -> float:
        return self.wavefronts / self.requests if self.requests else 0.0

    @property
    def ideal_wavefronts_per_request(self) -> float:
        return self.ideal_wavefronts / self.requests if self.requests else 0.0

    @property
    def bank_conflicts(self) -> int:
        """Wavefronts beyond the ideal (Nsight Compute's bank conflicts)."""
        return self.wavefronts - self.ideal_wavefronts

    @property
    def label(self) -> str:
        return f"{self.site.short} ({self.names}, {self.space} {self.op})"

    def advice(self) -> str | None:
        """One sentence when this line moves at least 1.5 times what it needs to, else None."""
        if self.space == "global" and self.requests:
            actual, ideal = self.sectors_per_request, self.ideal_sectors_per_request
            if actual >= ideal + 1 and actual >= ADVICE_RATIO * ideal:
                stride = f"; consecutive lanes are {self.lane_stride} bytes apart" if self.lane_stride else ""
                return (f"{self.site.short} ({self.names}, {self.op}): {actual:.3g} sectors per request where "
                        f"{ideal:.3g} suffice, {100 * self.efficiency:.0f} % of the bytes moved are used{stride}")
        if self.space == "shared" and self.requests and self.bank_conflicts > 0:
            actual, ideal = self.wavefronts_per_request, self.ideal_wavefronts_per_request
            if actual >= ADVICE_RATIO * ideal:
                return (f"{self.site.short} ({self.names}, {self.op}): {self.max_ways}-way bank conflict, "
                        f"{actual:.3g} wavefronts per request where {ideal:.3g} suffice")
        return None


def _lane_stride(acc: np.ndarray, members: np.ndarray) -> int | None:
    """The most common address difference between consecutive active lanes of one request."""
    if len(members) < 2:
        return None
    lanes = acc["thread"][members].astype(np.int64) & 31
    addrs = acc["addr"][members].astype(np.int64)
    o = np.argsort(lanes)
    dl = np.diff(lanes[o])
    da = np.diff(addrs[o])
    steps = da[dl == 1]
    if len(steps) == 0:
        return None
    values, counts = np.unique(steps, return_counts=True)
    return int(values[np.argmax(counts)])


class TrafficReport:
    """The memory traffic of one launch, recorded on the CPU backend (see the module docstring)."""

    def __init__(self, recording: Recording, *, warp_fences: str = "syncwarp"):
        self.recording = recording
        self.warp_fences = warp_fences

    # ----------------------------------------------------------------------------- the analysis
    @cached_property
    def requests(self) -> Requests:
        return warp_requests(self.recording.accesses)

    @cached_property
    def global_traffic(self) -> GlobalTraffic:
        return global_traffic(self.recording.accesses, self.requests, self.recording.gpu_addresses())

    @cached_property
    def bank_traffic(self) -> BankTraffic:
        return bank_traffic(self.recording.accesses, self.requests)

    @cached_property
    def races(self) -> list[Race]:
        """Data races between threads of a block (shared and global memory)."""
        return find_races(self.recording, warp_fences=self.warp_fences)

    @cached_property
    def _request_names(self) -> list[str]:
        rec, acc, req = self.recording, self.recording.accesses, self.requests
        heads = req.order[req.starts[:-1]]
        names = []
        for i in heads:
            space = int(acc["space"][i])
            if space == abi.SPACE_SHARED:
                names.append(rec.shared_name(int(acc["addr"][i]))[0])
            else:
                r = int(acc["range"][i])
                names.append(rec.ranges[r].name if r < len(rec.ranges) else "?")
        return names

    @cached_property
    def lines(self) -> list[LineTraffic]:
        """Per source line, memory space and operation: the requests added up, in source order."""
        rec, req = self.recording, self.requests
        acc = rec.accesses
        if len(req) == 0:
            return []
        gt, bt = self.global_traffic, self.bank_traffic
        sites = [rec.site(int(pc)) for pc in req.pc]
        names = self._request_names
        groups: dict[tuple[Site, int, int, str], list[int]] = {}
        for r, (site, space, op) in enumerate(zip(sites, req.space.tolist(), req.op.tolist())):
            groups.setdefault((site, space, op, names[r]), []).append(r)
        distinct_words = self._constant_distinct_words()
        rows = []
        for (site, space, op, name), members in groups.items():
            m = np.asarray(members)
            busiest = members[int(np.argmax(req.lanes[m]))]
            rows.append(LineTraffic(
                site=site, space=SPACE_NAMES.get(space, "?"), op=OP_NAMES[op],
                names=name, requests=len(members),
                accesses=int(req.lanes[m].sum()), sectors=int(gt.sectors[m].sum()), lines=int(gt.lines[m].sum()),
                ideal_sectors=int(gt.ideal_sectors[m].sum()), bytes_requested=int(gt.bytes_requested[m].sum()),
                bytes_unique=int(gt.bytes_unique[m].sum()), wavefronts=int(bt.wavefronts[m].sum()),
                ideal_wavefronts=int(bt.ideal[m].sum()), max_ways=int(bt.ways[m].max()),
                distinct_words=int(distinct_words[m].sum()),
                lane_stride=_lane_stride(acc, req.members(busiest))))
        order = {"global": 0, "shared": 1, "constant": 2}
        rows.sort(key=lambda r: (r.site, order.get(r.space, 3), OP_NAMES.index(r.op), r.names))
        return rows

    def _constant_distinct_words(self) -> np.ndarray:
        """Per request, the different 4-byte words its lanes read (the constant cache's passes)."""
        req, acc = self.requests, self.recording.accesses
        member = req.instance >= 0
        owner = req.instance[member]
        word = acc["addr"][member].astype(np.int64) >> 2
        if len(owner) == 0:
            return np.zeros(len(req), dtype=np.int64)
        o = np.lexsort((word, owner))
        new = np.ones(len(o), dtype=bool)
        new[1:] = (owner[o][1:] != owner[o][:-1]) | (word[o][1:] != word[o][:-1])
        return np.bincount(owner[o][new], minlength=len(req))

    # ----------------------------------------------------------------------------- kernel totals
    def metrics(self) -> dict[str, int]:
        """Kernel totals under the names of ``NCU_METRICS`` (plus atomics and constant loads)."""
        req, gt, bt = self.requests, self.global_traffic, self.bank_traffic
        out: dict[str, int] = {}
        for space, sname in ((abi.SPACE_GLOBAL, "global"), (abi.SPACE_SHARED, "shared")):
            for op, oname in ((LOAD, "load"), (STORE, "store"), (ATOMIC, "atomic")):
                m = (req.space == space) & (req.op == op)
                out[f"{sname}_{oname}_requests"] = int(m.sum())
                if sname == "global":
                    out[f"{sname}_{oname}_sectors"] = int(gt.sectors[m].sum())
                else:
                    out[f"{sname}_{oname}_wavefronts"] = int(bt.wavefronts[m].sum())
                    out[f"{sname}_{oname}_bank_conflicts"] = int(bt.excess[m].sum())
        m = req.space == abi.SPACE_CONSTANT
        out["constant_load_requests"] = int(m.sum())
        out["constant_load_distinct_words"] = int(self._constant_distinct_words()[m].sum())
        return out

    def thread_counts(self) -> dict[str, np.ndarray]:
        """Accesses per thread, as arrays of shape (blocks, threads per block): reads and writes of
        global and shared memory (an atomic counts as both)."""
        rec = self.recording
        acc = rec.accesses
        nb, nt = rec.blocks, rec.threads_per_block
        flat = acc["block"].astype(np.int64) * nt + acc["thread"].astype(np.int64)
        write = (acc["flags"] & abi.ACCESS_WRITE) != 0
        atomic = (acc["flags"] & abi.ACCESS_ATOMIC) != 0
        from .requests import access_ops

        _op, tail = access_ops(acc)
        out = {}
        for space, name in ((abi.SPACE_GLOBAL, "global"), (abi.SPACE_SHARED, "shared")):
            s = acc["space"] == space
            reads = s & ((~write) | atomic) & ~tail
            writes = s & write
            out[f"{name}_reads"] = np.bincount(flat[reads], minlength=nb * nt).reshape(nb, nt)
            out[f"{name}_writes"] = np.bincount(flat[writes], minlength=nb * nt).reshape(nb, nt)
        return out

    def advice(self) -> list[str]:
        """Sentences for the lines that move more than they need, then the races."""
        hints = [a for a in (line.advice() for line in self.lines) if a]
        return hints + [str(r) for r in self.races]

    # ----------------------------------------------------------------------------- text and HTML
    @property
    def title(self) -> str:
        rec = self.recording
        return (f"{rec.kernel} ({rec.filename}): grid {rec.grid} x block {rec.block}"
                + (f", {rec.shared_mem} bytes of dynamic shared memory" if rec.shared_mem else ""))

    def summary(self) -> str:
        """A few lines: totals per memory space, races, accesses per thread."""
        m = self.metrics()
        out = [self.title + ", recorded on the CPU backend"]
        for op in ("load", "store", "atomic"):
            n = m[f"global_{op}_requests"]
            if n:
                line = f"global {op}s: {n:,} requests"
                if op != "atomic":
                    sectors = m[f"global_{op}_sectors"]
                    ideal = sum(r.ideal_sectors for r in self.lines if r.space == "global" and r.op == op)
                    line += (f", {sectors:,} sectors ({sectors / n:.3g} per request; {ideal / n:.3g} would do), "
                             f"{32 * sectors:,} bytes moved")
                out.append(line)
        for op in ("load", "store", "atomic"):
            n = m[f"shared_{op}_requests"]
            if n:
                w, c = m[f"shared_{op}_wavefronts"], m[f"shared_{op}_bank_conflicts"]
                out.append(f"shared {op}s: {n:,} requests, {w:,} wavefronts ({w / n:.3g} per request), "
                           f"{c:,} bank conflicts (wavefronts beyond the ideal)")
        if m["constant_load_requests"]:
            n, d = m["constant_load_requests"], m["constant_load_distinct_words"]
            out.append(f"constant loads: {n:,} requests, {d / n:.3g} different addresses per request "
                       f"(the constant cache serves one per pass)")
        races = self.races
        out.append(f"races: {len(races)} found" + (":" if races else " (shared and global memory, within each block)"))
        out += [f"  {r}" for r in races[:8]]
        if len(races) > 8:
            out.append(f"  ... and {len(races) - 8} more")
        counts = self.thread_counts()
        per = ", ".join(f"{k.replace('_', ' ')} {v.mean():.3g}" for k, v in counts.items() if v.any())
        if per:
            out.append(f"per thread (mean): {per}")
        hints = [a for a in (line.advice() for line in self.lines) if a]
        if hints:
            out.append("worth a look:")
            out += [f"  {h}" for h in hints]
        return "\n".join(out)

    def table(self, space: str | None = None) -> list[dict[str, Any]]:
        """The per-line numbers as a list of dicts (one per source line, space and operation)."""
        rows = []
        for r in self.lines:
            if space is not None and r.space != space:
                continue
            row: dict[str, Any] = {"line": r.site.line, "file": r.site.file, "function": r.site.function,
                                   "space": r.space, "op": r.op, "names": r.names, "requests": r.requests}
            if r.space == "global":
                row.update({"sectors": r.sectors, "sectors_per_request": round(r.sectors_per_request, 3),
                            "ideal_sectors_per_request": round(r.ideal_sectors_per_request, 3),
                            "lines_per_request": round(r.lines_per_request, 3),
                            "bytes_requested": r.bytes_requested, "bytes_moved": r.bytes_moved,
                            "efficiency": round(r.efficiency, 4)})
            elif r.space == "shared":
                row.update({"wavefronts": r.wavefronts, "wavefronts_per_request": round(r.wavefronts_per_request, 3),
                            "ideal_wavefronts_per_request": round(r.ideal_wavefronts_per_request, 3),
                            "bank_conflicts": r.bank_conflicts, "max_ways": r.max_ways})
            else:
                row.update({"distinct_words_per_request": round(r.distinct_words / max(r.requests, 1), 3)})
            rows.append(row)
        return rows

    def __str__(self) -> str:
        out = [self.summary(), ""]
        g = [r for r in self.lines if r.space == "global"]
        if g:
            out.append(f"{'global memory':34s} {'requests':>9s} {'sectors/req':>11s} {'ideal':>6s} {'lines/req':>9s} "
                       f"{'efficiency':>10s}")
            for r in g:
                out.append(f"{r.label[:34]:34s} {r.requests:9,d} {r.sectors_per_request:11.3g} "
                           f"{r.ideal_sectors_per_request:6.3g} {r.lines_per_request:9.3g} {100 * r.efficiency:9.0f}%")
        s = [r for r in self.lines if r.space == "shared"]
        if s:
            out.append(f"{'shared memory':34s} {'requests':>9s} {'wavefr/req':>11s} {'ideal':>6s} {'ways':>9s} "
                       f"{'conflicts':>10s}")
            for r in s:
                out.append(f"{r.label[:34]:34s} {r.requests:9,d} {r.wavefronts_per_request:11.3g} "
                           f"{r.ideal_wavefronts_per_request:6.3g} {r.max_ways:9d} {r.bank_conflicts:10,d}")
        return "\n".join(out)

    def __repr__(self) -> str:
        return f"<TrafficReport {self.recording.kernel}: {len(self.recording.accesses):,} accesses>"

    def _repr_html_(self) -> str:
        esc = html.escape
        parts = [f"<div><b>{esc(self.title)}</b> <span style='font-size:smaller;color:gray'>"
                 f"(recorded on the CPU backend: what the hardware is asked to do, not how long it takes)</span></div>"]
        g = [r for r in self.lines if r.space == "global"]
        if g:
            rows = "".join(
                f"<tr><td>{r.site.line}</td><td><code>{esc(r.names)}</code></td><td>{r.op}</td><td>{r.requests:,}</td>"
                f"<td>{r.sectors_per_request:.3g}</td><td>{r.ideal_sectors_per_request:.3g}</td>"
                f"<td>{r.lines_per_request:.3g}</td><td>{r.bytes_requested:,}</td><td>{r.bytes_moved:,}</td>"
                f"<td>{100 * r.efficiency:.0f} %</td></tr>" for r in g)
            parts.append("<table><tr><th>line</th><th>global</th><th>op</th><th>requests</th><th>sectors/request</th>"
                         "<th>ideal</th><th>lines/request</th><th>bytes requested</th><th>bytes moved</th>"
                         f"<th>efficiency</th></tr>{rows}</table>")
        s = [r for r in self.lines if r.space == "shared"]
        if s:
            rows = "".join(
                f"<tr><td>{r.site.line}</td><td><code>{esc(r.names)}</code></td><td>{r.op}</td><td>{r.requests:,}</td>"
                f"<td>{r.wavefronts_per_request:.3g}</td><td>{r.ideal_wavefronts_per_request:.3g}</td>"
                f"<td>{r.max_ways}</td><td>{r.bank_conflicts:,}</td></tr>" for r in s)
            parts.append("<table><tr><th>line</th><th>shared</th><th>op</th><th>requests</th>"
                         "<th>wavefronts/request</th><th>ideal</th><th>worst ways</th><th>bank conflicts</th></tr>"
                         f"{rows}</table>")
        races = self.races
        if races:
            items = "".join(f"<li>{esc(str(r))}</li>" for r in races[:8])
            parts.append(f"<p style='color:crimson'><b>{len(races)} race{'s' if len(races) != 1 else ''}</b></p>"
                         f"<ul>{items}</ul>")
        else:
            parts.append("<p>No data races between the threads of a block.</p>")
        hints = [a for a in (line.advice() for line in self.lines) if a]
        if hints:
            parts.append("<ul>" + "".join(f"<li>{esc(h)}</li>" for h in hints) + "</ul>")
        return "\n".join(parts)

    def to_dict(self) -> dict[str, Any]:
        rec = self.recording
        return {"kernel": rec.kernel, "file": rec.filename, "grid": list(rec.grid), "block": list(rec.block),
                "shared_mem": rec.shared_mem, "metrics": self.metrics(), "lines": self.table(),
                "races": [{"kind": r.kind, "space": r.space, "lines": list(r.lines), "same_warp": r.same_warp,
                           "text": str(r)} for r in self.races]}

    # ----------------------------------------------------------------------------- pictures
    def request(self, line: int | None = None, *, space: str = "global", op: str | None = None,
                array: str | None = None, index: int = 0) -> int:
        """The id of the ``index``-th request (warp 0 of block 0 first) of a source line, operation and
        array; by default of the busiest line of the memory space."""
        candidates = [r for r in self.lines if r.space == space and (op is None or r.op == op)
                      and (line is None or r.site.line == line) and (array is None or r.names == array)]
        if not candidates:
            have = ", ".join(f"{r.site.short} {r.names} {r.space} {r.op}" for r in self.lines) or "no accesses"
            wanted = " ".join(w for w in (space, array, op) if w)
            where = f" on line {line}" if line is not None else ""
            raise ValueError(f"no {wanted} requests{where}; this launch has: {have}")
        target = candidates[0] if line is not None else max(candidates, key=lambda r: r.requests)
        req = self.requests
        code = {"global": abi.SPACE_GLOBAL, "shared": abi.SPACE_SHARED, "constant": abi.SPACE_CONSTANT}[space]
        same = np.array([self.recording.site(int(pc)) == target.site and name == target.names
                         for pc, name in zip(req.pc, self._request_names)], dtype=bool)
        ids = np.flatnonzero(same & (req.space == code) & (req.op == OP_NAMES.index(target.op)))
        ids = ids[np.lexsort((req.first[ids], req.warp[ids], req.block[ids]))]
        if not 0 <= index < len(ids):
            raise ValueError(f"{target.label} has {len(ids)} requests; index must be 0 to {len(ids) - 1}")
        return int(ids[index])

    def plot_warp(self, line: int | None = None, *, op: str | None = None, array: str | None = None,
                  index: int = 0, ax: Any = None) -> Any:
        """One warp's global request: its lanes' bytes laid over 32-byte sectors and 128-byte lines."""
        from .plots import warp_sectors

        return warp_sectors(self, self.request(line, space="global", op=op, array=array, index=index), ax=ax)

    def plot_banks(self, line: int | None = None, *, op: str | None = None, array: str | None = None,
                   index: int = 0, ax: Any = None) -> Any:
        """One warp's shared-memory request as a lane-by-bank grid."""
        from .plots import bank_grid

        return bank_grid(self, self.request(line, space="shared", op=op, array=array, index=index), ax=ax)

    def plot_sectors(self, ax: Any = None) -> Any:
        """Heat map: how many requests of each global line touched 1, 2, ... 32 sectors."""
        from .plots import sectors_heatmap

        return sectors_heatmap(self, ax=ax)

    def plot_threads(self, arrays: str | list[str] | None = None, *, block: int | tuple[int, ...] = 0,
                     max_cells: int = 4096) -> Any:
        """Which thread read and which wrote each element of the argument arrays, for one block of a
        small launch (all arrays by default)."""
        from .plots import thread_map

        return thread_map(self, arrays, block=block, max_cells=max_cells)
