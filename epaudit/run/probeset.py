"""The probes of a run, built once on a background thread and shared by every EP, held in
memory only a few at a time.

A probe that cannot be built, or whose subject and control references do not separate, is
a string (the reason), never a probe: its cells read ``ERROR``.

Memory does not grow with the catalog: a cached probe is read from the probe cache file one
record at a time when it is needed (:mod:`epaudit.cache.index`), a probe built by this run is
written to a spill file (unlinked as soon as it is opened, so nothing is left behind) and
read back from there, and only the :data:`KEEP` most recently used probes are kept decoded.
The building thread runs at most :data:`AHEAD` probes ahead of the furthest probe an EP has
asked for, so it never fills memory with probes nobody needs yet.
"""

from __future__ import annotations

import collections
import os
import tempfile
import threading
import traceback
from collections import abc
from typing import Sequence

from ..contract.probes import MIN_SEPARATION, Feature, Probe

#: Probes kept decoded (least recently used dropped first): the pipelined requests of a few
#: EPs and the classification of their replies all hit it.
KEEP = 64
#: How far the building thread runs ahead of the furthest probe asked for.
AHEAD = 32
_CACHED, _SPILLED = object(), object()


class _Spill:
    """Probes built this run, as records of an unlinked temp file (read back with ``pread``)."""

    def __init__(self):
        fd, path = tempfile.mkstemp(prefix="epaudit-spill-")
        os.unlink(path)  # nothing to clean up, whatever ends the run
        self._fd = fd
        self._at = 0
        self._where: dict[str, tuple[int, int]] = {}

    def add(self, fid: str, data: bytes) -> None:
        view = memoryview(data)
        start = self._at
        while view:
            n = os.pwrite(self._fd, view, self._at)
            view = view[n:]
            self._at += n
        self._where[fid] = (start, len(data))

    def raw(self, fid: str) -> bytes | None:
        where = self._where.get(fid)
        if where is None or self._fd < 0:
            return None
        data = os.pread(self._fd, where[1], where[0])
        return data if len(data) == where[1] else None

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class ProbeSet(abc.Mapping):
    """Every probe built once, in order, on a background thread, shared by every EP.

    A mapping feature id -> :class:`Probe` (or the traceback string of a build that
    raised, recorded as ``ERROR``; so is a *blind* probe, whose subject and control
    references are closer than :data:`epaudit.contract.probes.MIN_SEPARATION` tolerance bounds: an
    EP ignoring the feature could pass it, so it is never run). Building starts at
    construction, so the parent builds models and references while the workers start; a
    lookup waits only for its own probe, so the first probes run while later ones are
    still being built. A lookup may return another object than the last one for the same
    id (it was read again from disk); both hold the same bytes.

    Args:
        features: the features, in run order.
        cache: where shipped features' probes are read from and :meth:`save` writes them
            (:class:`epaudit.cache.probecache.ProbeCache`); ``None``: build everything. Cached probes
            pass the same blind-probe check as built ones.

    Call :meth:`close` when the run is over (the spill file and the cache file are closed).
    """

    def __init__(self, features: Sequence[Feature], cache=None):
        self._features = list(features)
        self._index = {f.id: i for i, f in enumerate(self._features)}
        self._cache = cache
        self._reader = None
        self._spill = _Spill()
        self._where: dict[str, object] = {}  # fid -> _CACHED, _SPILLED or the reason it cannot run
        self._fresh: list[str] = []
        self._kept: collections.OrderedDict[str, Probe] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._wanted = threading.Condition()
        self._furthest = -1
        # The builder, held back, resumes when the furthest lookup reaches _resume_at: it then
        # builds AHEAD // 2 probes before it may wait again, so it is woken once per that many
        # probes, not once per probe (each wake-up a thread switch on a 2-core machine).
        self._resume_at: int | None = None
        self._stopped = False
        # Probes are built in run order, so "probe i is ready" is "i < _built": one counter and
        # one condition, not an Event (~0.5 KB) per feature of the run.
        self._built = 0
        self._progress = threading.Condition()
        self._awaiting = 0  # lookups waiting for _built: the builder notifies only then
        self._done = threading.Event()
        threading.Thread(target=self._build, name="epaudit-build-probes", daemon=True).start()

    # ------------------------------------------------------------------ building
    def _build(self) -> None:
        try:
            from ..cache.probecache import encode_record, read_probe
            from ..catalog import shipped

            self._reader = self._cache.open() if self._cache is not None else None
            for i, f in enumerate(self._features):
                if i > self._furthest + AHEAD:
                    with self._wanted:
                        while i > self._furthest + AHEAD and not self._stopped:
                            self._resume_at = i - AHEAD // 2
                            self._wanted.wait()
                        self._resume_at = None
                if self._stopped:
                    break
                hit = None
                if self._reader is not None and shipped(f) and f.id in self._reader:
                    hit = read_probe(self._reader, f.id)
                if hit is not None:
                    got = _checked(f, hit)
                    self._where[f.id] = got if isinstance(got, str) else _CACHED
                else:
                    got = _build_one(f)
                    if isinstance(got, str):
                        self._where[f.id] = got
                    else:
                        self._spill.add(f.id, encode_record(got))
                        self._where[f.id] = _SPILLED
                        if shipped(f):
                            self._fresh.append(f.id)
                if not isinstance(got, str):
                    self._keep(f.id, got)
                with self._progress:
                    self._built = i + 1
                    if self._awaiting:
                        self._progress.notify_all()
        except Exception:  # noqa: BLE001 - every probe not built yet reads ERROR with this
            why = "the probe-building thread stopped before this probe:\n" + traceback.format_exc()
            for f in self._features:
                self._where.setdefault(f.id, why)
        finally:
            with self._progress:  # never leave a lookup waiting on a dead thread
                for f in self._features[self._built:]:
                    self._where.setdefault(f.id, "the probe-building thread stopped before this probe")
                self._built = len(self._features)
                self._progress.notify_all()
            self._done.set()

    def _keep(self, fid: str, probe: Probe) -> None:
        with self._lock:
            self._kept[fid] = probe
            self._kept.move_to_end(fid)
            while len(self._kept) > KEEP:
                self._kept.popitem(last=False)

    # ------------------------------------------------------------------ mapping
    def __getitem__(self, fid: str) -> Probe | str:
        i = self._index[fid]  # KeyError for an id not in the run
        if i > self._furthest:
            with self._wanted:
                if i > self._furthest:
                    self._furthest = i
                    if self._resume_at is not None and i >= self._resume_at:
                        self._wanted.notify_all()
        if i >= self._built:
            with self._progress:
                self._awaiting += 1
                try:
                    while i >= self._built:
                        self._progress.wait()
                finally:
                    self._awaiting -= 1
        where = self._where[fid]
        if isinstance(where, str):
            return where
        with self._lock:
            probe = self._kept.get(fid)
            if probe is not None:
                self._kept.move_to_end(fid)
                return probe
        probe = self._read(fid, where)
        if probe is None:
            return (f"the stored probe of {fid} could not be read back (its record is damaged or its "
                    "file was removed during the run)")
        self._keep(fid, probe)
        return probe

    def _read(self, fid: str, where: object) -> Probe | None:
        from ..cache.probecache import decode_probe, read_probe
        from ..worker import protocol

        if where is _CACHED:
            return read_probe(self._reader, fid) if self._reader is not None else None
        data = self._spill.raw(fid)
        return None if data is None else decode_probe(protocol.decode(data, copy=False))

    def __iter__(self):
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def finish(self) -> None:
        """Let the building thread run to the end (no EP will ask for more) and wait for it."""
        with self._wanted:
            self._furthest = len(self._features)
            self._wanted.notify_all()
        self._done.wait()

    def save(self) -> bool:
        """Write the cache when this run built a shipped probe it lacked (after every
        probe is built): the records of the file it read, copied as they are, plus the
        new ones, one record at a time. Returns whether a file was written; never raises
        for OS trouble."""
        if self._cache is None:
            return False
        self.finish()
        if not self._fresh:
            return False
        writer = self._cache.writer()
        if writer is None:
            return False
        try:
            fresh = set(self._fresh)
            if self._reader is not None:
                for rid in self._reader.ids():
                    if rid not in fresh and (data := self._reader.raw(rid)) is not None:
                        writer.add(rid, data)
            for fid in self._fresh:
                data = self._spill.raw(fid)
                if data is not None:
                    writer.add(fid, data)
        except OSError:
            writer.abort()
            return False
        return self._cache.commit(writer)

    def close(self) -> None:
        """Stop building (an interrupted run does not wait for probes nobody will run),
        close the spill file and the cache file; lookups after it read as errors."""
        with self._wanted:
            self._stopped = True
            self._wanted.notify_all()
        self._done.wait()
        self._spill.close()
        if self._reader is not None:
            self._reader.close()

    def __del__(self):  # pragma: no cover - a set nobody closed
        try:
            self._spill.close()
        except Exception:  # noqa: BLE001
            pass


def _build_one(f: Feature) -> Probe | str:
    """The probe, or why it must not run: a build traceback, or a blind probe."""
    try:
        probe = f.build()
    except Exception:  # noqa: BLE001 - reported as ERROR, never as a pass
        return traceback.format_exc()
    return _checked(f, probe)


def _checked(f: Feature, probe: Probe) -> Probe | str:
    """``probe``, or why it must not run: it is blind (see :class:`ProbeSet`)."""
    from ..classify.compare import separation

    apart = separation(probe)
    if apart < MIN_SEPARATION:
        return (f"blind probe: subject and control references of {f.id} differ by only "
                f"{apart:.3g} tolerance bounds (< {MIN_SEPARATION:g}); an EP that ignores the "
                "feature would pass")
    return probe
