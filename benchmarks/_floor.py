"""The floor: what ONNX Runtime itself costs for the catalog (run by floor_vs_check.py).

``python _floor.py PROBES.pkl REPEAT``: import onnxruntime, then for every probe in the
file (prebuilt model bytes and feeds, written before timing) create the subject and the
control session on the CPU EP and run each once; ``REPEAT`` times over the list.
Nothing else: no placement checks, no comparison, no worker protocol.
"""

import pickle
import sys

import onnxruntime as ort


def main() -> int:
    with open(sys.argv[1], "rb") as fh:
        cases = pickle.load(fh)
    for _ in range(int(sys.argv[2])):
        for model, feeds, outputs in cases:
            so = ort.SessionOptions()  # one per session, as the worker does
            so.log_severity_level = 3
            # Refused probes (the bfloat16 features) cost what ORT takes to refuse them.
            try:
                sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
                sess.run(list(outputs), feeds)
            except Exception:  # noqa: BLE001
                pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
