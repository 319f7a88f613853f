"""The probe worker: runs models on one execution provider and reports what happened.

This module is a standalone script. It imports only the standard library,
``onnxruntime`` and ``numpy``, so that it runs under any interpreter that has *some*
onnxruntime package installed (onnxruntime-gpu, onnxruntime-webgpu, ...) even where
neither ``onnx`` nor epaudit itself is installed. The parent starts it as
``<python> /path/to/worker.py`` and speaks the message format below over its
stdin/stdout; everything ORT or Python prints goes to stderr (the worker moves fd 1
onto fd 2 at start-up), which the parent keeps as evidence.

Message format (both directions): a frame is ``<u64 header length><header JSON>``
followed by the raw blobs the header lists. In the header, a blob is referenced as
``{"__blob__": i}`` (bytes) or ``{"__array__": i, "dtype": "<f2", "shape": [..]}``
(a C-ordered numpy array); ``i`` indexes the blob list ``header["blobs"]`` of byte
lengths. Requests (``op``):

* ``hello`` -> ``{python, platform, ort_version, ort_file, distribution, providers,
  devices, build_info}``.
* ``canary`` ``{provider, options, model, feeds, expected, fault}`` -> ``{live, reason,
  placement}``: the EP is live when the canary node is placed on it and the output is
  right.
* ``probe`` ``{provider, options, cases: [{role, model, feeds, outputs}], fault}`` ->
  ``{cases: [{role, ok, stage, error, placement, outputs, create_ms, run_ms}]}``.
* ``exit``.

Faults (the test hook that makes a deliberately broken EP out of a working one, applied
here because they happen inside the EP's process): ``fallback`` skips the CPU-fallback
guard and asks for ``CUDAExecutionProvider`` (or the target, when it is not CPU) so that
ORT places the node wherever it will; ``nan`` writes NaN into element 0 of the first
float output; ``perturb`` adds ``fault_args['delta']`` to element 0 of output
``fault_args['output']``; ``kill`` sends SIGKILL to the worker after session creation; ``hang``
sleeps forever after session creation.
"""

from __future__ import annotations

import json
import os
import platform
import struct
import sys
import tempfile
import time

import numpy as np

#: ``onnxruntime``, imported by :func:`main`: the parent imports this module for the framing
#: only, and importing ORT there would cost it a quarter of a second and write ORT's
#: files into the parent's temp directory.
ort = None

CPU = "CPUExecutionProvider"
PROBE_NODE_NAME = "probe"
#: The provider the ``fallback`` fault asks for when the target is CPU: on a machine
#: without its GPU libraries ORT silently hands back a CPU session, the real failure.
FALLBACK_FAULT_PROVIDER = "CUDAExecutionProvider"
_FALLBACK_DISABLED = "fallback to CPU EP has been explicitly disabled"


# --------------------------------------------------------------------------- framing
def encode(obj) -> bytes:
    """Frame ``obj`` (JSON-able, with numpy arrays and bytes anywhere) as one message."""
    blobs: list[bytes] = []

    def walk(x):
        if isinstance(x, np.ndarray):
            a = np.ascontiguousarray(x)
            blobs.append(a.tobytes())
            return {"__array__": len(blobs) - 1, "dtype": a.dtype.str, "shape": list(a.shape)}
        if isinstance(x, (bytes, bytearray)):
            blobs.append(bytes(x))
            return {"__blob__": len(blobs) - 1}
        if isinstance(x, dict):
            return {str(k): walk(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [walk(v) for v in x]
        if isinstance(x, np.generic):
            return x.item()
        return x

    body = walk(obj)
    header = json.dumps({"body": body, "blobs": [len(b) for b in blobs]}).encode()
    return struct.pack("<Q", len(header)) + header + b"".join(blobs)


def _read_exact(stream, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("stream closed")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_message(stream):
    """Read one framed message from a binary stream; raises EOFError at end of stream."""
    (n,) = struct.unpack("<Q", _read_exact(stream, 8))
    header = json.loads(_read_exact(stream, n))
    blobs = [_read_exact(stream, size) for size in header["blobs"]]

    def walk(x):
        if isinstance(x, dict):
            if "__array__" in x:
                return np.frombuffer(blobs[x["__array__"]], dtype=np.dtype(x["dtype"])).reshape(
                    x["shape"]).copy()
            if "__blob__" in x:
                return blobs[x["__blob__"]]
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, list):
            return [walk(v) for v in x]
        return x

    return walk(header["body"])


# --------------------------------------------------------------------------- ORT facts
def _distribution() -> str:
    """Name and version of the installed onnxruntime distribution (``onnxruntime-gpu 1.31.1``)."""
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


def hello() -> dict:
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
    }


# --------------------------------------------------------------------------- sessions
def _error(stage: str, exc: BaseException) -> dict:
    """ORT status as data: class name, numeric code when the message carries one, text."""
    text = str(exc)
    code = None
    name = type(exc).__name__
    if text.startswith("[ONNXRuntimeError] : "):
        parts = text.split(" : ", 3)
        if len(parts) >= 3:
            try:
                code = int(parts[1])
            except ValueError:
                code = None
            name = parts[2].strip()
    return {"stage": stage, "type": type(exc).__name__, "code": code, "status": name,
            "message": text}


def _placement_from_assignment(sess) -> list[dict] | None:
    getter = getattr(sess, "get_provider_graph_assignment_info", None)
    if getter is None:
        return None
    out = []
    for sub in getter():
        for node in sub.get_nodes():
            out.append({"ep": sub.ep_name, "op_type": node.op_type, "domain": node.domain,
                        "name": node.name})
    return out


def _placement_from_profile(path: str) -> list[dict]:
    with open(path) as fh:
        events = json.load(fh)
    seen = {}
    for ev in events:
        if ev.get("cat") != "Node":
            continue
        args = ev.get("args", {})
        name = ev.get("name", "")
        for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
        if "provider" in args:
            seen[name] = {"ep": args["provider"], "op_type": args.get("op_name", ""),
                          "domain": "", "name": name}
    return list(seen.values())


def _session_options(guard: bool, profile_dir: str | None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    try:
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    except Exception:  # pragma: no cover - older ORT without the entry still loads
        pass
    if guard:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    if profile_dir is not None:
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(profile_dir, "epaudit")
    return so


def _providers(target: str, options: dict, guard: bool):
    if target == CPU:
        return [(CPU, options)] if options else [CPU]
    if guard:
        return [(target, options)]
    return [(target, options), CPU]


def run_case(target: str, options: dict, case: dict, fault: str | None,
             fault_args: dict | None = None) -> dict:
    """Create a session for one case on ``target``, run it once, report everything.

    Returns ``{role, ok, stage, error, placement, placement_source, outputs, create_ms,
    run_ms}``; ``stage`` is where it stopped (``create``, ``run`` or ``done``).
    """
    asked = target
    guard = target != CPU
    if fault == "fallback":
        asked = target if target != CPU else FALLBACK_FAULT_PROVIDER
        guard = False
    result = {"role": case["role"], "ok": False, "stage": "create", "error": None,
              "placement": None, "placement_source": None, "outputs": {},
              "create_ms": None, "run_ms": None, "asked": asked}
    profile_dir = None
    t0 = time.perf_counter()
    try:
        sess = _make_session(case["model"], asked, options, guard, None)
    except Exception as exc:  # noqa: BLE001 - every ORT failure is evidence
        result["error"] = _error("create", exc)
        if _FALLBACK_DISABLED in str(exc):
            # Learn where ORT would have put the nodes: same model, guard off, no run.
            try:
                probe_sess = _make_session(case["model"], asked, options, False, None)
                result["placement"] = _placement_from_assignment(probe_sess)
                result["placement_source"] = "assignment_info (fallback allowed, not run)"
            except Exception:  # noqa: BLE001
                pass
        return result
    result["create_ms"] = (time.perf_counter() - t0) * 1e3
    placement = _placement_from_assignment(sess)
    if placement is not None:
        result["placement"] = placement
        result["placement_source"] = "assignment_info"
    else:
        profile_dir = tempfile.mkdtemp(prefix="epaudit-prof-")
        sess = _make_session(case["model"], asked, options, guard, profile_dir)
        result["placement_source"] = "profiling"
    result["session_providers"] = list(sess.get_providers())
    if fault == "kill":
        os.kill(os.getpid(), 9)
    if fault == "hang":
        while True:
            time.sleep(3600)
    result["stage"] = "run"
    names = list(case["outputs"])
    t0 = time.perf_counter()
    try:
        values = sess.run(names, case["feeds"])
    except Exception as exc:  # noqa: BLE001
        result["error"] = _error("run", exc)
        return result
    result["run_ms"] = (time.perf_counter() - t0) * 1e3
    if profile_dir is not None:
        result["placement"] = _placement_from_profile(sess.end_profiling())
    outputs = {n: np.asarray(v) for n, v in zip(names, values)}
    if fault == "nan" and case["role"] == "subject":
        for n in names:
            if outputs[n].dtype.kind == "f" and outputs[n].size:
                outputs[n] = outputs[n].copy()
                outputs[n].reshape(-1)[0] = np.nan
                break
    if fault == "perturb" and case["role"] == "subject":
        name = fault_args["output"]
        outputs[name] = outputs[name].copy()
        flat = outputs[name].reshape(-1)
        flat[0] = flat[0] + np.asarray(fault_args["delta"], dtype=flat.dtype)
    result["outputs"] = outputs
    result["ok"] = True
    result["stage"] = "done"
    return result


def _make_session(model: bytes, target: str, options: dict, guard: bool, profile_dir):
    return ort.InferenceSession(model, _session_options(guard, profile_dir),
                                providers=_providers(target, options, guard))


def canary(req: dict) -> dict:
    """Is ``req['provider']`` live? Its canary node must be placed on it and compute right."""
    case = {"role": "canary", "model": req["model"], "feeds": req["feeds"],
            "outputs": list(req["expected"])}
    res = run_case(req["provider"], req.get("options") or {}, case, None)
    if not res["ok"]:
        return {"live": False, "reason": res["error"]["message"] if res["error"] else "failed",
                "placement": res["placement"]}
    on = {p["name"]: p["ep"] for p in res["placement"] or []}
    if on.get("canary") != req["provider"]:
        return {"live": False, "placement": res["placement"],
                "reason": f"ORT placed the canary node on {on.get('canary', 'no EP')}, not on "
                          f"{req['provider']} (session providers {res.get('session_providers')})"}
    for name, want in req["expected"].items():
        got = res["outputs"].get(name)
        if got is None or got.shape != want.shape or not np.allclose(got, want):
            return {"live": False, "placement": res["placement"],
                    "reason": f"canary output {name} was {got!r}, expected {want!r}"}
    return {"live": True, "reason": "", "placement": res["placement"]}


def probe(req: dict) -> dict:
    fault = req.get("fault")
    return {"cases": [run_case(req["provider"], req.get("options") or {}, c, fault, req.get("fault_args"))
                      for c in req["cases"]]}


def main() -> int:
    global ort
    import onnxruntime as ort  # noqa: F811 - see the module-level ``ort``

    # The protocol owns the real stdout; anything ORT or Python prints lands on stderr.
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    proto_in = sys.stdin.buffer
    handlers = {"hello": lambda r: hello(), "canary": canary, "probe": probe}
    while True:
        try:
            req = read_message(proto_in)
        except EOFError:
            return 0
        op = req.get("op")
        if op == "exit":
            return 0
        try:
            reply = {"ok": True, "result": handlers[op](req)}
        except Exception as exc:  # noqa: BLE001 - a worker bug, reported as ERROR
            import traceback
            reply = {"ok": False, "error": traceback.format_exc(), "type": type(exc).__name__}
        proto_out.write(encode(reply))


if __name__ == "__main__":
    sys.exit(main())
