"""ONNX backend node test cases: generated from the installed onnx, cached on disk.

The onnx wheel no longer ships ``onnx/backend/test/data/node`` (docs/ort-facts.md "ONNX
backend node tests"), so the cases are generated with
``onnx.backend.test.case.node.collect_testcases(op_type=...)`` (about 10 s for
``Attention`` with onnx 1.23.2). That function fills a module-global list on first
import and returns it ever after, whatever ``op_type`` a later call names, so each
operator is generated in a fresh child process of the current interpreter.

Each case is prepared once, at generation, into what the worker runs:

* the node under test is renamed :data:`epaudit.contract.probes.PROBE_NODE_NAME` so placement
  checks find it; an ``_expanded`` case (the op's function body inlined into primitive
  nodes, which never reaches the EP's kernel for the op) keeps its nodes and is judged
  as a whole graph (:attr:`epaudit.contract.probes.Probe.node_name` is ``None``);
* bfloat16 graph inputs and outputs become float32 with ``Cast`` nodes named
  ``cast_in.<name>`` / ``cast_out.<name>`` around the graph, the convention of
  :mod:`epaudit.catalog.models`: numpy has no bfloat16 the worker could carry;
* the tolerance is the case's own ``rtol`` / ``atol`` (onnx's defaults: 1e-3 / 1e-7),
  with ``rtol`` raised to ``2**-6`` when an output is bfloat16, as onnx's own runner
  does (``onnx/backend/test/runner/__init__.py``, ``assert_similar_outputs``).

The cache lives under ``$EPAUDIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/epaudit``, else
``~/.cache/epaudit``, in ``onnx-<version>/format-<CACHE_FORMAT>/<op>/``: an
``index.json`` plus one ``<i>.onnx`` model and one ``<i>.npz`` of inputs and float64
references per case. A directory is written whole under a temporary name and renamed
into place, so a reader never sees half a cache. A case folder is read only when it and
every file in it are owned by this user and writable by no one else
(:mod:`epaudit.cache.trust`): otherwise one warning, and the cases are generated again
into a private temporary directory for this run (removed once read).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ...cache.probecache import default_cache_dir, onnx_version  # onnx_version: the case cache's key
from ...contract.probes import PROBE_NODE_NAME, Case, Probe, Tolerance
from .types import first_input_type, widen_bfloat16

#: Bump when the prepared form of a case changes: older caches are then ignored.
CACHE_FORMAT = 4
#: onnx's runner floor for bfloat16 outputs: two bfloat16 ULPs (``2**-6``).
BFLOAT16_RTOL = 2.0 ** -6
#: Suffix onnx gives the function-body variant of a case.
EXPANDED_SUFFIX = "_expanded"


class ConformanceError(Exception):
    """Cases cannot be had: unknown operator, generation failed, unusable cache.

    ``str(err)`` is one line the CLI prints before exiting 2.
    """


@dataclass(frozen=True)
class BackendCase:
    """One ONNX backend node test case, prepared to run on an EP.

    Attributes:
        id: the case name (``test_attention_4d_causal_fp16``), unique across operators.
        op_type: the operator it was generated for (``Attention``).
        opset: the opset the model imports for the probed node's domain (ai.onnx; ai.onnx.ml for its cases).
        expanded: an ``_expanded`` case: tests the op's function body, not the EP's
            kernel for the op.
        probe: the subject (model, float feeds, float64 reference), no control, the
            case's tolerance; ``None`` when the case could not be prepared.
        error: why it could not be prepared (a traceback: an epaudit limit or bug,
            reported as ``ERROR``), or ``""``.
    """

    id: str
    """Case name."""
    op_type: str
    """Operator it tests."""
    opset: int
    """Opset of the probed node's domain in the model."""
    expanded: bool
    """Function-body variant."""
    probe: Probe | None
    """What runs; None if it could not be prepared."""
    error: str = ""
    """Why it could not be prepared."""


def load_cases(ops: Sequence[str], cache_dir: str | os.PathLike | None = None,
               *, timeout: float = 600.0) -> tuple[BackendCase, ...]:
    """Every backend node test case of ``ops`` (``_expanded`` ones included), in onnx's order.

    Generates (in a child process) and caches what is not cached yet for this onnx version.

    Raises:
        ConformanceError: an operator has no backend node test case in this onnx, the
            generation failed or timed out, or the cache cannot be written or read.
    """
    import onnx.defs

    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if root is None:
        raise ConformanceError("no cache directory for the generated cases: no usable home "
                               "directory; give --cache-dir or set $EPAUDIT_CACHE_DIR")
    out: list[BackendCase] = []
    for op in dict.fromkeys(ops):
        if not onnx.defs.has(op):  # fail before the (slow) generation
            raise ConformanceError(f"--op {op}: onnx {onnx_version()} has no backend node test case for op "
                                   f"{op!r}: no such ai.onnx operator (names are case-sensitive; contrib ops "
                                   "such as GroupQueryAttention have no backend tests)")
        folder = root / f"onnx-{onnx_version()}" / f"format-{CACHE_FORMAT}" / op
        out.extend(_cached(op, folder, timeout))
    return tuple(out)


#: What happens instead when a case folder is not trusted.
_UNTRUSTED = "the cases are generated again for this run into a private temporary directory"


def _folder_problem(folder: Path) -> str:
    """Why ``folder`` and its files are not trusted (:mod:`epaudit.cache.trust`), or ``""``."""
    from ...cache.trust import path_problem, problem

    why = path_problem(folder)
    if why or not folder.is_dir():
        return why
    try:
        for e in os.scandir(folder):
            why = problem(e.stat(), f"its {e.name}")  # follows a link: what is read is judged
            if why:
                return why
    except OSError as exc:
        return f"cannot be examined ({exc.strerror or exc})"
    return ""


def _cached(op: str, folder: Path, timeout: float) -> list[BackendCase]:
    """The cases of ``op`` from ``folder``, generated there first when missing; from a
    private temporary directory when ``folder`` is not trusted."""
    from ...cache.trust import warn

    why = _folder_problem(folder)
    if why:
        warn(folder, why, _UNTRUSTED)
        private = Path(tempfile.mkdtemp(prefix="epaudit-cases-"))
        try:
            _generate(op, private / op, timeout)
            return _read(op, private / op)
        finally:
            shutil.rmtree(private, ignore_errors=True)
    if not (folder / "index.json").is_file():
        _generate(op, folder, timeout)
    return _read(op, folder)


#: Folder name (beside the per-operator ones) of the whole corpus's single-node cases.
CORPUS_FOLDER = "_corpus"


def load_corpus(cache_dir: str | os.PathLike | None = None, *, timeout: float = 600.0) -> tuple[BackendCase, ...]:
    """Every single-node ai.onnx and ai.onnx.ml backend node test case of the installed onnx, not
    ``_expanded``, in onnx's order, each with its own ``op_type``.

    One child process generates the whole corpus (``collect_testcases()`` computes every
    operator's cases whatever ``op_type`` it is given: ~18 s with onnx 1.23.2, where one
    child per operator would pay that ~190 times); cached in ``<cache>/onnx-<version>/
    format-<CACHE_FORMAT>/_corpus/``. Used by the generated catalog
    (:mod:`epaudit.catalog.corpus`).

    Raises:
        ConformanceError: no cache directory, the generation failed or timed out.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    if root is None:
        raise ConformanceError("no cache directory for the generated cases: no usable home "
                               "directory; set $EPAUDIT_CACHE_DIR")
    folder = root / f"onnx-{onnx_version()}" / f"format-{CACHE_FORMAT}" / CORPUS_FOLDER
    return tuple(_cached(CORPUS_FOLDER, folder, timeout))


def _generate(op: str, folder: Path, timeout: float) -> None:
    from ...cache.trust import makedirs_private

    try:
        makedirs_private(folder.parent)
        tmp = Path(tempfile.mkdtemp(prefix=f".{op}-", dir=folder.parent))
    except OSError as exc:
        raise ConformanceError(f"cache {folder.parent}: cannot write there ({exc.strerror or exc})") from None
    package_root = str(Path(__file__).resolve().parents[3])
    env = dict(os.environ)
    env["PYTHONPATH"] = package_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-W", "ignore", "-c",
           "import sys; from epaudit.catalog.corpus.cases import _generate_main; sys.exit(_generate_main(sys.argv[1:]))",
           op, str(tmp)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ConformanceError(f"generating the {op} backend test cases took over {timeout:g} s") from None
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConformanceError(f"--op {op}: {tail}")
    try:
        os.rename(tmp, folder)
    except OSError:
        # Another run cached the same operator meanwhile: theirs is as good as ours.
        shutil.rmtree(tmp, ignore_errors=True)
        if not (folder / "index.json").is_file():
            raise ConformanceError(f"cache {folder}: cannot write there") from None


def _generate_main(argv: list[str]) -> int:
    """Child-process entry: generate ``argv[0]``'s cases into folder ``argv[1]``."""
    op, dest = argv
    os.umask(0o077)  # the case files are this user's alone (epaudit/cache/trust.py)
    import onnx
    from onnx.backend.test.case.node import collect_testcases

    if op == CORPUS_FOLDER:
        cases = [c for c in collect_testcases(None) if c.kind == "node" and EXPANDED_SUFFIX not in c.name
                 and len(c.model.graph.node) == 1 and c.model.graph.node[0].domain in ("", "ai.onnx", "ai.onnx.ml")]
    else:
        cases = [c for c in collect_testcases(op_type=op) if c.kind == "node"]
    if not cases:
        print(f"onnx {onnx.__version__} has no backend node test case for op {op!r} "
              "(op types are case-sensitive; contrib ops such as GroupQueryAttention have none)",
              file=sys.stderr)
        return 1
    index = {"onnx": onnx.__version__, "format": CACHE_FORMAT, "op": op, "cases": []}
    for i, tc in enumerate(cases):
        case_op = tc.model.graph.node[0].op_type if op == CORPUS_FOLDER else op
        entry = {"name": tc.name, "file": str(i), "op": case_op}
        try:
            entry.update(_prepare(tc, case_op, Path(dest) / str(i)))
        except Exception:  # noqa: BLE001 - kept and reported as ERROR for this case only
            entry["error"] = traceback.format_exc()
        index["cases"].append(entry)
    (Path(dest) / "index.json").write_text(json.dumps(index, indent=1), encoding="utf-8")
    return 0


def _prepare(tc, op: str, stem: Path) -> dict:
    """Write one case's prepared model and arrays; return its index fields."""
    import onnx

    if len(tc.data_sets) != 1:
        raise ValueError(f"{tc.name}: {len(tc.data_sets)} data sets; node cases have exactly one")
    model = onnx.ModelProto()
    model.CopyFrom(tc.model)
    expanded = tc.name.endswith(EXPANDED_SUFFIX)
    if not expanded:
        targets = [n for n in model.graph.node if n.op_type == op]
        if len(targets) != 1:
            raise ValueError(f"{tc.name}: {len(targets)} {op} nodes; expected one")
        targets[0].name = PROBE_NODE_NAME
    inputs, refs = tc.data_sets[0]
    graph_in = [vi.name for vi in model.graph.input if vi.name not in {i.name for i in model.graph.initializer}]
    graph_out = [vi.name for vi in model.graph.output]
    if len(inputs) != len(graph_in) or len(refs) != len(graph_out):
        raise ValueError(f"{tc.name}: {len(inputs)} inputs / {len(refs)} outputs for graph with "
                         f"{len(graph_in)} / {len(graph_out)}")
    # A scalar input is a numpy scalar in some cases (Clip's min and max): a 0-d tensor;
    # Cast and CastLike store TensorProto values (onnx 1.23), read as arrays.
    inputs = [_array(a) for a in inputs]
    refs = [_array(a) for a in refs]
    for a in list(inputs) + list(refs):
        if not isinstance(a, np.ndarray) or a.dtype == object:
            raise ValueError(f"{tc.name}: a non-tensor or string value; epaudit compares numeric tensors only")
        if a.dtype.name not in _NUMERIC:
            raise ValueError(f"{tc.name}: a {a.dtype.name} value (no numpy dtype ORT feeds; types.py UNBUILDABLE)")
    if op in _ELEMENTWISE_CASTS and not expanded:
        inputs, refs = _finite(inputs, refs)
    bf16 = widen_bfloat16(model)
    feeds = {f"in{k}": (np.asarray(a).astype(np.float32) if a.dtype.name == "bfloat16" else np.asarray(a))
             for k, a in enumerate(inputs)}
    reference = {f"out{k}": np.asarray(r).astype(np.float32).astype(np.float64) if r.dtype.name == "bfloat16"
                 else np.asarray(r).astype(np.float64) for k, r in enumerate(refs)}
    stem.with_suffix(".onnx").write_bytes(model.SerializeToString())
    np.savez(stem.with_suffix(".npz"), **feeds, **reference)
    out_bf16 = any(r.dtype.name == "bfloat16" for r in refs)
    # The opset of the probed node's domain (ai.onnx, or ai.onnx.ml for its cases).
    node_domain = next((n.domain for n in model.graph.node if n.op_type == op), "")
    domains = ("", "ai.onnx") if node_domain in ("", "ai.onnx") else (node_domain,)
    opset = next((o.version for o in model.opset_import if o.domain in domains), 0)
    return {"inputs": graph_in, "outputs": graph_out, "expanded": expanded, "opset": opset,
            "rtol": max(tc.rtol, BFLOAT16_RTOL) if out_bf16 else tc.rtol, "atol": tc.atol,
            "dtype": "bfloat16" if out_bf16 or bf16 else first_input_type(tc.model, op) or (str(refs[0].dtype) if refs else "")}


#: dtype names a case value may have: numpy's numeric types and bfloat16 (widened to float32).
_NUMERIC = frozenset({"float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                      "int64", "uint64", "bool", "bfloat16"})


#: Cast operators: elementwise, and their corpus cases feed NaN on purpose (a NaN reference
#: never compares equal; the whole case would be dropped as ``reference has NaN``).
_ELEMENTWISE_CASTS = frozenset({"Cast", "CastLike"})


def _finite(inputs: list, refs: list) -> tuple[list, list]:
    """A Cast case with its NaN elements set to 0 in the input and the output alike (the cast
    of 0 is 0 in every type): the rest of the case, infinities included, stays as stored.
    Unchanged when the first input and the outputs do not have one shape."""
    x = inputs[0] if inputs else None
    if x is None or x.dtype.kind != "f" or not refs or any(r.shape != x.shape for r in refs):
        return inputs, refs
    nan = np.isnan(x)
    if not nan.any():
        return inputs, refs
    fixed = [np.where(nan, np.zeros((), x.dtype), x)] + list(inputs[1:])
    out = []
    for r in refs:
        r = r.copy()
        r[nan] = 0
        out.append(r)
    return fixed, out


def _array(a):
    """A case value as an array: a numpy scalar as a 0-d array, a TensorProto read by
    ``numpy_helper.to_array``; anything else unchanged (refused by the caller)."""
    import onnx
    from onnx import numpy_helper

    if isinstance(a, np.generic):
        return np.asarray(a)
    if isinstance(a, onnx.TensorProto):
        return numpy_helper.to_array(a)
    return a
    return ""


def _read(op: str, folder: Path) -> list[BackendCase]:
    try:
        index = json.loads((folder / "index.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConformanceError(f"cache {folder}: unreadable index ({exc}); delete the folder to regenerate") from None
    out = []
    for entry in index["cases"]:
        name = entry["name"]
        op = entry.get("op", op)
        if "error" in entry:
            out.append(BackendCase(name, op, 0, name.endswith(EXPANDED_SUFFIX), None, entry["error"]))
            continue
        stem = folder / entry["file"]
        try:
            model = stem.with_suffix(".onnx").read_bytes()
            with np.load(stem.with_suffix(".npz"), allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except (OSError, ValueError) as exc:
            raise ConformanceError(f"cache {folder}: case {name} unreadable ({exc}); delete the folder "
                                   "to regenerate") from None
        feeds = {n: arrays[f"in{k}"] for k, n in enumerate(entry["inputs"])}
        reference = {n: arrays[f"out{k}"] for k, n in enumerate(entry["outputs"])}
        case = Case(model, feeds, tuple(entry["outputs"]), reference)
        probe = Probe(name, case, None, Tolerance(atol=entry["atol"], rtol=entry["rtol"]), entry["dtype"],
                      node_name=None if entry["expanded"] else PROBE_NODE_NAME)
        out.append(BackendCase(name, op, entry["opset"], entry["expanded"], probe))
    return out


def names(cases: Iterable[BackendCase]) -> list[str]:
    """The case names, in order."""
    return [c.id for c in cases]
