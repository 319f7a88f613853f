"""Sessions on one EP: options, the CPU-fallback guard, placement, poisoned output buffers.

Non-CPU EPs run with ``session.disable_cpu_ep_fallback = 1`` and only the target listed;
placement comes from ``get_provider_graph_assignment_info()`` (profiling where that API
returns nothing), never from ``get_providers()`` (docs/ort-facts.md "Seeing where a node ran").

Unwritten outputs: where the target EP has a device the Python API can allocate on
(:data:`BIND_DEVICES`), each model runs :data:`RUNS` times through IOBinding, every output
bound to a fresh buffer on that device pre-filled with the poison of that run
(:func:`poison_fill`: a distinct quiet-NaN payload per run for floats, a sentinel for
integers). After each run the worker counts the elements that still hold that run's poison
bit pattern (``poisoned``, one ``{output: count}`` per run): a kernel that never writes an
output cannot pass by chance, not even with a buffer left over from an earlier run.
Outputs come from the last run. Where binding is impossible (no known device, an output
whose shape or dtype is unknown, or ORT refuses the binding), the worker runs plainly once
and says why in ``binding``. The fault hooks (:mod:`.faults`) act at fixed points of
:func:`run_case`.
"""

from __future__ import annotations

import json
import os
import tempfile
import time

import numpy as np

from . import faults, ortinfo
from .plugins import plugin_devices
from .protocol import CPU, PROBE_NODE_NAME

_FALLBACK_DISABLED = "fallback to CPU EP has been explicitly disabled"

#: Provider -> the ``OrtValue`` device type its outputs are bound on: the EP's own memory,
#: so an unwritten output keeps the poison instead of whatever a copy brings back.
#: Other EPs run plainly (``binding`` says so).
BIND_DEVICES = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda",
                "DmlExecutionProvider": "dml"}

#: Runs per model under IOBinding, each with its own poison.
RUNS = 2

#: Poison bit patterns per run: quiet NaNs with payloads no arithmetic produces (ORT and
#: numpy produce the default NaN), and integer sentinels.
_POISON_BITS = {
    "float16": (np.uint16, (0x7E5A, 0x7EA5)),
    "float32": (np.uint32, (0x7FC0DEAD, 0x7FC0BEEF)),
    "float64": (np.uint64, (0x7FF80000DEADDEAD, 0x7FF80000BEEFBEEF)),
    "int32": (np.int32, (-0x5A5A5A5B, -0x3C3C3C3D)),
    "int64": (np.int64, (-0x5A5A5A5A5A5A5A5B, -0x3C3C3C3C3C3C3C3D)),
}

_ORT_TYPES = {"tensor(float16)": "float16", "tensor(float)": "float32", "tensor(double)": "float64",
              "tensor(int32)": "int32", "tensor(int64)": "int64"}


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
    # Every model has a node, so an empty list means ORT did not record the assignment
    # (onnxruntime-webgpu 1.27 returns []): use profiling instead.
    return out or None


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
    so = ortinfo.ort.SessionOptions()
    so.log_severity_level = 3
    try:
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    except Exception:  # pragma: no cover - older ORT without the entry still loads
        pass
    if guard:
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    # The worker's one intra-op pool, of ORT's default size (ortinfo._share_thread_pool):
    # the same thread count and partitioning as a user's session, without a pool started
    # and joined per session. Where there is none, the session's own pool sleeps instead of
    # spinning on the core the parent classifies on (docs/performance.md: 7-8 % of the
    # wall time of `check --ep CPU`).
    if ortinfo.SHARED_POOL:
        so.use_per_session_threads = False
    else:
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
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


def poison_fill(dtype: str, shape, run: int) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` holding the poison of run ``run`` (0-based).

    Raises:
        KeyError: a dtype without a poison (bool, ...).
    """
    raw, patterns = _POISON_BITS[dtype]
    bits = np.full(tuple(shape), patterns[run % len(patterns)], dtype=raw)
    return bits.view(np.dtype(dtype))


#: numpy dtype -> (raw integer dtype, poison per run as that raw type): looked up by the
#: array's dtype object, since ``str(dtype)`` alone cost a tenth of the worker's own time.
_POISON_BY_DTYPE = {np.dtype(name): (raw, tuple(raw(p) for p in patterns))
                    for name, (raw, patterns) in _POISON_BITS.items()}


def poison_count(arr: np.ndarray, run: int) -> int:
    """How many elements of ``arr`` still hold the poison bit pattern of run ``run``.

    Raises:
        KeyError: a dtype without a poison.
    """
    raw, patterns = _POISON_BY_DTYPE[arr.dtype]
    bits = np.ascontiguousarray(arr).view(raw)
    return int(np.count_nonzero(bits == patterns[run % len(patterns)]))


def _bind_plan(sess, target: str, options: dict, case: dict):
    """``(device, device_id, {output: (dtype, shape)})`` for IOBinding, or a reason string."""
    device = BIND_DEVICES.get(target)
    if device is None:
        return f"plain run: no IOBinding device known for {target}"
    shapes = case.get("output_shapes") or {}
    types = {o.name: o.type for o in sess.get_outputs()}
    plan = {}
    for name in case["outputs"]:
        dtype = _ORT_TYPES.get(types.get(name, ""))
        if dtype is None:
            return f"plain run: output {name} has type {types.get(name)}, which has no poison"
        if name not in shapes:
            return f"plain run: the shape of output {name} is unknown before the run"
        plan[name] = (dtype, [int(d) for d in shapes[name]])
    return device, int(options.get("device_id", 0) or 0), plan


def _run_bound(sess, case: dict, device: str, device_id: int, plan: dict, run: int,
               unwritten: str | None):
    """One run with every output bound to a buffer holding run ``run``'s poison.

    Returns ``(outputs, {output: poisoned element count})``. ``unwritten`` names an output
    read back from a poisoned twin buffer that was never bound (the ``unwritten`` fault).
    """
    binding = sess.io_binding()
    for name, arr in case["feeds"].items():
        binding.bind_cpu_input(name, arr)
    keep, values = [], {}
    for name, (dtype, shape) in plan.items():
        fill = poison_fill(dtype, shape, run)
        keep.append(fill)  # a CPU OrtValue wraps the numpy memory: keep it alive
        value = ortinfo.ort.OrtValue.ortvalue_from_numpy(fill, device, device_id)
        binding.bind_ortvalue_output(name, value)
        if name == unwritten:
            twin = poison_fill(dtype, shape, run)
            keep.append(twin)
            value = ortinfo.ort.OrtValue.ortvalue_from_numpy(twin, device, device_id)
        values[name] = value
    binding.synchronize_inputs()
    sess.run_with_iobinding(binding)
    binding.synchronize_outputs()
    outputs = {name: np.array(values[name].numpy()) for name in plan}
    return outputs, {name: poison_count(arr, run) for name, arr in outputs.items()}


def _shows(assigned: list[dict] | None, node: str | None) -> bool:
    """Whether the assignment info shows the node under test (``node`` ``None``: any node)."""
    if not assigned:
        return False
    return node is None or any(p["name"] == node for p in assigned)


def _cpu_alone(asked: str, plugin: dict | None, assigned: list[dict] | None) -> bool:
    """A session of the CPU EP alone (no other EP listed, no plugin library) whose assignment
    info lists its nodes: every node is on CPU by construction and the CPU EP compiles no
    partition, so a profile cannot change the placement verdict (``classify.placement.judge``
    reads the executed nodes only for a compiled partition and for a node the assignment
    shows by name, which needs no profile). Profiling such a session cost more than anything
    else the worker does beyond the floor: the ~4% of CPU sessions whose node ORT inlines
    (function bodies) took ~40% of the worker's time (docs/performance.md)."""
    return asked == CPU and not (plugin and plugin.get("library")) and bool(assigned)


def run_case(target: str, options: dict, case: dict, fault: str | None,
             fault_args: dict | None = None, plugin: dict | None = None, profile: bool = False) -> dict:
    """Create a session for one case on ``target``, run it, report everything.

    The model runs :data:`RUNS` times through IOBinding with poisoned output buffers where
    :func:`_bind_plan` allows, else once plainly.

    ``plugin`` (``{library, device}``) makes ``target`` a plugin EP, selected through its
    devices (:func:`plugin_devices`) instead of by name. ``case["node"]`` names the node under
    test (``None``: the whole graph): where the assignment info does not show it (ORT rewrote
    the graph: a layout transformation, an inlined function, a compiled partition), or with
    ``profile``, the runs are profiled and ``placement`` lists what really ran
    (``placement_source`` ``profiling``), ``assigned`` what was assigned; a session of the
    CPU EP alone is not profiled unless ``profile`` asks (:func:`_cpu_alone`).

    When ORT refuses the session because the fallback guard found nodes on CPU, the same
    model is run with CPU fallback allowed (``guard_refused``), so its numbers are judged too:
    a fallback that computes wrongly is a wrong answer first (docs/outcomes-and-gates.md).

    Returns ``{role, ok, stage, error, placement, placement_source, assigned, guard_refused,
    fallback_error, outputs, create_ms, run_ms, binding, poisoned}``; ``stage`` is where it
    stopped (``create``, ``run`` or ``done``); ``run_ms`` is the first run's time;
    ``poisoned`` holds one ``{output: count}`` per bound run.
    """
    asked, guard = faults.asked_for(target, fault)
    result = {"role": case["role"], "ok": False, "stage": "create", "error": None,
              "placement": None, "placement_source": None, "assigned": None, "guard_refused": False,
              "fallback_error": None, "outputs": {},
              "create_ms": None, "run_ms": None, "asked": asked, "binding": "", "poisoned": []}
    node = case.get("node", PROBE_NODE_NAME)
    profile_dir = None
    t0 = time.perf_counter()
    try:
        sess = _make_session(case["model"], asked, options, guard, None, plugin)
    except Exception as exc:  # noqa: BLE001 - every ORT failure is evidence
        result["error"] = _error("create", exc)
        if _FALLBACK_DISABLED not in str(exc):
            return result
        # The EP did not take every node: run the model as ORT would with fallback allowed.
        result["guard_refused"] = True
        guard = False
        try:
            sess = _make_session(case["model"], asked, options, False, None, plugin)
        except Exception as again:  # noqa: BLE001
            result["fallback_error"] = _error("create", again)
            return result
    result["create_ms"] = (time.perf_counter() - t0) * 1e3
    assigned = _placement_from_assignment(sess)
    if profile or not (_shows(assigned, node) or _cpu_alone(asked, plugin, assigned)):
        profile_dir = tempfile.mkdtemp(prefix="epaudit-prof-")
        sess = _make_session(case["model"], asked, options, guard, profile_dir, plugin)
        result["placement_source"] = "profiling"
        result["assigned"] = assigned
    else:
        result["placement"] = assigned
        result["placement_source"] = "assignment_info"
    result["session_providers"] = list(sess.get_providers())
    faults.after_session(fault)
    result["stage"] = "run"
    names = list(case["outputs"])
    unwritten = faults.unwritten_output(fault, case["role"], names)
    outputs = None
    plan = _bind_plan(sess, asked, options, case)
    if isinstance(plan, str):
        result["binding"] = plan
    else:
        device, device_id, shapes = plan
        try:
            for run in range(RUNS):
                t0 = time.perf_counter()
                outputs, poisoned = _run_bound(sess, case, device, device_id, shapes, run, unwritten)
                if run == 0:
                    result["run_ms"] = (time.perf_counter() - t0) * 1e3
                result["poisoned"].append(poisoned)
            result["binding"] = (f"iobinding: {RUNS} runs, outputs pre-bound on {device}:{device_id} "
                                 "with a distinct poison per run")
        except Exception as exc:  # noqa: BLE001 - fall back to a plain run, and say so
            outputs = None
            result["poisoned"] = []
            result["binding"] = f"plain run: IOBinding failed: {' '.join(str(exc).split())[:300]}"
    if outputs is None:
        t0 = time.perf_counter()
        try:
            values = sess.run(names, case["feeds"])
        except Exception as exc:  # noqa: BLE001
            result["fallback_error" if result["guard_refused"] else "error"] = _error("run", exc)
            _remove(profile_dir)
            return result
        result["run_ms"] = (time.perf_counter() - t0) * 1e3
        outputs = {n: np.asarray(v) for n, v in zip(names, values)}
        if unwritten is not None:
            del outputs[unwritten]  # no buffer to leave unwritten: the output is not returned
    if profile_dir is not None:
        result["placement"] = _placement_from_profile(sess.end_profiling())
        _remove(profile_dir)  # the worker's own temp folder goes at exit; a long run must not pile them up
    faults.alter_outputs(fault, case["role"], names, outputs, fault_args)
    result["outputs"] = outputs
    result["ok"] = True
    result["stage"] = "done"
    return result


def _remove(folder: str | None) -> None:
    if folder is not None:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _make_session(model: bytes, target: str, options: dict, guard: bool, profile_dir,
                  plugin: dict | None = None):
    so = _session_options(guard, profile_dir)
    if plugin and plugin.get("library") and target != CPU:
        so.add_provider_for_devices(plugin_devices(target, plugin["library"], plugin.get("device")),
                                    options)
        return ortinfo.ort.InferenceSession(model, so)
    return ortinfo.ort.InferenceSession(model, so, providers=_providers(target, options, guard))
