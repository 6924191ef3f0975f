"""Shared-memory banks: how many wavefronts (passes) a warp's shared-memory request takes.

The model, for the GPUs of compute capability 5.0 and newer:

- shared memory is 32 banks of 4-byte words; word ``w`` (byte address // 4) lives in bank ``w % 32``
  (CUDA C++ Programming Guide, "Shared Memory" for compute capability 5.x and later);
- one wavefront serves at most one word per bank, so a request that needs ``k`` different words of
  one bank takes ``k`` wavefronts (a k-way bank conflict); lanes that read the same word share it
  (a broadcast), and lanes that write the same word cost one write (Programming Guide, same section);
- a wavefront returns at most 128 bytes, one 32-bit register per lane. A request of 8-byte values
  (``float2``, ``double``) is therefore processed in two phases of 16 lanes, a request of 16-byte
  values (``float4``) in four phases of 8 lanes, and conflicts are counted within each phase: the
  ideal is 2 and 4 wavefronts respectively (Programming Guide, compute capability 3.x, "64-bit mode":
  conflicts only within a half-warp; NVIDIA Developer Forums, "Unexpected shared memory bank
  conflict", topic 77228: "The return bandwidth of L1 and shared memory is 128 bytes/cycle ...
  LDS.128 requires 4 requests per instruction as it returns 4 registers");
- Nsight Compute's ``l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld`` counts the wavefronts
  beyond that ideal (NVIDIA Developer Forums, "Clarification: bank_conflicts metric vs wavefronts
  for shared memory LDS.128", topic 359822), which is what ``excess`` is here.

Not modelled: compute capability 7.x's packing of 64- and 128-bit loads whose lanes pair up on the
same address (the forum topic above: "uniform" loads take 2 wavefronts instead of 4).

This is the course's one bank model. :func:`bank_traffic` applies it to every request of a traced
launch (and is what the Nsight Compute comparison checks); :func:`warp_banks` applies it to one warp
given as byte addresses; :func:`conflict_ways` and :func:`wavefronts` to one warp given as the 4-byte
words its lanes touch, the form the chapters, their figures and the exercises use.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .requests import Requests, _expand, _runs

BANKS = 32
WORD = 4
WAVEFRONT_BYTES = 128
WARP = 32


def bank_of(word: int | np.ndarray) -> int | np.ndarray:
    """The bank that holds 4-byte word ``word`` (byte address // 4) of shared memory."""
    return word % BANKS


def lanes_per_phase(size: int | np.ndarray) -> int | np.ndarray:
    """32 lanes for accesses of up to 4 bytes, 16 for 8 bytes, 8 for 16 bytes (and wider)."""
    width = np.clip(size, WORD, 16)
    return WAVEFRONT_BYTES // width


@dataclass
class BankTraffic:
    """Per request: wavefronts, the ideal number (one per phase with an active lane) and the worst
    number of different words one bank had to serve in one phase (the conflict's "ways")."""

    wavefronts: np.ndarray
    ideal: np.ndarray
    ways: np.ndarray

    @property
    def excess(self) -> np.ndarray:
        """Wavefronts beyond the ideal: Nsight Compute's bank conflicts."""
        return self.wavefronts - self.ideal


def bank_traffic(acc: np.ndarray, req: Requests) -> BankTraffic:
    """Wavefronts of every request under the model above (meaningful for shared-memory requests)."""
    nreq = len(req)
    member = req.instance >= 0
    owner = req.instance[member]
    addr = acc["addr"][member].astype(np.int64)
    size = np.maximum(acc["size"][member].astype(np.int64), 1)
    lane = acc["thread"][member].astype(np.int64) & 31
    width = req.size[owner]  # the request's access width decides its phases
    phase = lane // lanes_per_phase(width)
    group = owner * 4 + phase
    # every word an access touches (one for 1- to 4-byte values, two for 8, four for 16)
    rep_group, word = _expand(addr >> 2, (addr + size - 1) >> 2, group)
    bank = word & (BANKS - 1)
    wavefronts = np.zeros(nreq, dtype=np.int64)
    ideal = np.zeros(nreq, dtype=np.int64)
    ways = np.zeros(nreq, dtype=np.int64)
    if len(word) == 0:
        return BankTraffic(wavefronts, ideal, ways)
    o = np.lexsort((word, bank, rep_group))
    g, b, w = rep_group[o], bank[o], word[o]
    distinct = _runs(g, b, w)
    g, b = g[distinct], b[distinct]
    # words per (phase group, bank)
    new_bank = _runs(g, b)
    starts = np.flatnonzero(new_bank)
    per_bank = np.diff(np.append(starts, len(g)))
    bank_group = g[starts]
    # worst bank per phase group
    new_group = _runs(bank_group)
    gstarts = np.flatnonzero(new_group)
    per_group = np.maximum.reduceat(per_bank, gstarts)
    request = bank_group[gstarts] // 4
    np.add.at(wavefronts, request, per_group)
    np.add.at(ideal, request, 1)
    np.maximum.at(ways, request, per_group)
    return BankTraffic(wavefronts, ideal, ways)


def warp_banks(addresses: np.ndarray, size: int = 4) -> dict[str, np.ndarray | int]:
    """The model for one warp's request given as 32 byte addresses (NaN or -1: inactive lane).

    Returns the bank and word of every lane, the wavefronts, the ideal and the ways; used by the
    pictures and handy for "predict, then check" exercises.
    """
    addresses = np.asarray(addresses)
    if addresses.ndim != 1 or len(addresses) > WARP:
        raise ValueError(f"one warp's request is at most {WARP} lane addresses, got shape {addresses.shape}")
    active = np.isfinite(addresses) & (addresses >= 0) if addresses.dtype.kind == "f" else addresses >= 0
    a = np.where(active, addresses, 0).astype(np.int64)
    words = a // WORD
    banks = bank_of(words)
    phases = np.arange(len(a)) // lanes_per_phase(size)
    wavefronts = ideal = ways = 0
    for p in np.unique(phases[active]):
        lanes = active & (phases == p)
        per_bank: dict[int, set[int]] = {}
        for lane in np.flatnonzero(lanes):
            for w in range(int(words[lane]), int((a[lane] + max(size, 1) - 1) // WORD) + 1):
                per_bank.setdefault(bank_of(w), set()).add(w)
        worst = max(len(s) for s in per_bank.values())
        wavefronts += worst
        ideal += 1
        ways = max(ways, worst)
    return {"bank": np.where(active, banks, -1), "word": np.where(active, words, -1), "active": active,
            "wavefronts": wavefronts, "ideal": ideal, "ways": ways}


def _word_addresses(words: Sequence[int | None] | np.ndarray, access_bytes: int) -> np.ndarray:
    """Byte addresses of the lanes' first words, -1 for an inactive lane (None)."""
    if access_bytes not in (4, 8, 16):
        raise ValueError(f"access_bytes must be 4, 8 or 16, not {access_bytes}")
    lanes = [None if w is None else int(w) for w in words]
    if any(w is not None and w < 0 for w in lanes):
        raise ValueError("word indices must be >= 0 (None marks an inactive lane)")
    return np.array([-1 if w is None else WORD * w for w in lanes], dtype=np.int64)


def conflict_ways(words: Sequence[int | None] | np.ndarray, access_bytes: int = 4) -> int:
    """The worst bank conflict of one warp's shared-memory access: the most different words one bank
    serves in one phase (1 = conflict-free, 0 = no active lane).

    ``words[l]`` is the first 4-byte word lane ``l`` touches (None: inactive lane); an access of
    ``access_bytes`` (4, 8 or 16) touches ``access_bytes / 4`` consecutive words. Lanes that touch the
    same word share it (a broadcast), so only different words count.
    """
    return int(warp_banks(_word_addresses(words, access_bytes), access_bytes)["ways"])


def wavefronts(words: Sequence[int | None] | np.ndarray, access_bytes: int = 4) -> int:
    """Wavefronts (passes) one warp's shared-memory access takes: the conflict ways of each phase added
    up; the ideal is one per phase (1, 2 or 4 for 4-, 8- or 16-byte accesses). ``words`` as in
    :func:`conflict_ways`."""
    return int(warp_banks(_word_addresses(words, access_bytes), access_bytes)["wavefronts"])
