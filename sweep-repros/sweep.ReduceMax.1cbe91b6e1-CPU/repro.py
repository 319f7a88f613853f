#!/usr/bin/env python3
"""Standalone reproduction written by epaudit: ai.onnx.ReduceMax on CPU: MISMATCH (ReduceMax-18 data:float32[1,0] axes:int64[1]=-1 values=zeros)

Needs only onnxruntime and numpy. Runs model.onnx on CPUExecutionProvider (CPU fallback disabled for
any EP but CPU), compares each output with reference.npz: an element is within tolerance
when |actual - expected| <= atol + rtol * |expected| (finite expected values; infinities
must be equal, and a NaN expected value is matched by a NaN only). Exit 0: every output within tolerance; 1: some output out of it; 2: the
session could not be made or run.

Usage: python repro.py [--provider NAME] [--library PATH]   (--library: a plugin EP's library)
"""
import os
import sys

import numpy as np
import onnxruntime as ort

HERE = os.path.dirname(os.path.abspath(__file__))
PROVIDER = 'CPUExecutionProvider'
OPTIONS = {}
ATOL, RTOL = 0.0001, 0.001


def main(argv):
    provider, library = PROVIDER, None
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--provider" and args:
            provider = args.pop(0)
        elif a == "--library" and args:
            library = args.pop(0)
        else:
            print(__doc__)
            return 2
    feeds = dict(np.load(os.path.join(HERE, "inputs.npz")))
    reference = dict(np.load(os.path.join(HERE, "reference.npz")))
    so = ort.SessionOptions()
    if provider != "CPUExecutionProvider":
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    try:
        if library:
            ort.register_execution_provider_library(provider, library)
            devices = [d for d in ort.get_ep_devices() if d.ep_name == provider]
            so.add_provider_for_devices(devices, OPTIONS)
            sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), so)
        else:
            sess = ort.InferenceSession(os.path.join(HERE, "model.onnx"), so,
                                        providers=[(provider, OPTIONS)])
        names = [o.name for o in sess.get_outputs() if o.name in reference]
        outputs = dict(zip(names, sess.run(names, feeds)))
    except Exception as exc:  # the EP refused: ORT's own words
        print(f"{provider}: session failed: {exc}")
        return 2
    print(f"onnxruntime {ort.__version__}, {provider}, session providers {sess.get_providers()}")
    bad = 0
    for name in names:
        a = np.asarray(outputs[name], dtype=np.float64)
        e = np.asarray(reference[name], dtype=np.float64)
        if a.shape != e.shape:
            print(f"{name}: shape {a.shape}, expected {e.shape}")
            bad += 1
            continue
        with np.errstate(invalid="ignore"):
            err = np.abs(a - e)
            ok = ((np.isfinite(e) & (err <= ATOL + RTOL * np.abs(e))) | (np.isinf(e) & (a == e))
                  | (np.isnan(e) & np.isnan(a)))
        n_bad = int(a.size - np.count_nonzero(ok))
        finite = np.where(np.isfinite(err), err, 0.0)
        worst = np.unravel_index(int(np.argmax(finite)), a.shape) if a.size else ()
        rel = finite / np.maximum(np.abs(e), 1e-30) if a.size else finite
        print(f"{name}: max abs err {finite.max() if a.size else 0.0:.3g}, max rel err "
              f"{rel.max() if a.size else 0.0:.3g} at {tuple(int(i) for i in worst)}; "
              f"{n_bad} of {a.size} element(s) out of tolerance (atol {ATOL}, rtol {RTOL})"
              + (f"; non-finite where the reference is finite: {int(np.count_nonzero(~np.isfinite(a) & np.isfinite(e)))}"
                 if np.any(~np.isfinite(a) & np.isfinite(e)) else ""))
        bad += n_bad > 0
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
