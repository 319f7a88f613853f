"""The machine a run happened on: a label for fleet columns and the facts behind it.

A fleet audit (docs/ci-and-fleet.md) runs ``epaudit probe --json`` on several runners and
merges the files; the same EP seen on two machines becomes two columns
(``CUDA@h100``, ``CUDA@t4``). Each report therefore records its machine: a short
**label** (``--label``, else derived from the first GPU's name, else ``cpu``) and the
facts a reader needs to tell two runners apart:

* from ``nvidia-smi`` (when it is on ``PATH``): per GPU ``name``, ``compute_capability``,
  ``driver`` and ``memory_mib``; and the highest CUDA version the driver supports
  (``cuda_driver``, from the ``CUDA Version:`` of its banner);
* hostname, platform and CPU architecture.

What the EP's own onnxruntime says (the CUDA/cuDNN versions it was built for, the
devices ``get_ep_devices()`` found) is recorded per EP by the worker, in
:attr:`epaudit.contract.results.EPInfo.build` and ``devices``, because each EP may run under
another interpreter with another onnxruntime package.
"""

from __future__ import annotations

import dataclasses
import platform
import re
import shutil
import socket
import subprocess
from typing import Any, Callable, Mapping, Sequence

from ..contract.results import RunResult

#: A machine label: becomes part of a column name ``ALIAS@LABEL``, so no ``@``.
LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
#: What a machine without an NVIDIA GPU is called unless ``--label`` says otherwise.
DEFAULT_LABEL = "cpu"
_QUERY = "name,compute_cap,driver_version,memory.total"
#: Words of a GPU name that say who made it, not which GPU it is.
_VENDOR_WORDS = {"nvidia", "tesla", "geforce", "quadro", "amd", "radeon", "intel"}
_NVSMI_TIMEOUT = 20.0

Runner = Callable[[Sequence[str]], str]


def _run(argv: Sequence[str]) -> str:
    """Run a query tool; its stdout, or ``""`` when it fails in any way (facts only)."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=_NVSMI_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def nvidia_gpus(run: Runner = _run) -> tuple[list[dict[str, Any]], str]:
    """GPUs as ``nvidia-smi`` reports them, and the driver's CUDA version.

    Returns:
        ``([{name, compute_capability, driver, memory_mib}], cuda_driver)``; ``([], "")``
        when ``nvidia-smi`` is not on ``PATH`` or fails. ``compute_cap`` needs a driver
        from 2022 or later; older ones are asked again without it.
    """
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], ""
    fields = _QUERY.split(",")
    text = run([exe, f"--query-gpu={_QUERY}", "--format=csv,noheader,nounits"])
    if not text.strip():
        fields = [f for f in fields if f != "compute_cap"]
        text = run([exe, f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    keys = {"name": "name", "compute_cap": "compute_capability", "driver_version": "driver",
            "memory.total": "memory_mib"}
    gpus = []
    for line in text.splitlines():
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields) or not values[0]:
            continue
        gpu: dict[str, Any] = {keys[f]: v for f, v in zip(fields, values)}
        if str(gpu.get("memory_mib", "")).isdigit():
            gpu["memory_mib"] = int(gpu["memory_mib"])
        gpus.append(gpu)
    banner = run([exe]) if gpus else ""
    m = re.search(r"CUDA Version\s*:\s*([0-9][0-9.]*)", banner)
    return gpus, (m.group(1) if m else "")


def derive_label(gpu_name: str | None) -> str:
    """A short label from a GPU name: ``NVIDIA H100 80GB HBM3`` -> ``h100``.

    Vendor words are dropped; the first remaining word is kept up to its first ``-``
    (``A100-SXM4-80GB`` -> ``a100``); ``RTX``/``GTX`` keep their number
    (``GeForce RTX 4090`` -> ``rtx4090``). No GPU -> :data:`DEFAULT_LABEL`.
    """
    words = [w for w in re.split(r"\s+", (gpu_name or "").strip().lower()) if w and w not in _VENDOR_WORDS]
    if not words:
        return DEFAULT_LABEL
    head = words[0].split("-")[0]
    if head in ("rtx", "gtx") and len(words) > 1:
        head += words[1].split("-")[0]
    head = re.sub(r"[^a-z0-9_.-]", "", head)
    return head[:40] if head and LABEL.match(head) else DEFAULT_LABEL


def check_label(label: str | None) -> None:
    """Raise ``ValueError`` (one line, naming ``--label``) unless ``label`` is ``None`` or valid."""
    if label is not None and not LABEL.match(label):
        raise ValueError(f"--label {label!r}: use letters, digits, '_', '.', '-' (no '@'), at most 40 characters")


def collect(label: str | None = None, run: Runner = _run) -> dict[str, Any]:
    """Facts about this machine, JSON-ready: ``{label, hostname, platform, arch, gpus,
    cuda_driver}``.

    Args:
        label: the machine label (``--label``); derived from the first GPU when ``None``.
        run: runs a query tool and returns its stdout (a test seam; default: subprocess).

    Raises:
        ValueError: ``label`` is not a valid label (letters, digits, ``_ . -``; no ``@``).
    """
    check_label(label)
    gpus, cuda_driver = nvidia_gpus(run)
    return {
        "label": label or derive_label(gpus[0]["name"] if gpus else None),
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "arch": platform.machine(),
        "gpus": gpus,
        "cuda_driver": cuda_driver,
    }


def stamp(result: RunResult, facts: Mapping[str, Any]) -> RunResult:
    """The run with its machine recorded: ``machines = {label: facts}`` and every EP
    column marked with the label (columns keep their names; only a merge renames)."""
    label = str(facts["label"])
    eps = {alias: dataclasses.replace(info, machine=label) for alias, info in result.eps.items()}
    return dataclasses.replace(result, eps=eps, machines={label: dict(facts)})
