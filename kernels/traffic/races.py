"""Data races between the threads of a block, found in a recorded launch.

Two accesses race when they are made by different threads of one block, touch the same bytes, at
least one of them writes, they are not both atomic, and nothing orders them:

- ``__syncthreads()`` orders everything before it against everything after it, for the whole block
  (the trace records how many barriers had completed at every access);
- two lanes of the same warp are also ordered by a ``__syncwarp()`` (or a cooperative-groups tile's
  ``sync()``) that both took part in between the two accesses. Since Volta, lanes of a warp are not
  guaranteed to run in lockstep, so without such a fence same-warp accesses race as well; this is
  how compute-sanitizer's racecheck treats warp-synchronous code. Shuffles, votes and other warp
  collectives exchange registers but do not order memory (the CUDA Programming Guide guarantees
  memory ordering for ``__syncwarp()`` only): ``warp_fences="collectives"`` counts them as fences too.

Shared memory is checked within each block, global memory within each block as well (threads of
different blocks are never ordered by a barrier, and a kernel cannot wait for another block anyway;
such races are not reported). Every race is reported once per pair of source lines and kind, with
one example: the block, both threads, the element, and how many access pairs and addresses share
the same two lines.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cpu import abi
from .lines import Site
from .record import Recording
from .requests import _runs

READ, WRITE, ATOMIC = 0, 1, 2
KINDS = {"RAW": "read-after-write", "WAR": "write-after-read", "WAW": "write-after-write"}
FENCES = ("syncwarp", "collectives")
MAX_PAIRS = 4_000_000


@dataclass(frozen=True)
class RaceAccess:
    """One side of a race: where in the source, which thread, and what it did."""

    site: Site
    thread: tuple[int, int, int]
    write: bool
    atomic: bool

    @property
    def verb(self) -> str:
        return "atomically updates" if self.atomic else ("writes" if self.write else "reads")


@dataclass(frozen=True)
class Race:
    """A data race, as one example of all the access pairs between the same two source lines."""

    kind: str  # "RAW", "WAR" or "WAW": what the CPU ran first, then second
    space: str  # "shared" or "global"
    first: RaceAccess
    second: RaceAccess
    block: tuple[int, int, int]
    location: str
    same_warp: bool
    hazards: int
    locations: int

    @property
    def lines(self) -> tuple[int, int]:
        return self.first.site.line, self.second.site.line

    def __str__(self) -> str:
        # the writer first: which of the two the CPU happened to run first says nothing about a GPU
        a, b = (self.second, self.first) if self.kind == "WAR" else (self.first, self.second)
        fence = "__syncwarp() (or __syncthreads())" if self.same_warp else "__syncthreads()"
        warp = " of the same warp" if self.same_warp else ""
        more = ""
        if self.hazards > 1:
            more = (f" ({self.hazards} conflicting pairs of accesses at {self.locations} "
                    f"address{'es' if self.locations != 1 else ''} between these two lines)")
        return (f"{self.space} memory {self.location} in block {self.block}: thread {a.thread} {a.verb} it at "
                f"{a.site} and thread {b.thread}{warp} {b.verb} it at {b.site}, with no {fence} between "
                f"them{more}")


def _granule(acc: np.ndarray) -> int:
    """The largest power of two (up to 16) that divides every size and address: races are found per granule."""
    if len(acc) == 0:
        return 4
    g = 16
    sizes = acc["size"].astype(np.int64)
    addrs = acc["addr"].astype(np.int64)
    while g > 1 and (np.any(sizes % g) or np.any(addrs % g)):
        g //= 2
    return g


def find_races(rec: Recording, *, warp_fences: str = "syncwarp", max_pairs: int = MAX_PAIRS) -> list[Race]:
    """Every race of the launch, one entry per (space, first line, second line, kind, same warp or not).

    Candidate pairs are a write (or atomic) against every other access to the same bytes in the same
    barrier interval; past ``max_pairs`` of them (a whole grid writing one address) the rest of the
    locations are not examined, which can only leave out further examples, not the race itself.
    """
    if warp_fences not in FENCES:
        raise ValueError(f"warp_fences must be one of {', '.join(map(repr, FENCES))}, got {warp_fences!r}")
    acc = rec.accesses
    space = acc["space"]
    sel = np.flatnonzero((space == abi.SPACE_SHARED) | (space == abi.SPACE_GLOBAL))
    if len(sel) == 0:
        return []
    a = acc[sel]
    g = _granule(a)
    units = np.maximum(1, -(-a["size"].astype(np.int64) // g))
    rep = np.repeat(np.arange(len(a)), units)
    unit = np.arange(len(rep)) - np.repeat(np.cumsum(units) - units, units)
    where = (a["addr"].astype(np.int64) // g)[rep] + unit
    pos = sel[rep]  # execution order
    flags = acc["flags"][pos]
    cls = np.where(flags & abi.ACCESS_ATOMIC, ATOMIC, np.where(flags & abi.ACCESS_WRITE, WRITE, READ))
    sp = acc["space"][pos].astype(np.int64)
    blk = acc["block"][pos].astype(np.int64)
    bar = acc["barrier"][pos].astype(np.int64)
    o = np.lexsort((pos, where, bar, blk, sp))
    where, pos, cls, sp, blk, bar = where[o], pos[o], cls[o], sp[o], blk[o], bar[o]
    thread = acc["thread"][pos].astype(np.int64)
    fence = acc["syncwarp" if warp_fences == "syncwarp" else "collective"][pos].astype(np.int64)
    new = _runs(sp, blk, bar, where)
    starts = np.flatnonzero(new)
    ends = np.append(starts[1:], len(pos))
    group = np.cumsum(new) - 1
    # groups worth a closer look: two threads or more and a write, or an atomic next to a plain read
    tmin = np.minimum.reduceat(thread, starts)
    tmax = np.maximum.reduceat(thread, starts)
    has_write = np.add.reduceat((cls == WRITE).astype(np.int64), starts) > 0
    has_atomic = np.add.reduceat((cls == ATOMIC).astype(np.int64), starts) > 0
    has_read = np.add.reduceat((cls == READ).astype(np.int64), starts) > 0
    candidate = (tmin != tmax) & (has_write | (has_atomic & has_read))
    if not candidate.any():
        return []
    anchors = np.flatnonzero(candidate[group] & (cls != READ))
    sizes = (ends - starts)[group[anchors]]
    budget = np.cumsum(sizes)
    anchors = anchors[budget <= max_pairs] if budget[-1] > max_pairs else anchors
    sizes = (ends - starts)[group[anchors]]
    p = np.repeat(anchors, sizes)
    q = np.repeat(starts[group[anchors]], sizes) + (np.arange(len(p)) - np.repeat(np.cumsum(sizes) - sizes, sizes))
    conflict = thread[p] != thread[q]
    conflict &= ~((cls[p] == ATOMIC) & (cls[q] == ATOMIC))
    conflict &= ~((cls[q] != READ) & (q < p))  # two writers: count the pair once
    same_warp = (thread[p] >> 5) == (thread[q] >> 5)
    conflict &= ~(same_warp & (fence[p] != fence[q]))
    p, q, same_warp = p[conflict], q[conflict], same_warp[conflict]
    if len(p) == 0:
        return []
    early = np.where(pos[p] < pos[q], p, q)
    late = np.where(pos[p] < pos[q], q, p)
    kind = np.where(cls[early] == READ, 1, np.where(cls[late] == READ, 0, 2))  # 0 RAW, 1 WAR, 2 WAW
    # two instructions of one source line are one line here
    pc_e = acc["pc"][pos[early]].astype(np.int64)
    pc_l = acc["pc"][pos[late]].astype(np.int64)
    pcs = np.unique(np.concatenate([pc_e, pc_l]))
    ordered = sorted({rec.site(int(pc)) for pc in pcs})
    index = {s: i for i, s in enumerate(ordered)}
    site_of_pc = np.array([index[rec.site(int(pc))] for pc in pcs])
    line_e = site_of_pc[np.searchsorted(pcs, pc_e)]
    line_l = site_of_pc[np.searchsorted(pcs, pc_l)]
    key_o = np.lexsort((pos[early], same_warp, kind, line_l, line_e, sp[early]))
    cols = (sp[early][key_o], line_e[key_o], line_l[key_o], kind[key_o], same_warp[key_o])
    firsts = np.flatnonzero(_runs(*cols))
    bounds = np.append(firsts, len(key_o))
    races = []
    names = ("RAW", "WAR", "WAW")
    for s, e in zip(bounds[:-1], bounds[1:]):
        members = key_o[s:e]
        i = members[0]
        x, y = pos[early[i]], pos[late[i]]
        loc_ids = np.unique(np.stack([blk[early[members]], bar[early[members]], where[early[members]]]), axis=1)
        race_space = "shared" if acc["space"][x] == abi.SPACE_SHARED else "global"
        races.append(Race(
            kind=names[int(kind[i])], space=race_space,
            first=_side(rec, acc, x, ordered[int(line_e[i])]), second=_side(rec, acc, y, ordered[int(line_l[i])]),
            block=rec.block_index(int(acc["block"][x])),
            location=rec.describe_address(int(acc["addr"][x]), int(acc["space"][x]), int(acc["range"][x]),
                                          int(acc["size"][x])),
            same_warp=bool(same_warp[i]), hazards=int(e - s), locations=int(loc_ids.shape[1])))
    races.sort(key=lambda r: (r.space != "shared", r.first.site, r.second.site, r.kind))
    return races


def _side(rec: Recording, acc: np.ndarray, i: int, site: Site) -> RaceAccess:
    flags = int(acc["flags"][i])
    return RaceAccess(site=site, thread=rec.thread_index(int(acc["thread"][i])),
                      write=bool(flags & abi.ACCESS_WRITE), atomic=bool(flags & abi.ACCESS_ATOMIC))


def unwritten_shared_reads(rec: Recording, limit: int = 3) -> list[str]:
    """Shared-memory loads of an address that no thread of the block had stored to yet, as
    ``tile[9] on line 14`` (at most ``limit``, one per source line). Such a load reads whatever was
    there before: the evidence behind "a missing __syncthreads()" when a result comes out wrong."""
    acc = rec.accesses
    shared = np.flatnonzero(acc["space"] == abi.SPACE_SHARED)
    if len(shared) == 0:
        return []
    a = acc[shared]
    order = np.lexsort((shared, a["addr"], a["block"]))  # by block, address, then execution order
    a = a[order]
    first = np.ones(len(a), dtype=bool)
    first[1:] = (a["block"][1:] != a["block"][:-1]) | (a["addr"][1:] != a["addr"][:-1])
    # a plain store initialises; an atomic read-modify-write of an unset value reads it (a counter in
    # shared memory that nobody zeroed)
    writes = ((a["flags"] & abi.ACCESS_WRITE) != 0) & ((a["flags"] & abi.ACCESS_ATOMIC) == 0)
    found: list[str] = []
    seen_lines: set[int] = set()
    for i in np.flatnonzero(first & ~writes):
        site = rec.site(int(a["pc"][i]))
        if site.line in seen_lines:
            continue
        seen_lines.add(site.line)
        where = rec.describe_address(int(a["addr"][i]), abi.SPACE_SHARED, 255, int(a["size"][i]))
        found.append(f"{where}, {site.short}")
        if len(found) >= limit:
            break
    return found
