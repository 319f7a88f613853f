"""The probes of a run, built once on a background thread and shared by every EP.

A probe that cannot be built, or whose subject and control references do not separate, is
a string (the reason), never a probe: its cells read ``ERROR``.
"""

from __future__ import annotations

import threading
import traceback
from collections import abc
from typing import Sequence

from ..contract.probes import MIN_SEPARATION, Feature, Probe


class ProbeSet(abc.Mapping):
    """Every probe built once, in order, on a background thread, shared by every EP.

    A mapping feature id -> :class:`Probe` (or the traceback string of a build that
    raised, recorded as ``ERROR``; so is a *blind* probe, whose subject and control
    references are closer than :data:`epaudit.contract.probes.MIN_SEPARATION` tolerance bounds: an
    EP ignoring the feature could pass it, so it is never run). Building starts at
    construction, so the parent builds models and references while the workers start; a
    lookup waits only for its own probe, so the first probes run while later ones are
    still being built.

    Args:
        features: the features, in run order.
        cache: where shipped features' probes are read from and :meth:`save` writes them
            (:class:`epaudit.cache.probecache.ProbeCache`); ``None``: build everything. Cached probes
            pass the same blind-probe check as built ones.
    """

    def __init__(self, features: Sequence[Feature], cache=None):
        self._features = list(features)
        self._cache = cache
        self._cached: dict[str, Probe] = {}
        self._built: dict[str, Probe | str] = {}
        self._fresh: set[str] = set()
        self._ready = {f.id: threading.Event() for f in self._features}
        self._done = threading.Event()
        threading.Thread(target=self._build, name="epaudit-build-probes", daemon=True).start()

    def _build(self) -> None:
        try:
            from ..catalog import shipped

            self._cached = self._cache.load() if self._cache is not None else {}
            for f in self._features:
                hit = self._cached.get(f.id) if shipped(f) else None
                if hit is not None and hit.feature_id == f.id:
                    self._built[f.id] = _checked(f, hit)
                else:
                    self._built[f.id] = _build_one(f)
                    if shipped(f) and not isinstance(self._built[f.id], str):
                        self._fresh.add(f.id)
                self._ready[f.id].set()
        finally:
            for f in self._features:  # never leave a lookup waiting on a dead thread
                if not self._ready[f.id].is_set():
                    self._built.setdefault(f.id, "the probe-building thread stopped before this probe")
                    self._ready[f.id].set()
            self._done.set()

    def __getitem__(self, fid: str) -> Probe | str:
        self._ready[fid].wait()
        return self._built[fid]

    def __iter__(self):
        return iter(self._ready)

    def __len__(self) -> int:
        return len(self._ready)

    def save(self) -> bool:
        """Write the cache when this run built a shipped probe it lacked (after every
        probe is built). Returns whether a file was written; never raises for OS trouble."""
        if self._cache is None:
            return False
        self._done.wait()
        if not self._fresh:
            return False
        keep = dict(self._cached)
        keep.update({fid: self._built[fid] for fid in self._fresh})
        return self._cache.store(keep)


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
