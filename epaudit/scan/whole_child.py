"""Run one whole model on one EP, in the EP's own interpreter (onnxruntime and numpy only).

``python whole_child.py SPEC.json`` (run by path: it imports nothing of epaudit, so the
WebGPU environment, which has no onnx, can run it). The spec names the model file, an
``.npz`` of feeds, the provider (and its options, a plugin library), the graph
optimisation level (``default`` or ``disable``), the outputs to fetch (``null``: all),
where to write them, and whether to profile for placement. The model runs as it would be
deployed: the asked EP first and the CPU EP as fallback (``fallback: true``), or the asked
EP alone with ``session.disable_cpu_ep_fallback`` (``fallback: false``).

Prints one JSON line: ``{ok, stage, error, output_names, not_compared, placement,
session_providers, ort_version}``; the tensor outputs go to the ``.npz`` as ``o0, o1, ...``
in ``output_names`` order (``not_compared``: sequences, maps and strings).
"""

import json
import os
import sys
import tempfile


def _placement(path):
    """node name -> provider, from an ORT profile (the kernel events name both)."""
    out = {}
    try:
        with open(path, encoding="utf-8") as fh:
            events = json.load(fh)
    except (OSError, ValueError):
        return out
    for e in events if isinstance(events, list) else []:
        args = e.get("args") or {}
        if e.get("cat") == "Node" and "provider" in args:
            name = e.get("name", "")
            for suffix in ("_kernel_time", "_fence_before", "_fence_after"):
                if name.endswith(suffix):
                    name = name[: -len(suffix)]
            out.setdefault(name, args["provider"])
    return out


def main(argv):
    import numpy as np
    import onnxruntime as ort

    spec = json.load(open(argv[0], encoding="utf-8"))
    result = {"ok": False, "stage": "load", "error": "", "output_names": [], "placement": {},
              "session_providers": [], "ort_version": ort.__version__}
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        if spec.get("opt") == "disable":
            so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        for k, v in (spec.get("config") or {}).items():
            so.add_session_config_entry(str(k), str(v))
        provider = spec["provider"]
        if provider != "CPUExecutionProvider" and not spec.get("fallback", True):
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        prof_dir = None
        if spec.get("profile"):
            prof_dir = tempfile.mkdtemp(prefix="epaudit-whole-")
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(prof_dir, "p")
        options = {str(k): str(v) for k, v in (spec.get("options") or {}).items()}
        library = spec.get("library")
        if library:
            ort.register_execution_provider_library(provider, library)
            devices = [d for d in ort.get_ep_devices() if d.ep_name == provider]
            so.add_provider_for_devices(devices, options)
            sess = ort.InferenceSession(spec["model"], so)
        else:
            providers = [(provider, options)] + ([] if provider == "CPUExecutionProvider" else ["CPUExecutionProvider"])
            sess = ort.InferenceSession(spec["model"], so, providers=providers)
        result["session_providers"] = sess.get_providers()
        result["stage"] = "run"
        feeds = dict(np.load(spec["feeds"], allow_pickle=False))
        names = spec.get("outputs") or [o.name for o in sess.get_outputs()]
        got = sess.run(names, feeds)
        if prof_dir is not None:
            result["placement"] = _placement(sess.end_profiling())
        # Tensors only: a sequence of maps (ZipMap) or strings cannot be compared as numbers.
        kept = [(n, v) for n, v in zip(names, got) if isinstance(v, np.ndarray) and v.dtype.kind not in "OUS"]
        np.savez(spec["out"], **{f"o{i}": v for i, (_, v) in enumerate(kept)})
        result.update(ok=True, stage="done", output_names=[n for n, _ in kept],
                      not_compared=[n for n in names if n not in {k for k, _ in kept}])
    except Exception as exc:  # the EP's own words, never a traceback
        result["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:2000]}"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
