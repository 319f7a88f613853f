"""The generated catalog: probes derived from the ONNX backend node test corpus.

Every single-node ai.onnx case of the installed onnx (``collect_testcases``, not
``_expanded``) gives probes of the same contract as the hand-written ones
(:class:`epaudit.contract.probes.Feature`): *ablation* (the case is the subject, the control
leaves one optional input out or sets one optional attribute back to its default) and
*variation* (the subject sets an optional attribute to another value the corpus uses or
the reference accepts, the unmodified case is the control) and *the operator itself*
(the case is the subject, the control bakes one required input in as a constant:
:mod:`.itself`), each stamped at every opset where the operator's schema accepts the
node (:mod:`.derive`). Ids: ``onnx.<Op>.<input or attribute>[=<value>].<case>.opset<N>``,
``onnx.<Op>.input:<required input>=<zeros|ones|reversed>.<case>.opset<N>`` for the
operator itself (:func:`.derive.probe_id`).

Start-up: :func:`features` reads the manifest of the store (:mod:`.store`) keyed by the
onnx installation and the derivation's source; only when there is none (first run on a
machine, a new onnx or epaudit) does it build the catalog (:mod:`.build`: ~1 min on two
cores, progress on stderr). ``EPAUDIT_GENERATED=0`` leaves the generated catalog out.
The corpus itself (generating the backend node test cases from the installed onnx, cached)
is :mod:`.cases`, which the conformance command reads too. Docs: ``docs/generated-catalog.md``.
"""

from __future__ import annotations

import sys
from functools import partial

from ...contract.probes import Feature, Probe, Use
from .switch import enabled

_SOURCE = "onnx backend node test case {case} (onnx.backend.test.case.node); reference: the case's stored " \
          "outputs and onnx.reference.ReferenceEvaluator (checked against them first)"

_probes: dict[str, Probe] | None = None  # only when the store could not be written
_reader = None
_key: str | None = None


def _probe(fid: str) -> Probe:
    """The stored probe of ``fid``, read from the store's indexed probe file one record at
    a time (the file's table is opened once, on first use; nothing else is kept).

    Raises:
        KeyError: the probe file lacks it, or its record is damaged (removed or changed
            since the manifest was read): the cell reads ``ERROR`` with this reason.
    """
    global _reader
    if _probes is not None:
        return _probes[fid]
    from ...cache.probecache import read_probe
    from . import store

    if _reader is None or _reader.key != (_key or store.key()):
        _reader = store.probes(k=_key).open()
        if _reader is None:
            raise KeyError(f"{fid}: the generated catalog's probe file is missing or damaged")
    probe = read_probe(_reader, fid)
    if probe is None:
        raise KeyError(f"{fid}: not in the generated catalog's probe file, or its record is damaged")
    return probe


def manifest(build_if_missing: bool = True) -> dict | None:
    """The manifest of this onnx and epaudit, built (and stored) first when there is none
    and ``build_if_missing``; ``None`` when it cannot be had (no cache directory, the
    corpus cannot be generated: one line on stderr says why)."""
    global _key, _reader
    from . import store

    _key = store.key()
    if _reader is not None:  # a store read before this manifest: open it again when needed
        _reader.close()
        _reader = None
    doc = store.read_manifest(k=_key)
    if doc is not None or not build_if_missing:
        return doc
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        return None  # a derivation child of a build: never a build of its own
    from .build import build
    from .cases import ConformanceError

    print("epaudit: building the generated catalog for this onnx and epaudit (once; cached)",
          file=sys.stderr, flush=True)
    try:
        built = build()
    except ConformanceError as exc:
        print(f"epaudit: generated catalog left out: {exc}", file=sys.stderr)
        return None
    if store.write(built, k=_key) is None:
        print("epaudit: generated catalog: cannot write its cache; built again next run", file=sys.stderr)
        global _probes
        from ...cache.probecache import decode_probe

        _probes = {r["id"]: decode_probe(r["probe"]) for r in built["probes"]}
        return {"features": built["probes"], "drops": built["drops"]}
    return store.read_manifest(k=_key)


def feature(entry: dict) -> Feature:
    """The :class:`Feature` of one manifest entry; its ``build`` reads the stored probe."""
    uses = entry.get("uses") or {}
    return Feature(id=entry["id"], op_type=entry["op_type"], domain=entry.get("domain", ""), opset=int(entry["opset"]),
                   dtype=entry["dtype"], changes=entry["changes"], source=_SOURCE.format(case=entry["case"]),
                   build=partial(_probe, entry["id"]),
                   uses=Use(inputs=tuple(uses.get("inputs", ())),
                            attributes={k: tuple(v) if isinstance(v, list) else v
                                        for k, v in uses.get("attributes", {}).items()}))


def features() -> tuple[Feature, ...]:
    """The generated features, in id order; empty when disabled or not to be had (no
    cache directory, the corpus cannot be generated: one line on stderr says why)."""
    if not enabled():
        return ()
    doc = manifest()
    return tuple(feature(e) for e in doc["features"]) if doc else ()
