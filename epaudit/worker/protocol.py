"""The worker's message format, spoken over its stdin and its reply pipe.

A frame is ``<u64 header length><header JSON>`` followed by the raw blobs the header lists.
In the header, a blob is referenced as ``{"__blob__": i}`` (bytes) or ``{"__array__": i,
"dtype": "<f2", "shape": [..]}`` (a C-ordered numpy array); ``i`` indexes the blob list
``header["blobs"]`` of byte lengths. A reply is ``{ok, result}`` (or ``{ok: false, error}``,
the worker's own traceback) plus ``stderr: [start, end]``, the byte range of the worker's
stderr file the request wrote, and ``seq``, echoed from the request (``null`` for the
announced hello). The worker's first frame, written unasked once onnxruntime is imported (and
warmed up), is the ``hello`` reply. Requests (``op``):

* ``hello`` -> ``{python, platform, ort_version, ort_file, distribution, providers,
  devices, build_info, build, plugin_api}``.
* ``canary`` ``{provider, options, library, device, model, feeds, expected, fault}`` ->
  ``{live, reason, placement, library_path, selected}``: the EP is live when the canary
  node is placed on it and the output is right.
* ``probe`` ``{provider, options, library, device, cases: [{role, model, feeds, outputs,
  output_shapes}], fault}`` -> ``{cases: [{role, ok, stage, error, placement, outputs,
  create_ms, run_ms, binding, poisoned}]}``. ``output_shapes`` (output name -> shape, from
  the parent's reference) lets the worker pre-bind every output (:mod:`.sessions`).
* ``exit``.

The parent imports this module for the framing only (docs/internals.md "The worker protocol").
"""

from __future__ import annotations

import json
import struct

import numpy as np

CPU = "CPUExecutionProvider"

PROBE_NODE_NAME = "probe"

#: What the worker writes to stderr, on a line of its own, before each case of a probe
#: (``epaudit-case: <the request's case_token> control``): a worker killed mid-probe sends
#: no reply, so its stderr says which case killed it (a control model can crash ORT where
#: the subject does not: docs/sweep.md). The token is the parent's, per worker.
CASE_MARKER = "epaudit-case: "

#: The canary model, serialized: one float32 ``Add`` (opset 13, IR 7: onnxruntime
#: 1.16 and 1.17, which read IR <= 9, take it too) named ``canary``, inputs
#: ``a`` and ``b`` of shape [2, 3], output ``c``. Bytes, not built here: the worker has no
#: onnx, and a parent whose probes come from the cache does not import it either.
CANARY_MODEL = (b'\x08\x07\x12\x07epaudit:\\\n\x18\n\x01a\n\x01b\x12\x01c\x1a\x06canary"\x03Add:\x00\x12\x0bep'
                b'audit.AddZ\x13\n\x01a\x12\x0e\n\x0c\x08\x01\x12\x08\n\x02\x08\x02\n\x02\x08\x03Z\x13\n\x01b'
                b'\x12\x0e\n\x0c\x08\x01\x12\x08\n\x02\x08\x02\n\x02\x08\x03b\t\n\x01c\x12\x04\n\x02\x08\x01B'
                b'\x04\n\x00\x10\r')


# --------------------------------------------------------------------------- framing
def encode(obj) -> bytes:
    """Frame ``obj`` (JSON-able, with numpy arrays and bytes anywhere) as one message.

    JSON's own encoder walks ``obj`` (arrays, bytes and numpy scalars are handed to it as
    they come, in order); a dict key that is not a string, a number, a bool or ``None`` makes
    it fall back to the walk below, which writes every key as ``str(key)``. Same bytes
    either way; the encoder is ~2x faster, and every request and reply is framed."""
    blobs: list[bytes] = []

    def default(x):
        if isinstance(x, np.ndarray):
            # The shape is the array's own: ascontiguousarray makes a 0-d array 1-d, and a
            # scalar input must reach the session as a scalar.
            blobs.append(x.tobytes(order="C"))
            return {"__array__": len(blobs) - 1, "dtype": x.dtype.str, "shape": list(x.shape)}
        if isinstance(x, (bytes, bytearray)):
            blobs.append(bytes(x))
            return {"__blob__": len(blobs) - 1}
        if isinstance(x, np.generic):
            return x.item()
        raise TypeError(f"Object of type {type(x).__name__} is not JSON serializable")

    try:
        body = json.dumps(obj, default=default)
    except TypeError:
        blobs.clear()
        body = json.dumps(_walk(obj, blobs))
    header = ('{"body": ' + body + ', "blobs": ' + json.dumps([len(b) for b in blobs]) + "}").encode()
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


def _walk(x, blobs: list[bytes]):
    """``x`` with arrays and bytes replaced by blob references (appended to ``blobs``)."""
    if isinstance(x, np.ndarray):
        blobs.append(x.tobytes(order="C"))
        return {"__array__": len(blobs) - 1, "dtype": x.dtype.str, "shape": list(x.shape)}
    if isinstance(x, (bytes, bytearray)):
        blobs.append(bytes(x))
        return {"__blob__": len(blobs) - 1}
    if isinstance(x, dict):
        return {str(k): _walk(v, blobs) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_walk(v, blobs) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def _read_exact(stream, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("stream closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _hook(blob, copy: bool):
    """A ``json.loads`` ``object_hook`` that turns the blob references of a frame's body into
    arrays and bytes, ``blob(i)`` giving blob ``i`` as a bytes-like: the C decoder calls it
    once per JSON object, so the parent never walks a reply in Python (a tenth of its time
    per probe went to that walk)."""

    def hook(x: dict):
        if "__array__" in x:
            a = np.frombuffer(blob(x["__array__"]), dtype=np.dtype(x["dtype"])).reshape(x["shape"])
            return a.copy() if copy else a
        if "__blob__" in x:
            return bytes(blob(x["__blob__"]))
        return x

    return hook


def _blob_sizes(header: bytes) -> list[int]:
    """The blob sizes of a frame header: :func:`encode` writes them last, as
    ``, "blobs": [...]}``, after the body, so the last ``"blobs": `` is theirs whatever
    the body's strings hold."""
    at = header.rindex(b'"blobs": ')
    sizes = json.loads(header[at + 9:-1])
    if not isinstance(sizes, list) or not all(isinstance(n, int) and n >= 0 for n in sizes):
        raise ValueError("frame header without a list of blob sizes")
    return sizes


def _body(header: bytes, blob, copy: bool):
    return json.loads(header, object_hook=_hook(blob, copy))["body"]


def frame_length(buf) -> int | None:
    """Bytes of the whole frame at the head of ``buf`` (bytes-like), or ``None`` while its
    header has not all arrived (the parent reads replies as they come: ``run/workers.py``).

    Raises:
        ValueError, struct.error: a header without a list of blob sizes (a torn frame).
    """
    if len(buf) < 8:
        return None
    (n,) = struct.unpack_from("<Q", buf)
    if len(buf) < 8 + n:
        return None
    return 8 + n + sum(_blob_sizes(bytes(buf[8:8 + n])))


def read_message(stream, copy: bool = True):
    """Read one framed message from a binary stream; raises EOFError at end of stream.

    With ``copy=False`` arrays are read-only views into the bytes read (the parent reads
    replies so: it only compares them)."""
    (n,) = struct.unpack("<Q", _read_exact(stream, 8))
    header = _read_exact(stream, n)
    blobs = [_read_exact(stream, size) for size in _blob_sizes(header)]
    return _body(header, blobs.__getitem__, copy)


def decode(data, copy: bool = True):
    """The message one whole frame ``data`` (bytes-like) holds.

    With ``copy=False`` arrays are read-only views into ``data`` (no copy: what the probe
    cache uses for megabytes of references it only reads).

    Raises:
        ValueError, KeyError, struct.error: ``data`` is not one whole frame.
    """
    view = memoryview(data)
    (n,) = struct.unpack("<Q", view[:8])
    header = bytes(view[8:8 + n])
    offsets, at = [], 8 + n
    for size in _blob_sizes(header):
        offsets.append((at, at + size))
        at += size
    if at != len(view):
        raise ValueError(f"frame of {len(view)} bytes, {at} expected")
    return _body(header, lambda i: view[offsets[i][0]:offsets[i][1]], copy)
