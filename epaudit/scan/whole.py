"""``scan --whole``: the whole model on each EP, against a reference, and the first wrong node.

Each run is a child process of the EP's interpreter running :mod:`.whole_child` (the model
as deployed: default graph optimisations, the CPU EP as fallback), so a crashing EP
crashes the child, never the scan. Inputs: the user's (``--inputs file.npz``) or seeded
from the graph inputs' types and shapes (:func:`seeded`), bounded before allocation.

References:

* a non-CPU EP is compared with the **CPU EP** of the scanning interpreter;
* the CPU EP itself is compared with **onnx.reference** (its own implementations, with
  :data:`epaudit.scan.noderef.OVERRIDES` replacing the ones known wrong), where it can run
  the model: ai.onnx / ai.onnx.ml operators only, within :data:`EVAL_SECONDS` of CPU time.

Outputs are compared with whole-model tolerances (:func:`tolerance`): an element is close
when ``|a - e| <= max(atol_frac * max|e|, floor) + rtol * |e|``; integer and bool outputs
must be equal.

On a mismatch (:func:`locate`): top-level ``If`` nodes are inlined where the reference run
says which branch is taken; every intermediate tensor is exposed as an output and the
first one (in node order) that differs names the node, as Polygraphy's ``--onnx-outputs
mark all``. Exposing tensors blocks ORT's fusions, so when the exposed copy agrees
everywhere the graph is instead cut at one tensor at a time (that tensor its only output,
every fusion upstream kept), bisecting over the ancestors of the diverging output. When
the CPU EP with graph optimisations off agrees with the EP, the difference is the CPU
EP's own optimised path (a fusion), and the report says so instead of blaming the EP.
``--repro DIR`` writes the first wrong node with its real inputs through
:func:`epaudit.repro.write`.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np

from .join import Whole
from .model import Model
from .wholerun import CLASSES, MAX_SEARCH_BYTES, Target, compare, run_child, tolerance, write_feeds  # noqa: F401

#: CPU seconds onnx.reference may take on a whole model.
EVAL_SECONDS = 60.0
#: Largest sum of seeded input bytes.
MAX_INPUT_BYTES = 256 * 2**20
class WholeError(Exception):
    """Bad input for ``--whole`` (an input array of the wrong name or shape, a bound
    exceeded); ``str()`` is one line."""


_NP = {"float32": np.float32, "float16": np.float16, "float64": np.float64, "int64": np.int64, "int32": np.int32,
       "int8": np.int8, "uint8": np.uint8, "bool": np.bool_, "int16": np.int16, "uint16": np.uint16}


def _dims(model: Model, name: str, shape, dims: Mapping[str, int]) -> tuple[int, ...]:
    from .nodeconfig import BATCH_DIM, DEFAULT_DIM

    out = []
    if shape is None:
        raise WholeError(f"{model.path}: input {name!r} declares no shape: give it with --inputs")
    named = {d for _, (_, s) in model.inputs.items() for d in (s or ()) if isinstance(d, str)}
    for i, d in enumerate(shape):
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif isinstance(d, str) and d in dims:
            out.append(int(dims[d]))
        elif isinstance(d, str) and "total" in d.lower() and any("past" in x.lower() for x in named):
            past = next((x for x in named if "past" in x.lower()), None)
            seq = next((x for x in named if "sequence" in x.lower() and x != d and x != past), None)
            out.append(_named(past, dims, DEFAULT_DIM) + (_named(seq, dims, DEFAULT_DIM) if seq else DEFAULT_DIM))
        elif isinstance(d, str):
            out.append(_named(d, dims, DEFAULT_DIM))
        else:
            out.append(BATCH_DIM if i == 0 and len(shape) > 1 else DEFAULT_DIM)
    return tuple(out)


def _named(d: str | None, dims: Mapping[str, int], default: int) -> int:
    from .nodeconfig import BATCH_DIM

    if d is None:
        return default
    if d in dims:
        return int(dims[d])
    return BATCH_DIM if "batch" in d.lower() else default


def seeded(model: Model, dims: Mapping[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs from the graph inputs' types and shapes: floats uniform in [0, 1);
    an integer input named like a mask ones, like positions ``arange``, like token types
    zeros; an integer input indexing an embedding (a ``Gather``'s indices) within its rows;
    any other integer in [0, 2). Raises :class:`WholeError` over :data:`MAX_INPUT_BYTES`
    or for a type numpy cannot hold."""
    rng = np.random.default_rng(seed)
    rows = {}
    for n in model.nodes:
        if n.op_type == "Gather" and "indices" in n.inputs and "data" in n.shapes and n.scope == "graph":
            axis = int(n.attributes.get("axis", 0) or 0)
            d = n.shapes["data"][axis] if n.shapes["data"] else None
            if isinstance(d, int) and d > 0:
                rows[n.inputs["indices"]] = d
    feeds, total = {}, 0
    for name, (dtype, shape) in model.inputs.items():
        if dtype not in _NP:
            raise WholeError(f"{model.path}: input {name!r} is {dtype}: give it with --inputs")
        concrete = _dims(model, name, shape, dims)
        total += math.prod(concrete) * np.dtype(_NP[dtype]).itemsize
        if total > MAX_INPUT_BYTES:
            from .safe import esc

            raise WholeError(f"{esc(model.path)}: seeded inputs would take over {MAX_INPUT_BYTES // 2**20} MiB (input "
                             f"{esc(name)!r} {list(concrete)}): bind smaller dims with --dim, or give --inputs")
        low = name.lower()
        if dtype.startswith(("int", "uint")):
            if "mask" in low:
                x = np.ones(concrete)
            elif "position" in low and concrete:
                x = np.broadcast_to(np.arange(concrete[-1]), concrete)
            elif "token_type" in low:
                x = np.zeros(concrete)
            elif name in rows:
                x = rng.integers(0, rows[name], size=concrete)
            else:
                x = rng.integers(0, 2, size=concrete)
        elif dtype == "bool":
            x = rng.random(concrete) < 0.5
        else:
            x = rng.random(concrete)
        feeds[name] = np.ascontiguousarray(np.asarray(x).astype(_NP[dtype]))
    return feeds


def given(model: Model, path: str) -> dict[str, np.ndarray]:
    """The user's inputs (``--inputs file.npz``), checked against the graph inputs.

    Raises:
        WholeError: unreadable file, a missing or unknown input, a wrong dtype or rank.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            feeds = {k: np.asarray(z[k]) for k in z.files}
    except (OSError, ValueError) as exc:
        raise WholeError(f"--inputs {path}: not a readable .npz ({type(exc).__name__})") from None
    missing = sorted(set(model.inputs) - set(feeds))
    if missing:
        raise WholeError(f"--inputs {path}: no array for input {missing[0]!r} of {model.path}")
    out = {}
    for name, (dtype, shape) in model.inputs.items():
        a = feeds[name]
        if dtype in _NP and a.dtype != np.dtype(_NP[dtype]):
            raise WholeError(f"--inputs {path}: {name!r} is {a.dtype}, the model takes {dtype}")
        if shape is not None and len(shape) != a.ndim:
            raise WholeError(f"--inputs {path}: {name!r} has rank {a.ndim}, the model takes {len(shape)}")
        out[name] = a
    return out


def evaluator(proto, feeds: Mapping[str, np.ndarray], outputs=None) -> dict[str, np.ndarray]:
    """The model on onnx.reference (overrides for its known-wrong operators), within
    :data:`EVAL_SECONDS`. Raises ``RuntimeError`` with a one-line reason."""
    from onnx.reference import ReferenceEvaluator

    from . import noderef

    domains = {n.domain for n in proto.graph.node} - {"", "ai.onnx", "ai.onnx.ml"}
    if domains:
        raise RuntimeError(f"onnx.reference has no {sorted(domains)[0]} operators")
    wrong = sorted({n.op_type for n in proto.graph.node if ("ai.onnx.ml" if n.domain == "ai.onnx.ml" else "",
                                                            n.op_type) in noderef.KNOWN_WRONG})
    if wrong:
        raise RuntimeError(f"onnx.reference's {wrong[0]} is known wrong ({noderef.KNOWN_WRONG[('ai.onnx.ml', wrong[0])]})"
                           if ("ai.onnx.ml", wrong[0]) in noderef.KNOWN_WRONG else f"{wrong[0]} known wrong")

    def go():
        sess = ReferenceEvaluator(proto, new_ops=_overrides())
        names = outputs or [o.name for o in proto.graph.output]
        return dict(zip(names, sess.run(names, dict(feeds))))

    saved = noderef.EVAL_SECONDS
    noderef.EVAL_SECONDS = EVAL_SECONDS
    try:
        return noderef._limited(go)
    except noderef.NoReference as exc:
        raise RuntimeError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - the evaluator's failure is the reason
        raise RuntimeError(f"onnx.reference raised {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    finally:
        noderef.EVAL_SECONDS = saved


def _overrides():
    from onnx.reference.op_run import OpRun

    from .noderef import _batchnorm_inference

    class BatchNormalization(OpRun):
        op_domain = ""

        def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None,
                 spatial=None, is_test=None):
            y = _batchnorm_inference({"X": x, "scale": scale, "B": bias, "input_mean": mean, "input_var": var},
                                     {"epsilon": 1e-5 if epsilon is None else epsilon})["Y"]
            return (y.astype(x.dtype),)
    return [BatchNormalization]


def outputs_line(rows: list[dict]) -> str:
    """The worst output difference in words."""
    bad = [r for r in rows if not r["match"]]
    if not bad:
        return f"{len(rows)} output(s) within tolerance"
    worst = max(bad, key=lambda r: r.get("max_rel", 0.0) if math.isfinite(r.get("max_abs", 0)) else math.inf)
    if "shape" in worst:
        return f"{worst['name']}: shape {worst['shape'][0]}, reference {worst['shape'][1]}"
    return (f"{len(bad)} of {len(rows)} output(s) differ; worst {worst['name']}: max abs {worst['max_abs']:.3g}"
            f" ({worst.get('max_rel', 0):.3g} of its largest reference value), {worst['bad']} of {worst['size']}"
            " element(s) out of tolerance")


def run(model: Model, targets: list[Target], reference: Target, feeds: Mapping[str, np.ndarray], *,
        timeout: float = 600.0, repro: str | None = None, node_outcomes=None, progress=None) -> list[Whole]:
    """The whole model on every target against its reference (module doc); one
    :class:`~epaudit.scan.join.Whole` per target.

    ``node_outcomes(node_name, ep) -> (outcome, summary) | None`` names the node-config
    probe's outcome at the first diverging node.
    """
    from .locate import locate

    cls = tolerance(model)
    if model.problems:
        return [Whole(t.alias, "not run", f"the model cannot be loaded: {model.problems[0]}") for t in targets]
    out: list[Whole] = []
    with tempfile.TemporaryDirectory(prefix="epaudit-whole-") as work:
        feeds_path = write_feeds(feeds, work)
        ref_result, ref_out = run_child(reference, model.path, feeds_path, work, timeout=timeout)
        for t in targets:
            if progress is not None:
                progress(f"whole model on {t.alias}: {model.path}")
            if (t.name, t.python, dict(t.options), t.fault, t.library) == (
                    reference.name, reference.python, dict(reference.options), reference.fault, reference.library):
                # The reference itself: judged by onnx.reference instead.
                out.append(_cpu_whole(model, t, ref_result, ref_out, feeds, cls, work, timeout, repro))
                continue
            if not ref_result.get("ok"):
                out.append(Whole(t.alias, "not run", f"the reference (CPU EP) cannot run it: {ref_result['error']}",
                                 "CPU EP"))
                continue
            result, got = run_child(t, model.path, feeds_path, work, profile=True, timeout=timeout)
            refname = f"CPU EP (onnxruntime {ref_result.get('ort_version', '?')})"
            if not result.get("ok"):
                status = "crashed" if result.get("stage") in ("crash", "timeout") else "failed"
                out.append(Whole(t.alias, status, f"{result.get('stage')}: {result.get('error', '')}", refname))
                continue
            rows = [{"name": n, **compare(got[n], ref_out[n], cls)} for n in ref_out if n in got]
            if not rows:
                out.append(Whole(t.alias, "not run", "no tensor output to compare (sequences, maps or strings only)",
                                 refname))
                continue
            if all(r["match"] for r in rows):
                out.append(Whole(t.alias, "match", outputs_line(rows), refname, tuple(rows)))
                continue
            found = locate(model, t, reference, feeds, feeds_path, work, cls, timeout, rows,
                           os.path.join(repro, t.alias) if repro else None, node_outcomes)
            out.append(Whole(t.alias, found.get("status", "mismatch"), outputs_line(rows), refname, tuple(rows),
                             found.get("first"), found.get("repro", ""), tuple(found.get("notes", ()))))
    return out


def _cpu_whole(model: Model, t: Target, ref_result: dict, ref_out: dict, feeds, cls: str, work: str,
               timeout: float, repro: str | None) -> Whole:
    """The CPU EP against onnx.reference."""
    if not ref_result.get("ok"):
        status = "crashed" if ref_result.get("stage") in ("crash", "timeout") else "failed"
        return Whole(t.alias, status, f"{ref_result.get('stage')}: {ref_result.get('error', '')}", "onnx.reference")
    import onnx

    try:
        size = Path(model.path).stat().st_size + sum(
            (Path(model.path).parent / e).stat().st_size for e in model.external)
        if size > MAX_SEARCH_BYTES // 8:
            raise RuntimeError(f"the model is {size / 2**20:.0f} MiB: onnx.reference is not run on it")
        proto = onnx.load(model.path)
        got = evaluator(proto, feeds)
    except RuntimeError as exc:
        return Whole(t.alias, "not run", f"no independent reference: {exc}", "onnx.reference")
    except Exception as exc:  # noqa: BLE001 - a model onnx cannot load fully
        return Whole(t.alias, "not run", f"no independent reference: {type(exc).__name__}", "onnx.reference")
    rows = [{"name": n, **compare(ref_out[n], np.asarray(got[n]), cls)} for n in ref_out if n in got
            and isinstance(got[n], np.ndarray) and np.asarray(got[n]).dtype.kind not in "OUS"]
    if not rows:
        return Whole(t.alias, "not run", "no tensor output to compare (sequences, maps or strings only)",
                     "onnx.reference")
    status = "match" if all(r["match"] for r in rows) else "mismatch"
    return Whole(t.alias, status, outputs_line(rows), "onnx.reference (the model's own dtypes)", tuple(rows))
