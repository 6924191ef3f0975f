"""Messages between the judge and the judged process: a JSON header and raw arrays, nothing else.

A message is ``KRN1``, the header's length (4 bytes, little-endian), the header (UTF-8 JSON, an
object) and then the bytes of the arrays the header lists, in order. Nothing is ever unpickled or
evaluated: an array is a dtype from a short list, a shape and exactly that many bytes. The judge
reads the judged process's messages with limits on every size, so a process that sends garbage,
too much or nothing gets a clear ``ProtocolError`` and never a grade.
"""
from __future__ import annotations

import json
import os
import select
import struct
import time
from typing import Any, BinaryIO

import numpy as np

MAGIC = b"KRN1"
MAX_HEADER_BYTES = 1 << 20
_DTYPES = {np.dtype(t).str: np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                                     np.uint32, np.int64, np.uint64, np.float16, np.float32,
                                                     np.float64, np.complex64, np.complex128)}


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message, or nothing in time."""


def send(stream: BinaryIO, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    arrays = arrays or {}
    listed = []
    blobs = []
    for name, array in arrays.items():
        a = np.ascontiguousarray(array)
        if a.dtype.str not in _DTYPES:
            raise ValueError(f"array {name!r} has dtype {a.dtype}, which messages do not carry")
        listed.append([name, a.dtype.str, list(a.shape), a.nbytes])
        blobs.append(a.reshape(-1).view(np.uint8).data if a.size else b"")
    body = json.dumps({**header, "arrays": listed}, default=_jsonable).encode("utf-8")
    stream.write(MAGIC + struct.pack("<I", len(body)) + body)
    for blob in blobs:
        stream.write(blob)
    stream.flush()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    if isinstance(value, (tuple, set)):
        return list(value)
    raise TypeError(f"{type(value).__name__} cannot be sent")


class Reader:
    """Reads messages from a file descriptor, each within a deadline and a size limit."""

    def __init__(self, fd: int):
        self.fd = fd

    def _read_exact(self, n: int, deadline: float | None) -> bytes:
        chunks, left = [], n
        while left:
            if deadline is not None:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise ProtocolError("no answer in time")
                ready, _, _ = select.select([self.fd], [], [], min(wait, 1.0))
                if not ready:
                    continue
            data = os.read(self.fd, min(left, 1 << 20))
            if not data:
                raise ProtocolError("the process closed its end")
            chunks.append(data)
            left -= len(data)
        return b"".join(chunks)

    def receive(self, *, max_bytes: int, deadline: float | None = None) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """(header, arrays) of the next message; ProtocolError on anything malformed or too large."""
        head = self._read_exact(8, deadline)
        if head[:4] != MAGIC:
            raise ProtocolError("a message did not start with the protocol's mark")
        (length,) = struct.unpack("<I", head[4:])
        if length > MAX_HEADER_BYTES:
            raise ProtocolError(f"a message header of {length} bytes (at most {MAX_HEADER_BYTES})")
        try:
            header = json.loads(self._read_exact(length, deadline).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ProtocolError(f"a message header that is not JSON: {exc}") from None
        if not isinstance(header, dict) or not isinstance(header.get("arrays", []), list):
            raise ProtocolError("a message header that is not an object with a list of arrays")
        arrays: dict[str, np.ndarray] = {}
        total = 0
        for entry in header.pop("arrays", []):
            name, dtype, shape, nbytes = _array_entry(entry)
            total += nbytes
            if total > max_bytes:
                raise ProtocolError(f"a message of more than {max_bytes} bytes of arrays")
            data = self._read_exact(nbytes, deadline) if nbytes else b""
            arrays[name] = np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)
        return header, arrays


def _array_entry(entry: Any) -> tuple[str, np.dtype, tuple[int, ...], int]:
    if not (isinstance(entry, list) and len(entry) == 4):
        raise ProtocolError("an array entry that is not [name, dtype, shape, bytes]")
    name, dtype, shape, nbytes = entry
    if not isinstance(name, str) or len(name) > 200:
        raise ProtocolError("an array without a proper name")
    if dtype not in _DTYPES:
        raise ProtocolError(f"array {name!r} has an unknown dtype")
    if not (isinstance(shape, list) and len(shape) <= 8 and all(isinstance(d, int) and 0 <= d < 1 << 40 for d in shape)):
        raise ProtocolError(f"array {name!r} has a malformed shape")
    dt = _DTYPES[dtype]
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize if shape else dt.itemsize
    if nbytes != expected:
        raise ProtocolError(f"array {name!r} says {nbytes} bytes, its shape needs {expected}")
    return name, dt, tuple(shape), expected
