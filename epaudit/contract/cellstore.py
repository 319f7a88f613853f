"""The classified cells of a run kept on disk, their evidence read back when it is asked for.

A run's cells are what every report is made from; their evidence (comparisons, placement,
ORT's words) is a few kilobytes each, so at 16x today's catalog (50 000 cells on one EP)
holding it all would take several hundred megabytes. A :class:`CellStore` writes each cell's
evidence to a private file the moment the cell is classified and keeps in memory only what
the gate and the tables read for every cell: outcome, summary, control outcome, seconds and
a few small facts, one tuple a cell. It is a ``Mapping`` (feature id, alias) ->
:class:`Classified`, made when a cell is looked up, whose ``evidence`` is an
:class:`Evidence`, a read-only ``dict`` that loads the cell's evidence on first use (the last
:data:`RECENT` loaded stay loaded), so the gate, the claims audit and every report work on it
as on a dict of cells. The file is unlinked as soon as it is opened:
nothing is left behind, whatever ends the process.

Evidence is stored as JSON with Python's non-finite numbers (``NaN``, ``Infinity``), so a
value reads back as it was written (tuples come back as lists, numpy scalars as Python
numbers, enums as their values: what the JSON report holds).
"""

from __future__ import annotations

import collections
import enum
import json
import os
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, Callable, Iterable, Iterator

from .results import Classified

#: Evidence dicts kept decoded (a report formats one cell at a time; the gate never reads one).
RECENT = 32

#: ``extra(key, cell, facts) -> value``: a key added to every cell's evidence when it is read
#: (the claims audit's ``layers``), computed from what the store keeps in memory; ``None``
#: leaves the key out of that cell.
ExtraFn = Callable[[tuple[str, str], Classified, Mapping[str, Any]], Any]


def _default(x: Any) -> Any:
    if isinstance(x, enum.Enum):
        return x.value
    if hasattr(x, "item") and callable(x.item):  # numpy scalar
        return x.item()
    if hasattr(x, "tolist") and callable(x.tolist):  # a small array left in evidence
        return x.tolist()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    if hasattr(x, "isoformat"):
        return x.isoformat()
    raise TypeError(f"evidence value of type {type(x).__name__} is not JSON-ready")


#: What an unloaded :class:`Evidence` holds as a dict: one key no evidence has, so that C code
#: which looks at the dict's size first (``json.dumps``'s encoder writes ``{}`` for an empty
#: dict without asking it for its items) asks it for its items, which loads it.
_UNLOADED = {"\0unloaded": True}
#: The empty ``extra`` and ``facts`` every cell without them shares (never changed).
_NONE: Mapping[str, Any] = {}


class Evidence(dict):
    """One cell's evidence: a ``dict`` that reads itself from its store when first used.

    Every way of reading it (``[]``, ``get``, ``in``, iteration, ``len``, ``items``, ``==``,
    ``dict(ev)``, ``{**ev}``, ``json.dumps(ev)``) loads it first; the store keeps at most
    :data:`RECENT` of them loaded and empties the oldest (it loads again when next read), so
    reading every cell of a run never holds all their evidence. Keys given as ``extra`` are
    computed when read, from what the store keeps in memory (:meth:`CellStore.with_extra`),
    without reading the file. Do not change it: it is the cell's record.
    """

    __slots__ = ("_file", "_at", "_key", "_extra", "_cell", "_facts", "_loaded")

    def __init__(self, file: "_File", at: tuple[int, int], key: tuple[str, str],
                 extra: Mapping[str, ExtraFn] | None = None, cell: Classified | None = None,
                 facts: Mapping[str, Any] | None = None):
        super().__init__(_UNLOADED)
        self._file, self._at, self._key = file, at, key
        # Shared, never changed: no dict of its own per cell.
        self._extra, self._cell, self._facts = extra or _NONE, cell, facts or _NONE
        self._loaded = False

    def _load(self) -> "Evidence":
        if not self._loaded:
            data = self._file.read(self._at)
            for name in self._extra:
                data.pop(name, None)
                value = self._extra[name](self._key, self._cell, self._facts)
                if value is not None:
                    data[name] = value
            dict.clear(self)
            dict.update(self, data)
            self._loaded = True
            self._file.loaded(self)
        return self

    def _unload(self) -> None:
        dict.clear(self)
        dict.update(self, _UNLOADED)
        self._loaded = False

    def __getitem__(self, name):
        if name in self._extra and not self._loaded:  # no file read for a computed key
            value = self._extra[name](self._key, self._cell, self._facts)
            if value is None:
                raise KeyError(name)
            return value
        return dict.__getitem__(self._load(), name)

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name) -> bool:
        return dict.__contains__(self._load(), name)

    def __iter__(self):
        return iter(list(dict.keys(self._load())))

    def __len__(self) -> int:
        return dict.__len__(self._load())

    def __bool__(self) -> bool:
        return dict.__len__(self._load()) > 0

    def keys(self):
        return list(dict.keys(self._load()))

    def values(self):
        return list(dict.values(self._load()))

    def items(self):
        return list(dict.items(self._load()))

    def copy(self) -> dict:
        return dict(dict.items(self._load()))

    def __eq__(self, other) -> bool:
        return dict(dict.items(self._load())) == (dict(other.items()) if isinstance(other, Mapping) else other)

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return repr(dict(dict.items(self._load())))

    def __reduce__(self):
        return (dict, (dict(dict.items(self._load())),))

    def _refuse(self, *a, **k):
        raise TypeError("a stored cell's evidence is read-only")

    __setitem__ = __delitem__ = update = setdefault = pop = popitem = clear = _refuse


#: Bytes of evidence buffered before one write to the store's file.
WRITE_BATCH = 256 * 1024


class _File:
    """The unlinked file the evidence of one store lives in."""

    def __init__(self):
        fd, path = tempfile.mkstemp(prefix="epaudit-cells-")
        os.unlink(path)
        self.fd = fd
        self.at = 0
        self.lock = threading.Lock()
        self._recent: collections.OrderedDict[int, Evidence] = collections.OrderedDict()
        self._decoded: collections.OrderedDict[int, dict] = collections.OrderedDict()
        # Records not yet written, from file offset _pending_at on: one pwrite per
        # WRITE_BATCH bytes instead of one per cell (a tenth of the parent's time per probe
        # went to those system calls). A record is never split between buffer and file.
        self._pending = bytearray()
        self._pending_at = 0

    def append(self, data: bytes) -> tuple[int, int]:
        with self.lock:
            start = self.at
            self._pending += data
            self.at += len(data)
            if len(self._pending) >= WRITE_BATCH:
                self._flush()
            return start, len(data)

    def _flush(self) -> None:
        view = memoryview(self._pending)
        at = self._pending_at
        while view:
            n = os.pwrite(self.fd, view, at)
            view = view[n:]
            at += n
        del view
        self._pending.clear()
        self._pending_at = self.at

    def read(self, at: tuple[int, int]) -> dict:
        """The evidence at ``at`` (offset, length), decoded: a dict of its own (the last
        :data:`RECENT` decoded are kept, so a cell read again, as a new :class:`Evidence`
        each time it is looked up, is not decoded again)."""
        with self.lock:
            done = self._decoded.get(at[0])
            if done is not None:
                self._decoded.move_to_end(at[0])
                return dict(done)
            if at[0] >= self._pending_at:
                off = at[0] - self._pending_at
                data = bytes(self._pending[off:off + at[1]])
            else:
                data = None
        if data is None:
            data = os.pread(self.fd, at[1], at[0])
            if len(data) != at[1]:  # pragma: no cover - our own file, never truncated
                raise OSError(f"cell evidence at {at[0]}: {len(data)} of {at[1]} bytes read back")
        doc = json.loads(data)
        with self.lock:
            self._decoded[at[0]] = doc
            while len(self._decoded) > RECENT:
                self._decoded.popitem(last=False)
        return dict(doc)

    def loaded(self, ev: Evidence) -> None:
        """``ev`` was just loaded: keep the last :data:`RECENT`, empty the oldest."""
        with self.lock:
            self._recent[id(ev)] = ev
            self._recent.move_to_end(id(ev))
            while len(self._recent) > RECENT:
                _, old = self._recent.popitem(last=False)
                old._unload()

    def __del__(self):
        try:
            os.close(self.fd)
        except OSError:
            pass


class CellStore(Mapping):
    """(feature id, alias) -> :class:`Classified`, evidence on disk (see the module docstring).

    Thread-safe for :meth:`put` from several threads (one per EP). Iteration is in the
    order cells were put, or the order given to :meth:`reorder`.
    """

    def __init__(self):
        self._file = _File()
        #: A cell put here: (outcome, summary, control, seconds, file, offset, length); one
        #: adopted with computed evidence or a plain dict: its Classified as it is.
        self._cells: dict[tuple[str, str], tuple | Classified] = {}
        self._facts: dict[tuple[str, str], Mapping[str, Any]] = {}
        self._extra: dict[str, ExtraFn] = {}
        self._interned: dict[tuple, Mapping[str, Any]] = {}

    @classmethod
    def of(cls, cells: Iterable[Classified]) -> "CellStore":
        """A store holding ``cells`` (later cells of the same key replace earlier ones)."""
        store = cls()
        for c in cells:
            store.put(c)
        return store

    def put(self, cell: Classified, facts: Mapping[str, Any] | None = None) -> Classified:
        """Store ``cell`` (its evidence written now) with ``facts`` (small JSON values kept in
        memory for :meth:`with_extra` functions). Returns the stored cell, whose evidence is
        read back from disk.

        In memory the cell is one tuple (outcome, summary, control, seconds, file, offset,
        length) and its facts one dict shared by every cell with equal facts: ~200 bytes a
        cell where a :class:`Classified` with its :class:`Evidence` took ~1.5 KB
        (``benchmarks/floor_vs_check.py``, 57,472 cells at 16x the catalog).

        Raises:
            TypeError: evidence that is not JSON-ready.
            OSError: the evidence cannot be written (a full disk).
        """
        data = json.dumps(dict(cell.evidence), default=_default, separators=(",", ":")).encode()
        key = (cell.feature_id, cell.ep)
        at, n = self._file.append(data)
        with self._file.lock:
            self._cells[key] = (cell.outcome, cell.summary, cell.control, cell.seconds, self._file, at, n)
            if facts:
                self._facts[key] = self._shared(facts)
            else:
                self._facts.pop(key, None)
        return self._cell(key, self._cells[key])

    def _shared(self, facts: Mapping[str, Any]) -> Mapping[str, Any]:
        """One dict for all equal ``facts`` (most cells' are ``{"claimed": True}``)."""
        try:
            k = tuple(sorted(facts.items()))
            return self._interned.setdefault(k, dict(facts))
        except TypeError:  # an unhashable or unorderable value: its own copy
            return dict(facts)

    def _cell(self, key: tuple[str, str], rec, extra: Mapping[str, ExtraFn] | None = None) -> Classified:
        """The :class:`Classified` of a stored record (``extra`` computed into its evidence)."""
        if not isinstance(rec, tuple):
            return rec
        outcome, summary, control, seconds, file, at, n = rec
        base = Classified(key[0], key[1], outcome, summary, Evidence(file, (at, n), key), control, seconds)
        if not extra:
            return base
        ev = Evidence(file, (at, n), key, extra, base, self.facts(key))
        return Classified(key[0], key[1], outcome, summary, ev, control, seconds)

    def rename(self, key: tuple[str, str], ep: str) -> Classified:
        """The cell of ``key`` as the cell of column ``ep`` (same evidence, not copied)."""
        c = self._cell(key, self._cells[key])
        return Classified(c.feature_id, ep, c.outcome, c.summary, c.evidence, c.control, c.seconds)

    def adopt(self, cell: Classified, facts: Mapping[str, Any] | None = None) -> None:
        """Keep ``cell`` as it is (its evidence already on this store's or another live
        store's file, e.g. from :meth:`rename`); nothing is written."""
        key = (cell.feature_id, cell.ep)
        ev = cell.evidence
        if isinstance(ev, Evidence) and not ev._extra:  # kept as a record, the evidence where it is
            rec = (cell.outcome, cell.summary, cell.control, cell.seconds, ev._file, ev._at[0], ev._at[1])
        else:
            rec = cell
        with self._file.lock:
            self._cells[key] = rec
            if facts:
                self._facts[key] = self._shared(facts)

    def facts(self, key: tuple[str, str]) -> Mapping[str, Any]:
        """The facts :meth:`put` kept for ``key`` (empty when none)."""
        return self._facts.get(key, {})

    def reorder(self, keys: Iterable[tuple[str, str]]) -> None:
        """Iterate in the order of ``keys`` (keys not given follow, in their order)."""
        order = {k: self._cells[k] for k in keys if k in self._cells}
        for k, c in self._cells.items():
            order.setdefault(k, c)
        self._cells = order

    def with_extra(self, name: str, fn: ExtraFn) -> "CellStore":
        """A view of this store whose cells' evidence also holds ``name``: ``fn(key, cell,
        facts)``, computed when it is read (nothing rewritten)."""
        view = CellStore.__new__(CellStore)
        view._file, view._facts, view._interned = self._file, self._facts, self._interned
        view._extra = {**self._extra, name: fn}
        view._cells = self._cells
        return view

    def __getitem__(self, key: tuple[str, str]) -> Classified:
        c = self._cells[key]
        if isinstance(c, tuple):
            return self._cell(key, c, self._extra)
        if not self._extra:
            return c
        facts = self.facts(key)
        if isinstance(c.evidence, Evidence):
            ev = Evidence(c.evidence._file, c.evidence._at, key, {**c.evidence._extra, **self._extra}, c, facts)
        else:  # a plain dict adopted as it is
            more = {n: fn(key, c, facts) for n, fn in self._extra.items()}
            ev = {**c.evidence, **{n: v for n, v in more.items() if v is not None}}
        return Classified(c.feature_id, c.ep, c.outcome, c.summary, ev, c.control, c.seconds)

    def get(self, key, default=None):
        """The cell of ``key``, or ``default``."""
        if key not in self._cells:
            return default
        return self[key]

    def __contains__(self, key: object) -> bool:
        return key in self._cells

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)
