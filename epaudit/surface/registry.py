"""Registry extraction: the kernels one EP registers and the operator schemas of its
onnxruntime, read in that EP's own interpreter.

Like the worker (``epaudit/worker/``) this is a standalone script: it imports only the
standard library, ``onnxruntime`` (and, for plugin EPs, the worker package's ``plugins`` and
``ortinfo``, which add numpy), so
it runs under whatever interpreter the matrix names for an EP. The parent
(``epaudit/surface/kernels.py``) runs it as a *throw-away process*: in the GPU wheel on a
machine without a GPU, ``get_all_opkernel_def()`` segfaults (docs/ort-facts.md "Seeing
where a node ran"), and so does onnxruntime-openvino 1.24.1's; the crash then kills
this process only, and the parent reports it.

Invocation: ``<python> -c BOOTSTRAP registry.py REQUEST_JSON OUT_PATH`` (the bootstrap
drops the current directory from ``sys.path``, as the worker's does). The request is
``{provider, library, device, cache_dir}`` (see :func:`main` for the cache). The answer, written to ``OUT_PATH`` as JSON::

    {version, fingerprint, provider, python, ort_version, distribution,
     status: "kernels" | "none" | "unknown", method, reason, tried: [..],
     kernels: [[domain, op_type, since, until, {param: [type, ..]}], ..],
     schemas: [[domain, name, since, deprecated, param, [optional input, ..], [attribute, ..],
                [type param allows, ..]], ..]}

``status`` is ``kernels`` when the query listed kernels of the provider, ``none`` when a
query that covers this provider listed none (a compiling EP: ``GetCapability`` and
``Compile``, no kernel registry), ``unknown`` when no query could read it (``reason``).
Before each onnxruntime call that may crash, a line ``epaudit-registry: calling NAME``
goes to stderr, so the parent can say which call a crash happened in.

Sources: ``onnxruntime/python/onnxruntime_pybind_schema.cc`` (``get_all_operator_schema``
returns ``OpSchemaRegistry::get_all_schemas_with_history()``; ``get_all_opkernel_def``
instantiates the factories of the EPs compiled into the wheel from a fixed list (CPU,
CUDA, ROCm, DNNL, OpenVINO, TensorRT, MIGraphX, VitisAI, ACL, ArmNN, DML, NNAPI, RKNPU,
CoreML, XNNPACK, CANN): WebGPU is not among them); ``get_registered_ep_kernel_defs(name)``
(newer wheels) creates that EP alone, and answers only for the CPU EP and for plugin EPs
with a device (``No devices found for EP`` otherwise).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys

#: Bump when the answer's shape changes: cached answers of another version are not read.
VERSION = 4
#: Operator domains of the surface: ONNX (``""``, also written ``ai.onnx``), its ML domain
#: (``ai.onnx.ml``: what skl2onnx and onnxmltools write) and the contrib operators
#: (``com.microsoft``).
DOMAINS = ("", "ai.onnx", "ai.onnx.ml", "com.microsoft")
CPU = "CPUExecutionProvider"
MARKER = "epaudit-registry: calling "

ort = None


def _say(call: str) -> None:
    sys.stderr.write(f"{MARKER}{call}\n")
    sys.stderr.flush()


def _stat(path: str) -> list:
    try:
        st = os.stat(path)
        return [path, st.st_size, st.st_mtime_ns]
    except OSError:
        return [path, None, None]


def _package_files(module: str) -> list:
    """Size and mtime of the shared libraries of package ``module``, found without
    importing it (``find_spec`` of a top-level package does not run its ``__init__``)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return [module, None]
    root = os.path.dirname(spec.origin)
    out = [_stat(spec.origin)]
    for folder in (root, os.path.join(root, "capi")):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        out += [_stat(os.path.join(folder, n)) for n in names if ".so" in n or n.endswith((".dll", ".dylib"))]
    return out


def _devices() -> list:
    """The accelerator device nodes and the NVIDIA driver version: a query that crashes
    without a GPU (the GPU wheel's ``get_all_opkernel_def``) may answer once one is there."""
    try:
        nodes = sorted(n for n in os.listdir("/dev") if n.startswith(("nvidia", "dri", "kfd", "dxg")))
    except OSError:
        nodes = []
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8") as fh:
            nodes.append(fh.readline().strip())
    except OSError:
        pass
    return nodes


def fingerprint(provider: str, library: str | None) -> str:
    """A digest of this onnxruntime build (its shared libraries' sizes and mtimes), the
    interpreter, the provider and its plugin library, and the machine's accelerator
    devices: what the answer depends on."""
    parts = [VERSION, sys.executable, sys.version, provider, library or "", _package_files("onnxruntime"),
             _devices()]
    if library:
        module = library.split(":", 1)[0] if ":" in library and "/" not in library else None
        parts.append(_package_files(module) if module else _stat(library))
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


def _said(exc: BaseException) -> str:
    """ORT's words for a failure: from ``[ONNXRuntimeError]`` on (the C++ source location
    before it says nothing to a reader), one line, at most 400 characters."""
    text = " ".join(str(exc).split())
    at = text.find("[ONNXRuntimeError]")
    return (text[at:] if at >= 0 else text)[:400]


def _schemas(C) -> list:
    out = []
    for s in C.get_all_operator_schema():
        if s.domain not in DOMAINS:
            continue
        ins = list(s.inputs)
        # The type that names a node: the first input whose parameter allows more than one
        # type (Where's X, not its bool condition), else the first input's (types.typed_input).
        allowed = {c.type_param_str: len(c.allowed_type_strs) for c in s.type_constraints}
        named = next((i for i in ins if allowed.get(i.typeStr, 0) > 1), ins[0] if ins else None)
        param = named.typeStr if named is not None else (s.outputs[0].typeStr if list(s.outputs) else "")
        optional = [i.name for i in ins if str(i.option).endswith("Optional")]
        types = sorted(next((c.allowed_type_strs for c in s.type_constraints if c.type_param_str == param), ()))
        out.append(["" if s.domain == "ai.onnx" else s.domain, s.name, int(s.since_version),
                    bool(s.deprecated), param, optional, sorted(s.attributes), types])
    return out


def _kernel(k) -> list:
    lo, hi = k.version_range
    types = {str(p): sorted(str(t) for t in ts) for p, ts in dict(k.type_constraints).items()}
    return ["" if k.domain == "ai.onnx" else k.domain, k.op_name, int(lo), int(hi), types]


_WORKER = None


def _worker_module(name: str):
    """Module ``name`` of the worker package (``plugins``: registration and device
    selection; ``ortinfo``: the distribution reader), loaded once by path as the package
    ``epaudit_worker`` (as the worker's own bootstrap does, ``epaudit/run/spawn.py``), its
    ``ortinfo.ort`` set to this process's onnxruntime."""
    global _WORKER
    if _WORKER is None:
        folder = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "worker")
        spec = importlib.util.spec_from_file_location("epaudit_worker", os.path.join(folder, "__init__.py"),
                                                      submodule_search_locations=[folder])
        pkg = importlib.util.module_from_spec(spec)
        sys.modules["epaudit_worker"] = pkg
        spec.loader.exec_module(pkg)
        importlib.import_module("epaudit_worker.ortinfo").ort = ort
        _WORKER = pkg
    return importlib.import_module(f"epaudit_worker.{name}")


def extract(provider: str, library: str | None = None, device: dict | None = None) -> dict:
    """Read ``provider``'s registered kernels and the schemas (see the module doc).

    Never raises for ORT trouble: each failed query is in ``tried``, and ``status`` and
    ``reason`` say what is known.
    """
    global ort
    import onnxruntime as ort  # noqa: F811
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    _say("get_all_operator_schema")
    answer = {"provider": provider, "python": sys.executable, "ort_version": ort.__version__,
              "schemas": _schemas(C), "kernels": [], "status": "unknown", "method": "", "reason": "",
              "tried": []}
    try:
        answer["distribution"] = _worker_module("ortinfo")._distribution()
    except Exception:  # noqa: BLE001 - a fact only
        answer["distribution"] = ""
    query = getattr(C, "get_registered_ep_kernel_defs", None)
    if library:
        try:
            w = _worker_module("plugins")
            w.plugin_devices(provider, library, device)
        except Exception as exc:  # noqa: BLE001 - PluginError and anything ORT raises
            answer["reason"] = f"plugin library not usable: {exc}"
            return answer
    if query is not None and (library or provider == CPU):
        _say(f"get_registered_ep_kernel_defs({provider})")
        try:
            answer["kernels"] = [_kernel(k) for k in query(provider)]
            answer["method"] = "get_registered_ep_kernel_defs"
            answer["status"] = "kernels" if answer["kernels"] else "none"
            if not answer["kernels"]:
                answer["reason"] = "the EP's kernel registry is empty: a compiling EP (GetCapability/Compile)"
            return answer
        except Exception as exc:  # noqa: BLE001
            answer["tried"].append(f"get_registered_ep_kernel_defs: {_said(exc)}")
    elif query is not None:
        answer["tried"].append("get_registered_ep_kernel_defs: answers for the CPU EP and plugin EPs only")
    if library:
        answer["reason"] = "; ".join(answer["tried"]) or "no kernel query for plugin EPs in this onnxruntime"
        return answer
    _say("get_all_opkernel_def")
    try:
        every = C.get_all_opkernel_def()
    except Exception as exc:  # noqa: BLE001
        answer["tried"].append(f"get_all_opkernel_def: {_said(exc)}")
        answer["reason"] = "; ".join(answer["tried"])
        return answer
    providers = sorted({k.provider for k in every})
    answer["kernels"] = [_kernel(k) for k in every if k.provider == provider]
    answer["method"] = "get_all_opkernel_def"
    if answer["kernels"]:
        answer["status"] = "kernels"
    else:
        answer["reason"] = (f"get_all_opkernel_def lists no kernel of {provider} (it lists "
                            f"{', '.join(providers) or 'none'}; it covers only the EPs of its factory "
                            "list, so a compiling EP and an EP outside the list look alike)"
                            + "".join(f"; {t}" for t in answer["tried"]))
    return answer


def main(argv: list[str]) -> int:
    """``registry.py REQUEST_JSON OUT_PATH``: answer from the cache or extract; 0 on success.

    With ``cache_dir`` in the request, the answer lives in ``cache_dir/registry-<fingerprint>.json``:
    when that file exists, ``OUT_PATH`` only gets ``{"hit": path}`` (and onnxruntime is never
    imported: ~30 ms instead of ~0.5 s); else the extraction is written there too, whatever
    its status: an answer, even "this build has no query for that EP", holds for the build.
    A crash writes nothing, so it is met again (and reported) on the next run.
    """
    req = json.loads(argv[0])
    out_path = argv[1]
    # Whatever ORT prints must not reach a pipe the parent reads: the answer is a file.
    os.dup2(2, 1)
    key = fingerprint(req["provider"], req.get("library"))
    cache = os.path.join(req["cache_dir"], f"registry-{key}.json") if req.get("cache_dir") else None
    if cache and os.path.isfile(cache):
        _write(out_path, {"hit": cache})
        return 0
    # Where the answer goes, said before any call that may crash: the parent then records
    # the crash there, and the next run of this build reads it instead of crashing again.
    _write(out_path, {"pending": cache, "fingerprint": key})
    answer = extract(req["provider"], req.get("library"), req.get("device") or None)
    answer.update(version=VERSION, fingerprint=key)
    if cache:
        try:
            os.makedirs(req["cache_dir"], exist_ok=True)
            _write(cache, answer)
        except OSError:
            pass  # a cache that cannot be written costs time, never the answer
    _write(out_path, answer)
    return 0


def _write(path: str, doc: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, separators=(",", ":"))
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
