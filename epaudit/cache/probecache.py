"""Built probes kept on disk, so that a run does not rebuild what the last one built.

Building the default catalog (ONNX models through ``onnx.helper``, float64 references
through :mod:`epaudit.reference`) costs the parent about a third of a second plus
onnx's own import (~0.3 s), every run, for bytes and arrays that only change when the
catalog does. This cache keeps them, in the directory conformance cases use
(:func:`default_cache_dir`).

What may be cached: only features of the shipped catalog, by object identity
(:func:`epaudit.catalog.shipped`). A feature made elsewhere (a test's deliberately
broken variant, a ``dataclasses.replace`` of a shipped one) is always built, so a
cache entry can never stand in for a different computation under the same id.

When an entry is used: the file name and header carry :func:`probe_key`, a SHA-256 of
everything a shipped probe is a function of: :data:`FORMAT`, the catalog version, the
source text of the catalog, reference, model-building and probe-contract modules, and
the numpy and onnx installations. Any change to those gives another key, so a stale
file is never read (and is removed when the new one is written).

Trust: the directory and the file are read only when owned by the user running epaudit
and not writable by group or others (:mod:`epaudit.cache.trust`, OpenSSH's StrictModes
rule, checked on the open file); otherwise one warning line, and the probes are built now
and not stored. A SHA-256 inside the file does not stand in for that: whoever writes it
recomputes it. The directory is created ``0700`` and the file ``0600``.

Integrity: a file is an indexed record file (:mod:`.index`): a head with the key, one record
per probe (one frame of the worker's message format, :func:`epaudit.worker.protocol.encode`:
JSON header and raw array bytes, no pickle), an offset table with a SHA-256 per record, and a
trailer with the table's digest. A run opens the table and reads each probe when it needs
it (:meth:`ProbeCache.open`), never the whole file, so its memory does not grow with the
catalog. A file that is truncated (no whole trailer), of another key or with a damaged table
is ignored and the probes are built again; a record whose digest does not match is a miss
of that probe alone. Files are written to a temporary name and renamed into place; a cache
that cannot be written or read only costs the rebuild, never a result. Cached probes
pass the same blind-probe check as fresh ones (:class:`epaudit.run.probeset.ProbeSet`).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Mapping

import numpy as np

from ..contract.probes import Case, Probe, Tolerance
from ..worker import protocol as _framing
from .index import MAGIC, IndexReader, IndexWriter

#: Bump when the stored form of a probe changes: older files are then never read.
#: 2: the indexed file of :mod:`.index` (1 was one frame of every probe, read whole).
FORMAT = 2
#: Largest cache file opened; anything larger is a miss (and the run rebuilds every probe).
#: Only its table and the probes a run needs are read, one at a time, so the bound is a
#: guard against absurd files, not the memory a run takes. The default catalog's file is
#: ~37 MB with the generated catalog (~8 MB without it); the 16x replicated catalog of
#: benchmarks/floor_vs_check.py ~0.6 GB. At 64 MiB a catalog 2.3x today's lost its cache
#: silently: every warm run rebuilt and rewrote it (measured: 113 MB at 4x, read as a miss).
MAX_BYTES = 64 * 1024 * 1024 * 1024
__all__ = ["MAGIC", "FORMAT", "ProbeCache", "probe_key", "read_probe", "encode_record"]
#: Temporary files of a write that never finished (the writer was killed) older than
#: this are removed by the next write, seconds.
STALE_TEMP_SECONDS = 3600
#: Files of other keys untouched this long are removed by a write, seconds: another
#: install using the same directory keeps its file while it is in use.
STALE_KEY_SECONDS = 7 * 24 * 3600
#: Files of other keys beyond this many most recently used are removed by a write too:
#: each epaudit change or virtual environment is a new key, and with the generated
#: catalog a file is ~28 MB (40 of them, 1.1 GB, piled up on one machine in a day).
KEEP_KEYS = 4
#: Modules (relative to the package) whose source determines what a shipped probe is.
SOURCES = ("catalog", "reference", "contract/probes.py")
_PREFIX = "probes-"


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$EPAUDIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/epaudit``, else ``~/.cache/epaudit``;
    ``None`` when none of them names a place (no usable home directory).

    A relative ``XDG_CACHE_HOME`` is ignored, as the XDG Base Directory specification
    says; so is a home directory that is not an absolute path other than ``/``.
    """
    environ = os.environ if environ is None else environ
    if environ.get("EPAUDIT_CACHE_DIR"):
        return Path(environ["EPAUDIT_CACHE_DIR"])
    xdg = environ.get("XDG_CACHE_HOME") or ""
    if os.path.isabs(xdg):
        return Path(xdg) / "epaudit"
    home = environ.get("HOME") if "HOME" in environ else os.path.expanduser("~")
    if not home or not os.path.isabs(home) or home == "/":
        return None
    return Path(home) / ".cache" / "epaudit"


def _onnx_dist() -> tuple[Path | None, list[str]]:
    """onnx's ``__init__.py`` and the ``onnx-*.dist-info`` names beside its package, found
    without importing onnx (~0.3 s) or scanning every distribution (``importlib.metadata``,
    ~80 ms)."""
    import importlib.util

    spec = importlib.util.find_spec("onnx")
    if spec is None or not spec.origin:
        return None, []
    init = Path(spec.origin)
    try:
        names = os.listdir(init.parent.parent)
    except OSError:
        return init, []
    return init, sorted(n for n in names if n.endswith(".dist-info")
                        and n.lower().startswith(("onnx-", "onnx_weekly-")))


def onnx_version() -> str:
    """Version of the installed onnx (``1.23.2``), from its dist-info name when there is one
    (else onnx's own ``__version__``, which costs its import); ``"not installed"``."""
    init, dists = _onnx_dist()
    if init is None:
        return "not installed"
    if len(dists) == 1:
        return dists[0][: -len(".dist-info")].split("-", 1)[1]
    import onnx

    return onnx.__version__


def _onnx_install() -> str:
    """The installed onnx for the key: dist-info names and size and mtime of ``__init__.py``."""
    init, dists = _onnx_dist()
    if init is None:
        return "onnx: not installed"
    try:
        st = init.stat()
    except OSError:
        return f"onnx: {init} {dists}"
    return f"onnx: {init} {dists} {st.st_size} {st.st_mtime_ns}"


def probe_key(catalog_version: int) -> str:
    """The cache key of the shipped catalog's probes, 64 hex digits.

    A SHA-256 over :data:`FORMAT`, ``catalog_version``, the numpy version, the onnx
    installation (:func:`_onnx_install`) and the bytes of every ``.py`` file under
    :data:`SOURCES`, in sorted order.
    """
    h = hashlib.sha256()
    h.update(f"format {FORMAT}\ncatalog {catalog_version}\nnumpy {np.__version__}\n"
             f"{_onnx_install()}\n".encode())
    root = Path(__file__).resolve().parents[1]
    for name in SOURCES:
        path = root / name
        files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
        for f in files:
            h.update(str(f.relative_to(root)).encode() + b"\0")
            h.update(f.read_bytes() + b"\0")
    return h.hexdigest()


def _read_regular(path: Path, limit: int, consequence: str = "it is not read") -> bytes | None:
    """The bytes of ``path`` when it is a regular file of at most ``limit`` bytes that this
    user owns and nobody else can write (:func:`epaudit.cache.trust.problem`, checked on
    the open file), else ``None`` (an untrusted file with one warning, ``consequence``
    saying what happens instead): a FIFO or device at the cache path must not block or
    flood the run."""
    import stat

    from .trust import problem, warn

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        why = problem(st, "the file")
        if why:
            warn(path, why, consequence)
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(limit + 1)
        return data if len(data) <= limit else None
    finally:
        os.close(fd)


def _case_to(case: Case | None):
    if case is None:
        return None
    return {"model": case.model, "feeds": dict(case.feeds), "outputs": list(case.outputs),
            "reference": dict(case.reference), "exact": sorted(case.exact)}


def _case_from(d) -> Case | None:
    if d is None:
        return None
    return Case(model=d["model"], feeds=d["feeds"], outputs=tuple(d["outputs"]),
                reference=d["reference"], exact=frozenset(d["exact"]))


def encode_probe(probe: Probe) -> dict:
    """``probe`` as a dict of JSON values, bytes and arrays (the worker framing's body)."""
    return {"feature_id": probe.feature_id, "subject": _case_to(probe.subject),
            "control": _case_to(probe.control),
            "tolerance": [probe.tolerance.atol, probe.tolerance.rtol],
            "dtype": probe.dtype, "node_name": probe.node_name}


def decode_probe(d: dict) -> Probe:
    """The :class:`Probe` :func:`encode_probe` made ``d`` from.

    Raises:
        KeyError, TypeError, ValueError: ``d`` is not such a dict.
    """
    atol, rtol = d["tolerance"]
    return Probe(feature_id=d["feature_id"], subject=_case_from(d["subject"]),
                 control=_case_from(d["control"]), tolerance=Tolerance(float(atol), float(rtol)),
                 dtype=d["dtype"], node_name=d["node_name"])


#: What happens instead when the cache directory or file is not trusted.
_UNTRUSTED = "probes are built now and not stored"

_KEY_FILE = re.compile(rf"{_PREFIX}[0-9a-f]{{64}}\.bin")
_TEMP_FILE = re.compile(rf"\.{_PREFIX}\w+")


def _prune(keep: Path) -> None:
    """Remove, beside ``keep``, the cache files of other keys not used for
    :data:`STALE_KEY_SECONDS` or not among the :data:`KEEP_KEYS` most recently used
    (``keep`` counts as one; a load marks its file used), and the temp files of writes
    that died more than :data:`STALE_TEMP_SECONDS` ago. Files of any other name are never
    touched."""
    for path in stale(keep.parent, _KEY_FILE, keep.name):
        try:
            os.unlink(path)
        except OSError:
            pass


def stale(directory: Path, pattern: re.Pattern, current: str) -> list[str]:
    """Paths in ``directory`` :func:`_prune` removes: files of another key than
    ``current`` (names matching ``pattern``) unused for :data:`STALE_KEY_SECONDS` or
    beyond the :data:`KEEP_KEYS` most recently used, and dead temp files. The generated
    catalog's store (:mod:`epaudit.catalog.corpus.store`) prunes its manifests by the
    same rule. Never raises."""
    import time

    now = time.time()
    try:
        entries = [e for e in os.scandir(directory) if e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    keyed, out = [], []
    for e in entries:
        try:
            mtime = e.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if e.name != current and pattern.fullmatch(e.name):
            keyed.append((mtime, e.path))
        elif _TEMP_FILE.fullmatch(e.name) and now - mtime > STALE_TEMP_SECONDS:
            out.append(e.path)
    keyed.sort(reverse=True)
    for n, (mtime, path) in enumerate(keyed):
        if n >= KEEP_KEYS - 1 or now - mtime > STALE_KEY_SECONDS:
            out.append(path)
    return out


class ProbeCache:
    """The probe cache file for one key in one directory.

    Args:
        directory: where the file lives (created on :meth:`store`); ``None``: no cache
            (:meth:`load` finds nothing, :meth:`store` does nothing).
        key: :func:`probe_key` of the running catalog.
    """

    def __init__(self, directory: str | os.PathLike | None, key: str):
        self.directory = Path(directory) if directory is not None else None
        self.key = key

    @property
    def path(self) -> Path | None:
        """The cache file, ``<directory>/probes-<key>.bin``."""
        return None if self.directory is None else self.directory / f"{_PREFIX}{self.key}.bin"

    def open(self) -> IndexReader | None:
        """The cache file open for reading one probe at a time (:func:`read_probe`), or
        ``None`` when there is no usable file (absent, truncated, foreign, over
        :data:`MAX_BYTES`, not a regular file, or in a directory or a file that is not
        trusted: :mod:`epaudit.cache.trust`, one warning). Marks the file used. Never raises."""
        from .trust import trusted_dir

        path = self.path
        if path is None or not trusted_dir(self.directory, _UNTRUSTED):
            return None
        reader = IndexReader.open(path, self.key, MAX_BYTES, _UNTRUSTED)
        if reader is not None:
            try:
                os.utime(path)  # in use: other installs' writes leave it alone
            except OSError:
                pass
        return reader

    def load(self) -> dict[str, Probe]:
        """Feature id -> cached probe, every one read (tests and small tools; a run reads
        one at a time through :meth:`open`); empty when there is no usable file, and a
        record that does not match its digest is left out. Never raises."""
        reader = self.open()
        if reader is None:
            return {}
        try:
            out = {}
            for fid in reader.ids():
                p = read_probe(reader, fid)
                if p is not None:
                    out[fid] = p
            return out
        finally:
            reader.close()

    def writer(self) -> IndexWriter | None:
        """A writer of this key's file (records added as probes come, :meth:`commit`
        renames it into place and prunes other keys), or ``None`` without a directory,
        when the directory is not trusted (:mod:`epaudit.cache.trust`: nothing is stored)
        or when it cannot be created (made ``0700``, the file ``0600``)."""
        from .trust import trusted_dir

        if self.path is None or not trusted_dir(self.directory, _UNTRUSTED):
            return None
        try:
            return IndexWriter(self.path, self.key, _PREFIX)
        except OSError:
            return None

    def commit(self, writer: IndexWriter) -> bool:
        """Rename ``writer``'s file into place and remove the files of other keys.
        Returns whether it was written; an OS error is ``False``, never raised."""
        try:
            path = writer.commit()
        except OSError:
            return False
        _prune(path)
        return True

    def store(self, probes: Mapping[str, Probe]) -> bool:
        """Write ``probes`` (feature id -> probe) as this key's file, atomically, and
        remove the files of other keys. Returns whether the file was written; an OS
        error (read-only or full disk) is a ``False``, never raised."""
        writer = self.writer()
        if writer is None:
            return False
        try:
            for fid, p in probes.items():
                writer.add(fid, encode_record(p))
        except OSError:
            writer.abort()
            return False
        return self.commit(writer)


def encode_record(probe: Probe) -> bytes:
    """One probe as a record of the indexed file: one worker frame (JSON and raw bytes)."""
    return _framing.encode(encode_probe(probe))


def read_probe(reader: IndexReader, fid: str) -> Probe | None:
    """Probe ``fid`` from an open cache file, or ``None`` when it is absent, its bytes do
    not match their digest, or they are not a probe of that id. Arrays are read-only views
    into the record's bytes (nothing else is kept). Never raises."""
    data = reader.raw(fid)
    if data is None:
        return None
    try:
        probe = decode_probe(_framing.decode(data, copy=False))
    except Exception:  # noqa: BLE001 - a damaged record is a miss of that probe
        return None
    return probe if probe.feature_id == fid else None
