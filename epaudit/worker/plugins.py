"""Plugin EPs: registering a provider library once per process and picking its devices.

ONNX Runtime docs, "Using a Plugin Execution Provider Library"
(https://onnxruntime.ai/docs/execution-providers/plugin-ep-libraries/usage.html): when
``library`` is given (a path, or ``module:function`` resolved here, in the EP's own
interpreter, e.g. ``onnxruntime_qnn:get_library_path``), the worker registers it once with
``onnxruntime.register_execution_provider_library(provider, path)``, picks the devices of
``onnxruntime.get_ep_devices()`` whose ``ep_name`` is the provider and that match every
``device`` filter (``type``, ``vendor``, ``vendor_id``, ``device_id``, ``ep_vendor``), and
sessions are built with ``SessionOptions.add_provider_for_devices(devices, options)``. A
plugin EP named without ``library`` is never live: ORT ignores an unknown name in
``providers=[...]`` and hands back a CPU session (docs/ort-facts.md "Plugin EPs").
"""

from __future__ import annotations

import importlib
import os
import re
import sys

from . import ortinfo

#: ``module:function`` (as opposed to a file path) in a provider's ``library``.
_LIBRARY_FUNCTION = re.compile(r"([A-Za-z_][\w.]*):([A-Za-z_]\w*)")

#: Device filter keys and how each is read from an ``OrtEpDevice``.
DEVICE_KEYS = ("type", "vendor", "vendor_id", "device_id", "ep_vendor")

#: Provider name -> library path registered in this process (registration happens once).
_REGISTERED: dict[str, str] = {}


# --------------------------------------------------------------------------- plugin EPs
class PluginError(Exception):
    """A plugin EP could not be set up: library not found or not loadable, no device.

    ``config`` is ``True`` for a setup mistake (the library cannot be resolved, is not a
    file, cannot be registered; no plugin API in this onnxruntime) and ``False`` when the
    machine lacks a matching device (the environment, not the matrix)."""

    def __init__(self, message: str, config: bool = True):
        super().__init__(message)
        self.config = config


def resolve_library(spec: str) -> str:
    """The plugin library path ``spec`` names: a path as is, or ``module:function()``'s result.

    Raises:
        PluginError: the module cannot be imported, or the function fails.
    """
    m = _LIBRARY_FUNCTION.fullmatch(spec)
    if m is None:
        return spec
    try:
        func = getattr(importlib.import_module(m.group(1)), m.group(2))
        return os.fspath(func())
    except Exception as exc:  # noqa: BLE001 - any failure here means "no library"
        raise PluginError(f"library {spec!r}: {type(exc).__name__}: {exc} "
                          f"(under {sys.executable})") from None


def _device_fact(dev, key: str) -> str:
    if key == "ep_vendor":
        return str(getattr(dev, "ep_vendor", ""))
    value = getattr(dev.device, key, "")
    return str(value).split(".")[-1] if key == "type" else str(value)


def describe_device(dev) -> str:
    """One device as ``EP:TYPE vendor=… vendor_id=… device_id=…`` (for reasons)."""
    facts = " ".join(f"{k}={_device_fact(dev, k)}" for k in DEVICE_KEYS if k != "type")
    return f"{dev.ep_name}:{_device_fact(dev, 'type')} {facts}"


def plugin_devices(provider: str, library: str, device: dict | None) -> list:
    """Register ``library`` for ``provider`` (once per process) and pick its devices.

    Args:
        provider: the EP name the library's devices carry (``QNNExecutionProvider``);
            also the registration name.
        library: a path, or ``module:function`` returning one.
        device: filters, key -> value (compared as case-insensitive strings).

    Returns:
        The matching ``OrtEpDevice`` objects (at least one).

    Raises:
        PluginError: no plugin API in this onnxruntime, library missing or refused by ORT,
            or no device of ``provider`` matches the filters.
    """
    if not hasattr(ortinfo.ort, "register_execution_provider_library"):
        raise PluginError(f"onnxruntime {ortinfo.ort.__version__} has no plugin EP API "
                          "(register_execution_provider_library)")
    if provider not in _REGISTERED:
        path = resolve_library(library)
        if not os.path.isfile(path):
            raise PluginError(f"library {path!r} (from {library!r}) is not a file")
        try:
            ortinfo.ort.register_execution_provider_library(provider, path)
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"registering {path!r} as {provider}: {exc}") from None
        _REGISTERED[provider] = path
    everything = list(ortinfo.ort.get_ep_devices())
    wanted = {k: str(v).lower() for k, v in (device or {}).items()}
    chosen = [d for d in everything if d.ep_name == provider
              and all(_device_fact(d, k).lower() == v for k, v in wanted.items())]
    if not chosen:
        listed = "; ".join(describe_device(d) for d in everything) or "none"
        raise PluginError(f"no device of {provider} matches {device or {}} "
                          f"(onnxruntime.get_ep_devices() lists: {listed})", config=False)
    return chosen
