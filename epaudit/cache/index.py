"""An indexed record file: records read one at a time, each with its own digest.

The probe cache and the generated catalog's store hold thousands of probes (tens of
thousands as the catalog grows: 16x today's catalog is ~0.6 GB); a run must never read
them whole. This file format lets a reader open the file, check it is whole, and read
one record at a time with ``os.pread`` (no shared file offset: threads may read at once),
so the memory a run holds does not grow with the catalog.

Layout (all integers little-endian)::

    HEAD     MAGIC  b"2 "  <key: 64 ASCII hex digits>  b"\\n"            (82 bytes)
    RECORDS  one blob per record, back to back (a probe: one worker frame)
    TABLE    JSON {"format": 2, "key": ..., "records": [[id, offset, length, sha256 hex], ...]}
    TRAILER  <u64 table offset> <u64 table length> <32 bytes: SHA-256 of TABLE> TRAILER_MAGIC

A writer appends records to a temporary file as they come, writes the table and the
trailer last, and renames the file into place (:meth:`IndexWriter.commit`): a file cut
short anywhere (a killed writer, a full disk, a copy that stopped) has no valid trailer
and is read as absent, never as a smaller store. A record whose bytes do not match its
digest (a flipped bit) is a miss of that record alone (:meth:`IndexReader.raw` returns
``None``): the caller builds it again. Only a regular file is opened (a FIFO or device at
the path must not block or flood the run), never one over the reader's size limit, and
only one this user owns and no one else can write (:mod:`.trust`, judged on the open file,
so a file swapped after the check is still judged; one warning otherwise): a digest inside
the file cannot stand in for that, whoever writes the file recomputes it. A writer creates
missing directories ``0700`` and its file ``0600``.
"""

from __future__ import annotations

import array
import hashlib
import json
import os
import stat
import struct
import tempfile
from pathlib import Path
from typing import Iterator

#: First bytes of an indexed file (shared with the probe cache's earlier, unindexed form,
#: whose next byte is never ``2``).
MAGIC = b"epaudit-probes\n"
#: Version of this layout.
FORMAT = 2
#: Last bytes of a whole file.
TRAILER_MAGIC = b"EPIDX2\r\n"
_HEAD_LEN = len(MAGIC) + 2 + 64 + 1
_TRAILER = struct.Struct("<QQ32s8s")
#: Largest table read, bytes (a million records is ~150 MB of table).
MAX_TABLE = 512 * 1024 * 1024


def _head(key: str) -> bytes:
    k = key.encode("ascii")
    if len(k) != 64:
        raise ValueError(f"an index key is 64 hex digits, not {key!r}")
    return MAGIC + b"2 " + k + b"\n"


def open_regular(path: str | os.PathLike, limit: int,
                 consequence: str = "it is not read") -> tuple[int, int] | None:
    """``(fd, size)`` of ``path`` opened read-only when it is a regular file of at most
    ``limit`` bytes that this user owns and nobody else can write
    (:func:`epaudit.cache.trust.problem`, checked on the open file), else ``None``
    (nothing left open; an untrusted file with one warning, ``consequence`` saying what
    happens instead). Never raises for OS trouble."""
    from .trust import problem, warn

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if stat.S_ISREG(st.st_mode) and st.st_size <= limit:
            why = problem(st, "the file")
            if not why:
                return fd, st.st_size
            warn(path, why, consequence)
    except OSError:
        pass
    os.close(fd)
    return None


def _pread(fd: int, n: int, offset: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.pread(fd, n - got, offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


class IndexReader:
    """One indexed file, open for reading records one at a time.

    Use :meth:`open` (``None`` when the file is absent, not whole, of another key or
    damaged in its table). Thread-safe: records are read with ``os.pread``.

    Attributes:
        key: the key the file was written for.
        path: the file.
    """

    def __init__(self, fd: int, path: Path, key: str, table: "_Table"):
        self._fd = fd
        self.path = path
        self.key = key
        self._table = table

    @classmethod
    def open(cls, path: str | os.PathLike, key: str, limit: int,
             consequence: str = "it is not read") -> "IndexReader | None":
        """The reader of ``path`` if it is a whole indexed file of ``key`` of at most
        ``limit`` bytes; ``None`` otherwise (absent, truncated, foreign, a damaged table,
        not a regular file, not trusted: one warning ending in ``consequence``). Never
        raises for OS trouble or bad bytes."""
        opened = open_regular(path, limit, consequence)
        if opened is None:
            return None
        fd, size = opened
        try:
            table = _read_table(fd, size, key)
        except Exception:  # noqa: BLE001 - any unreadable index is an absent one
            table = None
        if table is None:
            os.close(fd)
            return None
        return cls(fd, Path(path), key, table)

    def __contains__(self, rid: object) -> bool:
        return rid in self._table

    def __len__(self) -> int:
        return len(self._table)

    def ids(self) -> Iterator[str]:
        """Record ids, in the order they were written."""
        return iter(self._table)

    def raw(self, rid: str) -> bytes | None:
        """The bytes of record ``rid``, or ``None`` when it is absent, cannot be read, or
        its bytes do not match its digest."""
        entry = self._table.get(rid)
        if entry is None or self._fd < 0:
            return None
        offset, length, digest = entry
        try:
            data = _pread(self._fd, length, offset)
        except OSError:
            return None
        if len(data) != length or hashlib.sha256(data).digest() != digest:
            return None
        return data

    def close(self) -> None:
        """Close the file (later reads are misses)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except (OSError, TypeError, AttributeError):  # TypeError/AttributeError: at interpreter exit
                pass

    def __del__(self):  # pragma: no cover - a reader nobody closed
        self.close()


class _Table:
    """Record id -> (offset, length, SHA-256 digest), held compactly: the ids in one dict
    to their position, offsets and lengths in two ``array('q')``, the digests in one bytes
    object (~150 bytes a record where a tuple with its own bytes and ints took ~300)."""

    def __init__(self):
        self._at: dict[str, int] = {}
        self._offsets = array.array("q")
        self._lengths = array.array("q")
        self._digests = bytearray()

    def add(self, rid: str, offset: int, length: int, digest: bytes) -> None:
        if rid in self._at:  # a later record of the same id replaces it (as a dict would)
            i = self._at[rid]
            self._offsets[i], self._lengths[i] = offset, length
            self._digests[32 * i:32 * i + 32] = digest
            return
        self._at[rid] = len(self._offsets)
        self._offsets.append(offset)
        self._lengths.append(length)
        self._digests += digest

    def get(self, rid: str) -> tuple[int, int, bytes] | None:
        i = self._at.get(rid)
        if i is None:
            return None
        return self._offsets[i], self._lengths[i], bytes(self._digests[32 * i:32 * i + 32])

    def __getitem__(self, rid: str) -> tuple[int, int, bytes]:
        entry = self.get(rid)
        if entry is None:
            raise KeyError(rid)
        return entry

    def __contains__(self, rid: object) -> bool:
        return rid in self._at

    def __len__(self) -> int:
        return len(self._at)

    def __iter__(self) -> Iterator[str]:
        return iter(self._at)


def _read_table(fd: int, size: int, key: str) -> _Table | None:
    if size < _HEAD_LEN + _TRAILER.size or _pread(fd, _HEAD_LEN, 0) != _head(key):
        return None
    t_off, t_len, t_digest, magic = _TRAILER.unpack(_pread(fd, _TRAILER.size, size - _TRAILER.size))
    if magic != TRAILER_MAGIC or t_off < _HEAD_LEN or t_len > MAX_TABLE or t_off + t_len != size - _TRAILER.size:
        return None
    raw = _pread(fd, t_len, t_off)
    if len(raw) != t_len or hashlib.sha256(raw).digest() != t_digest:
        return None
    doc = json.loads(raw)
    if doc.get("format") != FORMAT or doc.get("key") != key:
        return None
    table = _Table()
    for rid, offset, length, digest in doc.pop("records"):
        if not (isinstance(rid, str) and isinstance(offset, int) and isinstance(length, int)
                and _HEAD_LEN <= offset and length >= 0 and offset + length <= t_off):
            return None
        d = bytes.fromhex(digest)
        if len(d) != 32:
            return None
        table.add(rid, offset, length, d)
    return table


class IndexWriter:
    """An indexed file being written: records appended as they come, the table and
    trailer written by :meth:`commit`, which renames the file into place.

    The temporary file is ``.<prefix><random>`` beside ``path`` (mode 0600), removed by
    :meth:`abort` (and by the owner's pruning of dead temp files when the writer is
    killed). Not thread-safe: one thread writes.

    Raises:
        OSError: the directory cannot be created or written (from the constructor).
    """

    def __init__(self, path: str | os.PathLike, key: str, prefix: str = "probes-"):
        self.path = Path(path)
        self.key = key
        from .trust import makedirs_private

        makedirs_private(self.path.parent)
        fd, self._tmp = tempfile.mkstemp(prefix=f".{prefix}", dir=self.path.parent)  # 0600
        self._fh = os.fdopen(fd, "wb")
        self._fh.write(_head(key))
        self._at = _HEAD_LEN
        self._records: dict[str, list] = {}

    def __contains__(self, rid: object) -> bool:
        return rid in self._records

    def __len__(self) -> int:
        return len(self._records)

    def add(self, rid: str, data: bytes) -> None:
        """Append record ``rid`` (a later record of the same id replaces it in the table).

        Raises:
            OSError: the write failed (the caller may :meth:`abort`).
        """
        self._fh.write(data)
        self._records[rid] = [rid, self._at, len(data), hashlib.sha256(data).hexdigest()]
        self._at += len(data)

    def commit(self) -> Path:
        """Write the table and the trailer, and rename the file into place.

        Raises:
            OSError: the write or the rename failed (the temp file is removed).
        """
        try:
            table = json.dumps({"format": FORMAT, "key": self.key, "records": list(self._records.values())},
                               separators=(",", ":")).encode()
            self._fh.write(table)
            self._fh.write(_TRAILER.pack(self._at, len(table), hashlib.sha256(table).digest(), TRAILER_MAGIC))
            self._fh.close()
            os.replace(self._tmp, self.path)
        except BaseException:
            self.abort()
            raise
        self._tmp = None
        return self.path

    def abort(self) -> None:
        """Drop what was written (nothing replaces the file at ``path``). Never raises."""
        try:
            self._fh.close()
        except OSError:
            pass
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None
