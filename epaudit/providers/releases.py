"""Any onnxruntime release in an environment of its own, for release-to-release audits.

``epaudit env create ort --package onnxruntime==1.27.0`` makes ``<dir>/ort-1.27.0`` (a
virtual environment holding that package and a numpy it was built for), starts a worker
there, runs the canary on the CPU EP and prints the matrix lines that use it as a column
(``ORT127``). Any distribution works (``onnxruntime``, ``onnxruntime-gpu``…): the CPU EP is
in every one of them; the worker imports only onnxruntime and numpy.

What older releases need (docs/ort-facts.md "Operator schemas, kernel registries, older
releases", measured on CPU-only Linux x86_64 with Python 3.11):

* releases before 1.21 were built against numpy 1.x: 1.18–1.20 fail to import under
  numpy 2 (``_ARRAY_API not found``), so their environment gets ``numpy<2``;
* 1.16.x reads models up to IR version 9 only (``Unsupported model IR version: 10, max
  supported IR version: 9``): epaudit's probes carry the lowest IR version their opsets and
  types need (``epaudit/catalog/models.py``; the canary is Add-13 at IR 7), so 1.16 loads
  every probe whose opset it knows; a canary refused there still names the IR limit;
  releases older than an opset refuse a probe of that opset at load
  (``ValidateOpsetForDomain … till opset N``), which reads ``REJECTED`` with ORT's sentence;
* before 1.16 there is no release to audit here (:data:`MIN_VERSION`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .venv import EnvError, EnvResult, Say, ensure_venv

#: The oldest onnxruntime release the worker is supported under.
MIN_VERSION = (1, 16)
#: Releases before this one were built against numpy 1.x (import fails under numpy 2).
NUMPY2_FROM = (1, 21)
#: The oldest release that reads IR version 10 models (what epaudit's probes are).
IR10_FROM = (1, 17)

_SPEC = re.compile(r"^\s*(onnxruntime(?:[-_][A-Za-z0-9_-]+)?)\s*==\s*([0-9]+(?:\.[0-9]+){1,2}[A-Za-z0-9.+-]*)\s*$")


def parse_package(package: str | None) -> tuple[str, str, tuple[int, ...]]:
    """``onnxruntime==1.27.0`` -> ``("onnxruntime", "1.27.0", (1, 27, 0))``.

    Raises:
        EnvError: no ``--package``, not an onnxruntime distribution, no exact ``==``
            version, or a release older than :data:`MIN_VERSION`.
    """
    if not package:
        raise EnvError("--package is required for kind 'ort': the onnxruntime release to install, "
                       "e.g. --package onnxruntime==1.27.0")
    m = _SPEC.match(package)
    if not m:
        raise EnvError(f"--package {package!r}: expected an onnxruntime distribution pinned to one release, "
                       "e.g. onnxruntime==1.27.0 or onnxruntime-gpu==1.31.1")
    dist, version = m.group(1), m.group(2)
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:3])
    if parts[:2] < MIN_VERSION:
        raise EnvError(f"--package {package}: epaudit's worker runs under onnxruntime "
                       f"{'.'.join(map(str, MIN_VERSION))} and later, not {version}")
    return dist, version, parts


def alias_for(parts: tuple[int, ...]) -> str:
    """The column alias of a release: ``ORT127`` for 1.27.0, ``ORT1251`` for 1.25.1."""
    digits = list(parts[:2]) + ([parts[2]] if len(parts) > 2 and parts[2] else [])
    return "ORT" + "".join(str(d) for d in digits)


def numpy_requirement(parts: tuple[int, ...]) -> str:
    """The numpy a release imports under: ``numpy<2`` before :data:`NUMPY2_FROM`."""
    return "numpy<2" if parts[:2] < NUMPY2_FROM else "numpy"


def create_release(directory: str | os.PathLike, package: str | None, *, say: Say = lambda _: None) -> EnvResult:
    """Create (or reuse) ``<directory>/ort-<version>`` with ``package`` and check the canary.

    Returns:
        :class:`EnvResult` whose ``variable`` is ``EPAUDIT_<ALIAS>_PYTHON``; ``live`` is
        False (with the reason) when the CPU EP's canary does not run there, e.g. a
        release that cannot read the canary's IR version.

    Raises:
        EnvError: bad ``--package`` or a failed step (venv, pip).
    """
    from ..matrix.model import Provider
    from ..run.canary import inspect_provider

    dist, version, parts = parse_package(package)
    alias = alias_for(parts)
    base = Path(directory).resolve()
    name = f"ort-{version}" if dist == "onnxruntime" else f"{dist}-{version}"
    target = base / name
    target.mkdir(parents=True, exist_ok=True)
    numpy = numpy_requirement(parts)
    if numpy != "numpy":
        say(f"{dist} {version} was built against numpy 1.x: installing {numpy}")
    python = ensure_venv(target / "venv", f"{dist}=={version}", base / "cache" / "pip", say, numpy=numpy)
    variable = f"EPAUDIT_{alias}_PYTHON"
    export_file = target / "export.sh"
    export_file.write_text(f"export {variable}='{python}'\n")
    say(f"canary: starting a worker under {python}")
    status = inspect_provider(Provider(alias, "CPUExecutionProvider", python=str(python)))
    reason = status.reason
    if not status.live and parts[:2] < IR10_FROM:
        reason = (f"onnxruntime {version} reads models up to IR version 9: "
                  f"use {'.'.join(map(str, IR10_FROM))} or later ({reason})")
    return EnvResult("ort", str(python), variable, str(export_file), {}, status.distribution,
                     status.live, reason)


def matrix_lines(result: EnvResult) -> list[str]:
    """The ``[providers.ALIAS]`` table that makes this release a column of a matrix."""
    alias = result.variable[len("EPAUDIT_"):-len("_PYTHON")]
    return [f"[providers.{alias}]", 'name = "CPUExecutionProvider"', f'python = "${result.variable}"']
