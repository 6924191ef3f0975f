"""Warp-level requests rebuilt from per-thread accesses, and what a global request moves.

On the CPU the 32 lanes of a warp run one after another, so the trace holds each lane's accesses
separately. A GPU executes one instruction for the whole warp: the accesses that the lanes made with
the same instruction (the same return address of the hook, ``pc``) form one *request*. When an
instruction runs several times (a loop), the k-th execution of lane a goes with the k-th execution
of lane b. The count restarts at every ``__syncthreads()`` and every warp collective, where lanes
are known to be together again.

Divergent code: lanes that skip an instruction are simply absent from its request (a request with
fewer active lanes, as a predicated instruction on the GPU). When lanes reach the same instruction
in different iterations of a loop (a branch inside the loop that lanes take at different times),
the GPU issues one request per iteration but the k-th-execution rule pairs them up, so such code
shows fewer, fuller requests than the GPU makes.

Global requests are then measured as Nsight Compute does: the 32-byte sectors and 128-byte lines
the active lanes touch, the bytes they asked for and the bytes those sectors move.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cpu import abi
from .sectors import SECTOR_BYTES as SECTOR

LOAD, STORE, ATOMIC = 0, 1, 2
OP_NAMES = ("load", "store", "atomic")


def access_ops(acc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per access: its operation (LOAD, STORE, ATOMIC) and whether it is the store half of an atomic
    read-modify-write (the load half stands for the whole atomic instruction)."""
    flags = acc["flags"]
    atomic = (flags & abi.ACCESS_ATOMIC) != 0
    write = (flags & abi.ACCESS_WRITE) != 0
    op = np.where(atomic, ATOMIC, np.where(write, STORE, LOAD)).astype(np.int64)
    tail = np.zeros(len(acc), dtype=bool)
    if len(acc) > 1:
        prev = slice(0, -1)
        this = slice(1, None)
        tail[1:] = (atomic[this] & write[this] & atomic[prev] & ~write[prev]
                    & (acc["addr"][this] == acc["addr"][prev]) & (acc["thread"][this] == acc["thread"][prev])
                    & (acc["block"][this] == acc["block"][prev]))
    return op, tail


def _runs(*keys: np.ndarray) -> np.ndarray:
    """True where a sorted sequence of key tuples starts a new run."""
    n = len(keys[0])
    new = np.ones(n, dtype=bool)
    if n > 1:
        change = np.zeros(n - 1, dtype=bool)
        for k in keys:
            change |= k[1:] != k[:-1]
        new[1:] = change
    return new


@dataclass
class Requests:
    """The warp-level requests of a launch.

    ``instance[i]`` is the request access ``i`` belongs to (-1 for the store half of an atomic);
    the per-request arrays are indexed by request. ``order``/``starts`` list the accesses of each
    request: ``members(r)``.
    """

    instance: np.ndarray
    pc: np.ndarray
    space: np.ndarray
    op: np.ndarray
    block: np.ndarray
    warp: np.ndarray
    lanes: np.ndarray
    size: np.ndarray
    first: np.ndarray
    order: np.ndarray
    starts: np.ndarray

    def __len__(self) -> int:
        return len(self.pc)

    def members(self, r: int) -> np.ndarray:
        """Indices (into the accesses) of request ``r``'s lanes, in lane order."""
        return self.order[self.starts[r]:self.starts[r + 1]]


def warp_requests(acc: np.ndarray) -> Requests:
    """Group accesses into warp-level requests (see the module docstring for the rule)."""
    n = len(acc)
    op, tail = access_ops(acc)
    keep = np.flatnonzero(~tail)
    idx = keep.astype(np.int64)
    a = acc[keep]
    block = a["block"].astype(np.int64)
    thread = a["thread"].astype(np.int64)
    epoch = ((a["barrier"].astype(np.int64) << 20) | (a["collective"].astype(np.int64) << 4)
             | (a["space"].astype(np.int64) << 2) | op[keep])
    pc = a["pc"].astype(np.int64)
    k_thread = (block << 16) | thread
    # k-th execution of an instruction by a thread within one epoch
    o1 = np.lexsort((idx, pc, epoch, k_thread))
    new = _runs(k_thread[o1], epoch[o1], pc[o1])
    positions = np.arange(len(o1))
    start = np.maximum.accumulate(np.where(new, positions, 0))
    occurrence = np.empty(len(o1), dtype=np.int64)
    occurrence[o1] = positions - start
    # lanes of one warp with the same instruction, epoch and execution count form one request
    k_warp = (block << 16) | (thread >> 5)
    k_pc = (pc << 32) | occurrence
    o2 = np.lexsort((thread, k_pc, epoch, k_warp))
    new = _runs(k_warp[o2], epoch[o2], k_pc[o2])
    label_sorted = np.cumsum(new) - 1
    instance = np.full(n, -1, dtype=np.int64)
    instance[idx[o2]] = label_sorted
    starts = np.flatnonzero(new)
    bounds = np.append(starts, len(o2))
    heads = o2[starts]
    lanes = np.diff(bounds)
    size = np.maximum.reduceat(a["size"][o2].astype(np.int64), starts) if len(starts) else np.zeros(0, np.int64)
    first = np.minimum.reduceat(idx[o2], starts) if len(starts) else np.zeros(0, np.int64)
    return Requests(instance=instance, pc=pc[heads], space=a["space"][heads].astype(np.int64), op=op[keep][heads],
                    block=block[heads], warp=thread[heads] >> 5, lanes=lanes, size=size, first=first,
                    order=idx[o2], starts=bounds)


def _expand(lo: np.ndarray, hi: np.ndarray, owner: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(owner, unit) for every unit from lo to hi inclusive of every access (most span one unit)."""
    count = hi - lo + 1
    if np.all(count == 1):
        return owner, lo
    rep = np.repeat(np.arange(len(lo)), count)
    offsets = np.arange(len(rep)) - np.repeat(np.cumsum(count) - count, count)
    return owner[rep], lo[rep] + offsets


def _distinct_per(owner: np.ndarray, unit: np.ndarray, nowners: int) -> np.ndarray:
    """Number of distinct units per owner."""
    if len(owner) == 0:
        return np.zeros(nowners, dtype=np.int64)
    o = np.lexsort((unit, owner))
    new = _runs(owner[o], unit[o])
    return np.bincount(owner[o][new], minlength=nowners)


@dataclass
class GlobalTraffic:
    """Per request: sectors and lines touched, bytes asked for (all lanes / distinct) and bytes moved."""

    sectors: np.ndarray
    lines: np.ndarray
    bytes_requested: np.ndarray
    bytes_unique: np.ndarray

    @property
    def bytes_moved(self) -> np.ndarray:
        return self.sectors * SECTOR

    @property
    def ideal_sectors(self) -> np.ndarray:
        """The fewest sectors that can hold the distinct bytes asked for (at least one)."""
        return np.maximum(1, -(-self.bytes_unique // SECTOR))


def global_traffic(acc: np.ndarray, req: Requests, addresses: np.ndarray | None = None) -> GlobalTraffic:
    """Sectors, lines and bytes of every request (meaningful for global-memory requests).

    ``addresses``: the accesses' addresses as a GPU would see them (``Recording.gpu_addresses``);
    the recorded ones by default.
    """
    nreq = len(req)
    member = req.instance >= 0
    owner = req.instance[member]
    addr = (acc["addr"] if addresses is None else addresses)[member].astype(np.int64)
    size = np.maximum(acc["size"][member].astype(np.int64), 1)
    last = addr + size - 1
    sectors = _distinct_per(*_expand(addr >> 5, last >> 5, owner), nreq)
    lines = _distinct_per(*_expand(addr >> 7, last >> 7, owner), nreq)
    requested = np.bincount(owner, weights=size, minlength=nreq).astype(np.int64)
    # distinct bytes: each distinct (request, address) once, with its widest access
    if len(owner):
        o = np.lexsort((-size, addr, owner))
        first = _runs(owner[o], addr[o])
        unique = np.bincount(owner[o][first], weights=size[o][first], minlength=nreq).astype(np.int64)
    else:
        unique = np.zeros(nreq, dtype=np.int64)
    return GlobalTraffic(sectors=sectors, lines=lines, bytes_requested=requested, bytes_unique=unique)
