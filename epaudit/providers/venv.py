"""Virtual environments for provider and release environments: one step, one error.

What ``epaudit env create`` (:mod:`.envs`) and ``env create ort`` (:mod:`.releases`) share:
the result they print (:class:`EnvResult`), the error that names the failed step
(:class:`EnvError`), and :func:`ensure_venv`, which installs a pinned package with pip.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence


class EnvError(Exception):
    """An environment could not be made: one line saying which step failed and why."""


@dataclass(frozen=True)
class EnvResult:
    """A ready environment.

    Attributes:
        kind: the environment kind.
        python: the interpreter to give epaudit (a wrapper script for WebGPU).
        variable: the variable the shipped matrix reads (``EPAUDIT_WEBGPU_PYTHON``).
        export_file: a shell file with the ``export`` line, for ``.``-sourcing.
        worker_env: variables the EP's worker needs (already set by the wrapper), for a
            hand-written matrix that uses ``python = <venv python>`` with ``env = {…}``.
        distribution: onnxruntime distribution the worker saw (``onnxruntime-webgpu 1.27.0``).
        live: the canary node ran on the EP.
        reason: why not, in ORT's words, or ``""``.
    """

    kind: str
    """Environment kind."""
    python: str
    """Interpreter to use."""
    variable: str
    """Matrix variable."""
    export_file: str
    """Shell file with the export line."""
    worker_env: Mapping[str, str] = field(default_factory=dict)
    """Worker-only variables."""
    distribution: str = ""
    """onnxruntime distribution."""
    live: bool = False
    """Canary ran on the EP."""
    reason: str = ""
    """Why not live."""


Say = Callable[[str], None]


def _run(cmd: Sequence[str], step: str, *, env: Mapping[str, str] | None = None) -> str:
    """Run a command; on failure raise :class:`EnvError` naming the step and its last words."""
    try:
        proc = subprocess.run(list(cmd), capture_output=True, text=True, env=env)
    except OSError as exc:
        raise EnvError(f"{step}: cannot run {cmd[0]}: {exc.strerror or exc}") from None
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise EnvError(f"{step}: `{' '.join(cmd[:3])} …` exited with {proc.returncode}: {tail}")
    return proc.stdout


# --------------------------------------------------------------------------- venv
def _installed_version(python: Path, dist: str) -> str | None:
    code = ("import importlib.metadata as m, sys\n"
            "try: print(m.version(sys.argv[1]))\nexcept Exception: pass\n")
    try:
        out = subprocess.run([str(python), "-c", code, dist], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None


def ensure_venv(target: Path, package: str, cache: Path, say: Say, numpy: str = "numpy") -> Path:
    """A virtual environment at ``target`` with ``package`` and ``numpy`` (a requirement:
    ``numpy<2`` for releases built against numpy 1.x); returns its python.

    Skips everything when the pinned version is already installed there.

    Raises:
        EnvError: venv creation or pip failed (pip's last lines in the message).
    """
    python = target / "bin" / "python"
    name, _, version = package.partition("==")
    have = _installed_version(python, name) if python.exists() else None
    if have and (not version or have == version) and _installed_version(python, "numpy"):
        say(f"venv {target}: {package} already installed")
        return python
    if not python.exists():
        say(f"venv {target}: creating")
        _run([sys.executable, "-m", "venv", str(target)], "creating the virtual environment")
    say(f"venv {target}: pip install {package} {numpy} (cache {cache})")
    _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q",
          "--cache-dir", str(cache), package, numpy], f"pip install {package}")
    return python
