"""The floor: what ONNX Runtime itself costs for the catalog (run by floor_vs_check.py).

``python _floor.py PROBES.pkl REPEAT [shared]``: import onnxruntime, then for every probe
in the file (prebuilt model bytes and feeds, written before timing) create the subject and
the control session on the CPU EP and run each once; ``REPEAT`` times over the list.
Nothing else: no placement checks, no comparison, no worker protocol.

Each session makes its own intra-op pool (ORT's default), unless ``shared`` is given:
then every session runs on one global pool of the same size, made once, as the worker's
sessions do (``epaudit/worker/ortinfo.py``): the floor for what the worker itself adds.
"""

import pickle
import sys

import onnxruntime as ort


def main() -> int:
    shared = sys.argv[3:4] == ["shared"]
    if shared:
        from onnxruntime.capi import _pybind_state

        _pybind_state.set_global_thread_pool_sizes(0, 1)
    with open(sys.argv[1], "rb") as fh:
        cases = pickle.load(fh)
    for _ in range(int(sys.argv[2])):
        for model, feeds, outputs in cases:
            so = ort.SessionOptions()  # one per session, as the worker does
            so.log_severity_level = 3
            so.use_per_session_threads = not shared
            # Refused probes (the bfloat16 features) cost what ORT takes to refuse them.
            try:
                sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                sess.run(list(outputs), feeds)
            except Exception:  # noqa: BLE001
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
