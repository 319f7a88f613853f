"""One repro writer: a finding reduced to one node, written as a standalone reproduction.

Every finding that can be reduced to one node (a probe's cell, ``scan``'s first wrong node,
a ``sweep``'s minimal configuration) is written the same way, what an EP author attaches to
an upstream issue (docs/STYLE: "One repro writer"; Polygraphy's ``debug reduce`` output
plays the same part):

* ``model.onnx``: the one-node model, as the EP received it;
* ``inputs.npz``: the feeds, by graph input name;
* ``reference.npz``: the float64 (or exact integer) reference outputs, by graph output name;
  ``control.npz`` too when the finding has a control (the feature switched off), so
  "the EP computed the control" can be seen;
* ``repro.py``: a script that needs only onnxruntime and numpy: it runs the model on the
  EP (CPU fallback disabled for any EP but CPU, so a node on CPU fails loudly), compares
  every output with the reference under the recorded tolerance and prints, per output,
  the max abs and rel error and where; exit 0 within tolerance, 1 out of it, 2 when the
  session cannot be made or run (ORT's message printed);
* ``finding.json``: what epaudit said (title, outcome, configuration, evidence) and the
  tolerance; ``README.md``: the same for a person, with the command to run.

The directory is written to a temp directory beside it and renamed, so it is whole or
absent. Closeness is :class:`epaudit.contract.probes.Tolerance`'s rule
(``|a - e| <= atol + rtol * |e|``, elementwise, finite references only, infinities equal,
NaN matched by NaN).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

#: Names of the files a repro directory holds.
FILES = ("model.onnx", "inputs.npz", "reference.npz", "repro.py", "finding.json", "README.md")


@dataclass(frozen=True)
class Repro:
    """A finding reduced to one node.

    Attributes:
        model: serialized one-node ``ModelProto``.
        feeds: graph input name -> array (the values the EP receives).
        reference: graph output name -> expected array (float64 or exact integers).
        provider: ORT provider name the finding is about (``WebGpuExecutionProvider``).
        options: provider options, as strings.
        atol: absolute tolerance, output units.
        rtol: relative tolerance, a fraction of ``|expected|``.
        title: one line: what is wrong (``Conv C_in=9 k=3 on WebGPU: MISMATCH``).
        details: what epaudit recorded (outcome, configuration, evidence); JSON-able.
        control: output name -> control reference (the feature off), when there is one.
    """

    model: bytes
    """Serialized one-node model."""
    feeds: Mapping[str, np.ndarray]
    """Feeds by input name."""
    reference: Mapping[str, np.ndarray]
    """Expected outputs by name."""
    provider: str
    """ORT provider name."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Provider options."""
    atol: float = 1e-5
    """Absolute tolerance."""
    rtol: float = 1e-4
    """Relative tolerance."""
    title: str = ""
    """One-line summary."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """What epaudit recorded."""
    control: Mapping[str, np.ndarray] | None = None
    """Control reference, if any."""


_SCRIPT = '''#!/usr/bin/env python3
"""Standalone reproduction written by epaudit: {title}

Needs only onnxruntime and numpy. Runs model.onnx on {provider} (CPU fallback disabled for
any EP but CPU), compares each output with reference.npz: an element is within tolerance
when |actual - expected| <= atol + rtol * |expected| (finite expected values; infinities
must be equal, and a NaN expected value is matched by a NaN only). Exit 0: every output within tolerance; 1: some output out of it; 2: the
session could not be made or run.

Usage: python repro.py [--provider NAME] [--library PATH]   (--library: a plugin EP's library)
"""
import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
PROVIDER = {provider!r}
OPTIONS = {options!r}
ATOL, RTOL = {atol!r}, {rtol!r}


def main(argv):
    provider, library = PROVIDER, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--provider" and args:
            provider = args.pop(0)
        elif a == "--library" and args:
            library = args.pop(0)
        else:
            print(__doc__)
            return 2
    feeds = dict(np.load(os.path.join(HERE, "inputs.npz")))
    reference = dict(np.load(os.path.join(HERE, "reference.npz")))
    so = ort.SessionOptions()
    if provider != "CPUExecutionProvider":
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    try:
        if library:
            ort.register_execution_provider_library(provider, library)
            devices = [d for d in ort.get_ep_devices() if d.ep_name == provider]
            so.add_provider_for_devices(devices, OPTIONS)
            sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), so)
        else:
            sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), so,
                                        providers=[(provider, OPTIONS)])
        names = [o.name for o in sess.get_outputs() if o.name in reference]
        outputs = dict(zip(names, sess.run(names, feeds)))
    except Exception as exc:  # the EP refused: ORT's own words
        print(f"{{provider}}: session failed: {{exc}}")
        return 2
    print(f"onnxruntime {{ort.__version__}}, {{provider}}, session providers {{sess.get_providers()}}")
    bad = 0
    for name in names:
        a = np.asarray(outputs[name], dtype=np.float64)
        e = np.asarray(reference[name], dtype=np.float64)
        if a.shape != e.shape:
            print(f"{{name}}: shape {{a.shape}}, expected {{e.shape}}")
            bad += 1
            continue
        with np.errstate(invalid="ignore"):
            err = np.abs(a - e)
            ok = ((np.isfinite(e) & (err <= ATOL + RTOL * np.abs(e))) | (np.isinf(e) & (a == e))
                  | (np.isnan(e) & np.isnan(a)))
        n_bad = int(a.size - np.count_nonzero(ok))
        finite = np.where(np.isfinite(err), err, 0.0)
        worst = np.unravel_index(int(np.argmax(finite)), a.shape) if a.size else ()
        rel = finite / np.maximum(np.abs(e), 1e-30) if a.size else finite
        print(f"{{name}}: max abs err {{finite.max() if a.size else 0.0:.3g}}, max rel err "
              f"{{rel.max() if a.size else 0.0:.3g}} at {{tuple(int(i) for i in worst)}}; "
              f"{{n_bad}} of {{a.size}} element(s) out of tolerance (atol {{ATOL}}, rtol {{RTOL}})"
              + (f"; non-finite where the reference is finite: {{int(np.count_nonzero(~np.isfinite(a) & np.isfinite(e)))}}"
                 if np.any(~np.isfinite(a) & np.isfinite(e)) else ""))
        bad += n_bad > 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def _jsonable(x):
    """``x`` as strict JSON can hold it: arrays as lists, and a non-finite float (a
    difference of ``inf`` where the EP gave a NaN) as the string ``"inf"``, ``"-inf"`` or
    ``"nan"``, since finding.json is written with ``allow_nan=False``."""
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    if isinstance(x, float) and not np.isfinite(x):
        return str(x)
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, (bytes, bytearray)):
        return f"<{len(x)} bytes>"
    return x


def write(repro: Repro, directory: str | os.PathLike) -> Path:
    """Write ``repro`` as the directory ``directory`` (see the module docstring); returns its path.

    An existing directory of that name is replaced only when it is a repro directory itself
    (it holds ``finding.json``), never any other folder.

    Raises:
        FileExistsError: ``directory`` exists and is not a repro directory.
        OSError: the parent cannot be written.
    """
    target = Path(directory)
    if target.exists() and not (target.is_dir() and (target / "finding.json").is_file()):
        raise FileExistsError(f"{target}: exists and is not an epaudit repro directory")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        (tmp / "model.onnx").write_bytes(repro.model)
        np.savez(tmp / "inputs.npz", **{k: np.asarray(v) for k, v in repro.feeds.items()})
        np.savez(tmp / "reference.npz", **{k: np.asarray(v) for k, v in repro.reference.items()})
        if repro.control is not None:
            np.savez(tmp / "control.npz", **{k: np.asarray(v) for k, v in repro.control.items()})
        options = {str(k): str(v) for k, v in repro.options.items()}
        (tmp / "repro.py").write_text(_SCRIPT.format(title=repro.title.replace('"""', "'''"),
                                                     provider=repro.provider, options=options,
                                                     atol=float(repro.atol), rtol=float(repro.rtol)),
                                      encoding="utf-8")
        finding = {"title": repro.title, "provider": repro.provider, "options": options,
                   "tolerance": {"atol": repro.atol, "rtol": repro.rtol},
                   "inputs": {k: [str(np.asarray(v).dtype), list(np.asarray(v).shape)] for k, v in repro.feeds.items()},
                   "outputs": sorted(repro.reference), "details": _jsonable(repro.details)}
        (tmp / "finding.json").write_text(json.dumps(finding, indent=2, sort_keys=True, allow_nan=False,
                                                     default=str) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(
            f"# {repro.title or 'epaudit reproduction'}\n\n"
            f"One node on `{repro.provider}`. Run `python repro.py` (needs onnxruntime and numpy only):\n"
            "it prints each output's max abs / rel error against `reference.npz` and exits 1 when\n"
            f"an output is out of tolerance (atol {repro.atol}, rtol {repro.rtol}).\n\n"
            "`finding.json` holds what epaudit recorded; `inputs.npz` the feeds"
            + (", `control.npz` the reference with the feature switched off" if repro.control is not None else "")
            + ".\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target
