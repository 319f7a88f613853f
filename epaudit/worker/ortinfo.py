"""What the worker runs on: the onnxruntime it imported, its distribution, devices and build.

:data:`ort` is the ``onnxruntime`` module once :func:`load` imported it: the parent imports
the worker's modules for the framing and the poison helpers only, and importing ORT there
would cost it a quarter of a second and write ORT's files into the parent's temp directory.
Every module of the worker reaches ORT as ``ortinfo.ort``.
"""

from __future__ import annotations

import os
import platform
import sys

#: ``onnxruntime``, imported by :func:`load` (in the worker process only).
ort = None


def load():
    """Import ``onnxruntime`` (once) and return it; every module of the worker then reaches
    it as ``ortinfo.ort``."""
    global ort
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    return ort




# --------------------------------------------------------------------------- ORT facts
def _dist_info_near() -> str | None:
    """``Name Version`` from the ``*.dist-info`` folder beside the imported ``onnxruntime``
    package whose RECORD lists that package's files, read as the files they are
    (core metadata ``Name:``/``Version:`` headers; RECORD rows ``path,hash,size``, PEP 376);
    ``None`` when there is no such folder."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(ort.__file__)))
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info")
                       and n.lower().startswith(("onnxruntime", "ort_nightly", "ort-nightly")))
    except OSError:
        return None
    for n in names:
        folder = os.path.join(site, n)
        try:
            with open(os.path.join(folder, "RECORD"), encoding="utf-8") as fh:
                if not any(line.startswith("onnxruntime/") for line in fh):
                    continue
            with open(os.path.join(folder, "METADATA"), encoding="utf-8") as fh:
                head = {}
                for line in fh:
                    if not line.strip():
                        break  # the headers end at the first empty line
                    key, sep, value = line.partition(":")
                    if sep:
                        head.setdefault(key.strip().lower(), value.strip())
        except OSError:
            continue
        if head.get("name") and head.get("version"):
            return f"{head['name']} {head['version']}"
    return None


def _distribution() -> str:
    """Name and version of the installed onnxruntime distribution (``onnxruntime-gpu 1.31.1``):
    the one whose RECORD lists the ``onnxruntime/`` package this process imported.

    The dist-info folders beside that package are read first (:func:`_dist_info_near`):
    ``importlib.metadata`` costs ~70 ms to import and scan, on every worker start; it
    remains for layouts without them."""
    near = _dist_info_near()
    if near is not None:
        return near
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return "unknown"
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if name.startswith("onnxruntime") or name.startswith("ort-nightly"):
            try:
                files = dist.files or []
            except Exception:  # pragma: no cover
                files = []
            if any(str(f).startswith("onnxruntime/") for f in files):
                return f"{dist.metadata['Name']} {dist.version}"
    return "unknown"


def _devices() -> list[dict]:
    """Devices ORT really found (``get_ep_devices``), which, unlike the provider list, exist."""
    out = []
    get = getattr(ort, "get_ep_devices", None)
    if get is None:
        return out
    try:
        for d in get():
            hw = d.device
            out.append({
                "ep": d.ep_name,
                "type": str(getattr(hw, "type", "")).split(".")[-1],
                "vendor": getattr(hw, "vendor", "") or getattr(d, "ep_vendor", ""),
                "metadata": dict(getattr(hw, "metadata", {}) or {}),
            })
    except Exception as exc:  # noqa: BLE001 - facts only, never fatal
        out.append({"error": str(exc)})
    return out


def _build() -> dict:
    """The onnxruntime build's own facts: package, version, CUDA/cuDNN it was built for.

    ``onnxruntime/capi/build_and_package_info.py`` is written by ORT's ``setup.py``;
    GPU wheels carry ``cuda_version`` (and ``cudnn_version`` in some releases). Facts
    only: anything missing is left out, never fatal.
    """
    out = {"build_info": str(getattr(ort, "get_build_info", lambda: "")())}
    try:
        from onnxruntime.capi import build_and_package_info as info
    except Exception:  # noqa: BLE001 - an older or unusual build: fewer facts
        return out
    for key, attr in (("package", "package_name"), ("version", "__version__"),
                      ("cuda_version", "cuda_version"), ("cudnn_version", "cudnn_version")):
        value = getattr(info, attr, None)
        if value:
            out[key] = str(value)
    return out


def hello() -> dict:
    """What this worker runs on: interpreter, platform, onnxruntime version, file and
    distribution, available providers, devices ORT found, build facts (the ``hello`` reply)."""
    return {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "ort_version": ort.__version__,
        "ort_file": ort.__file__,
        "distribution": _distribution(),
        "providers": list(ort.get_available_providers()),
        "devices": _devices(),
        "build_info": getattr(ort, "get_build_info", lambda: "")(),
        "build": _build(),
        "plugin_api": hasattr(ort, "register_execution_provider_library")
        and hasattr(ort.SessionOptions, "add_provider_for_devices"),
    }
