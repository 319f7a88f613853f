"""Synthetic ai.onnx.ml node cases: scikit-learn style operators the ONNX backend corpus lacks.

The backend node test corpus (:mod:`.cases`) has almost no ``ai.onnx.ml`` case a numeric
EP check can use (its few use string tensors), so the generated catalog could not probe
tree ensembles, linear and SVM models or the preprocessing operators. :func:`cases` supplies
one to three single-node cases per operator in the corpus's own form
(:class:`.cases.BackendCase`): the node is named :data:`PROBE_NODE_NAME`, every input is a
graph input fed from ``np.random.default_rng(<fixed seed>)``, no control, tolerance
1e-5 / 1e-5. Where an operator has a second case, it sets an optional attribute
(``post_transform``, ``aggregate_function``, ``kernel_type``, ``norm``, ``threshold``, ...) to
a value other than its default, for ablation and variation to switch.

The float64 references are epaudit's own numpy code (:mod:`epaudit.reference.ml`), written from the
operator docs of onnx 1.23.2; ``tests/test_synthetic_ml.py`` checks each against
``onnx.reference.ReferenceEvaluator`` and ORT's CPU EP. Feeds keep every value at least 0.05
from a split threshold, a Binarizer threshold or a class decision (the references refuse
less), so a float16 type variant decides alike.

Known deviations (the reference keeps to the spec): ``test_ml_treeensemble_average_logistic``
sets ``post_transform`` 2, "'LOGISTIC' (2)"; ORT's CPU EP (1.31) applies no transform to a
single-target TreeEnsemble (microsoft/onnxruntime#26596) and ``onnx.reference`` ignores the
attribute. ORT also refuses an SVM node without ``kernel_params``, optional in the spec:
the LINEAR cases set it to zeros.

Left out: operators whose inputs or outputs are maps, sequences or strings (ZipMap,
DictVectorizer, CastMap, CategoryMapper), and the string forms of the others (string labels,
categories, keys): epaudit feeds and compares numeric tensors only. Not covered either:
SVM probabilities (``prob_a`` / ``prob_b``), one-class SVMRegressor, PROBIT, BRANCH_MEMBER.
"""

from __future__ import annotations

import numpy as np

from ...contract.probes import PROBE_NODE_NAME, Case, Probe, Tolerance
from ...reference import ml as ref
from .cases import BackendCase

ML = "ai.onnx.ml"
#: ai.onnx opset every synthetic model imports besides ai.onnx.ml.
ONNX_OPSET = 17
TOLERANCE = Tolerance(atol=1e-5, rtol=1e-5)
_F32, _I64 = 1, 7  # onnx.TensorProto.FLOAT, INT64


def _model(cid: str, op: str, opset: int, attrs: dict, feeds: dict, outputs: dict) -> bytes:
    """One ``op`` node named ``probe`` reading graph inputs ``feeds``; ``outputs``: name ->
    (element type, reference array): declared with the reference's full shape."""
    from onnx import helper, numpy_helper

    node_attrs = {k: numpy_helper.from_array(v, k) if isinstance(v, np.ndarray) else v for k, v in attrs.items()}
    node = helper.make_node(op, list(feeds), list(outputs), name=PROBE_NODE_NAME, domain=ML, **node_attrs)
    ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
           for n, a in feeds.items()]
    outs = [helper.make_tensor_value_info(n, t, r.shape) for n, (t, r) in outputs.items()]
    model = helper.make_model(helper.make_graph([node], cid, ins, outs), ir_version=8, producer_name="epaudit",
                              opset_imports=[helper.make_opsetid("", ONNX_OPSET), helper.make_opsetid(ML, opset)])
    return model.SerializeToString()


def _case(what: str, op: str, opset: int, attrs: dict, feeds: dict, refs: dict, types: dict) -> BackendCase:
    """The case ``test_ml_<op>_<what>``; ``refs``: output -> float64 reference, ``types``:
    output -> onnx element type (outputs in ``types`` order)."""
    cid = f"test_ml_{op.lower()}_{what}"
    outputs = {n: (t, refs[n]) for n, t in types.items()}
    case = Case(_model(cid, op, opset, attrs, feeds, outputs), dict(feeds), tuple(types), {n: refs[n] for n in types})
    dtype = np.dtype(next(iter(feeds.values())).dtype).name
    return BackendCase(cid, op, opset, False, Probe(cid, case, None, TOLERANCE, dtype, node_name=PROBE_NODE_NAME))


def _x(seed: int, shape, lo: float = -2.0, hi: float = 2.0, avoid=None) -> np.ndarray:
    """Seeded float32 feed, uniform in ``[lo, hi)`` rounded to 0.01; a value within 0.1 of a
    point of ``avoid`` (feature -> thresholds, or one list for every feature) is moved 0.1
    away from it (the thresholds of a feature are kept further apart than 0.2)."""
    x = np.round(np.random.default_rng(seed).uniform(lo, hi, shape), 2)
    for f in range(x.shape[-1]):
        points = avoid if isinstance(avoid, (list, tuple)) else (avoid or {}).get(f, ())
        for p in points:
            col = x[..., f]
            near = np.abs(col - p) < 0.1
            col[near] = p + np.where(col[near] >= p, 0.1, -0.1)
    return x.astype(np.float32)


def _splits(featureids, values) -> dict[int, list[float]]:
    """Feature -> the split thresholds on it (leaves' 0.0 thresholds included: harmless)."""
    out: dict[int, list[float]] = {}
    for f, v in zip(featureids, values):
        out.setdefault(int(f), []).append(float(v))
    return out


# Two v3 trees on 3 features. Tree 0: x0 <= 0.5 ? leaf 1 : (x2 < -0.5 ? leaf 3 : leaf 4);
# tree 1: x1 > 0.25 ? leaf 1 : leaf 2.
_TREES_V3 = dict(
    nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1], nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2],
    nodes_featureids=[0, 0, 2, 0, 0, 1, 0, 0],
    nodes_modes=["BRANCH_LEQ", "LEAF", "BRANCH_LT", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "LEAF"],
    nodes_values=[0.5, 0.0, -0.5, 0.0, 0.0, 0.25, 0.0, 0.0],
    nodes_truenodeids=[1, 0, 3, 0, 0, 1, 0, 0], nodes_falsenodeids=[2, 0, 4, 0, 0, 2, 0, 0])
_LEAVES_V3 = [(0, 1), (0, 3), (0, 4), (1, 1), (1, 2)]
# Two v3 trees on 4 features, votes for 3 classes. Tree 0: x0 <= 0.0 ? (x1 <= 0.5 ? leaf 3 :
# leaf 4) : leaf 2; tree 1: x3 > 0.2 ? leaf 1 : (x2 < -0.4 ? leaf 3 : leaf 4).
_CLASS_TREES = dict(
    nodes_treeids=[0] * 5 + [1] * 5, nodes_nodeids=[0, 1, 2, 3, 4] * 2,
    nodes_featureids=[0, 1, 0, 0, 0, 3, 0, 2, 0, 0],
    nodes_modes=["BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "BRANCH_LT", "LEAF", "LEAF"],
    nodes_values=[0.0, 0.5, 0.0, 0.0, 0.0, 0.2, 0.0, -0.4, 0.0, 0.0],
    nodes_truenodeids=[1, 3, 0, 0, 0, 1, 0, 3, 0, 0], nodes_falsenodeids=[2, 4, 0, 0, 0, 2, 0, 4, 0, 0],
    class_treeids=[0, 0, 0, 0, 0, 1, 1, 1, 1], class_nodeids=[2, 2, 3, 4, 4, 1, 3, 3, 4],
    class_ids=[0, 1, 1, 2, 0, 0, 1, 2, 2], class_weights=[0.6, 0.2, 0.7, 0.5, 0.1, 0.3, 0.3, 0.2, 0.45],
    classlabels_int64s=[10, 20, 30])


# One tree, two classes, each leaf weighting both (what a random forest's probabilities
# look like): x0 <= 0.25 ? leaf 1 (0.8, 0.2) : leaf 2 (0.3, 0.7). Top class: 0, then 1.
_BINARY_TREE = dict(
    nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[0, 0, 0],
    nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.25, 0.0, 0.0],
    nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
    class_treeids=[0, 0, 0, 0], class_nodeids=[1, 1, 2, 2], class_ids=[0, 1, 0, 1],
    class_weights=[0.8, 0.2, 0.3, 0.7], classlabels_int64s=[0, 1])


def _tree_classifier() -> list[BackendCase]:
    out = []
    X = _x(103, (6, 3), -1.5, 1.5, _splits(_BINARY_TREE["nodes_featureids"], _BINARY_TREE["nodes_values"]))
    out.append(_case("binary", "TreeEnsembleClassifier", 3, _BINARY_TREE, {"X": X},
                     ref.tree_ensemble_classifier(X, **_BINARY_TREE), {"Y": _I64, "Z": _F32}))
    for what, seed, extra in (("two_trees", 101, {}),
                              ("softmax", 102, dict(base_values=[-0.1, 0.1, 0.2], post_transform="SOFTMAX"))):
        attrs = {**_CLASS_TREES, **extra}
        X = _x(seed, (5, 4), -1.5, 1.5, _splits(attrs["nodes_featureids"], attrs["nodes_values"]))
        out.append(_case(what, "TreeEnsembleClassifier", 3, attrs, {"X": X}, ref.tree_ensemble_classifier(X, **attrs),
                         {"Y": _I64, "Z": _F32}))
    return out


def _tree_regressor() -> list[BackendCase]:
    summed = dict(_TREES_V3, n_targets=1, target_treeids=[t for t, _ in _LEAVES_V3],
                  target_nodeids=[n for _, n in _LEAVES_V3], target_ids=[0] * 5,
                  target_weights=[1.5, -2.0, 0.75, 0.25, -1.0])
    # Every leaf votes for both targets: each tree counts in each target's average.
    average = dict(summed, n_targets=2, aggregate_function="AVERAGE", base_values=[0.5, -1.0],
                   target_treeids=[t for t, _ in _LEAVES_V3 for _ in (0, 1)],
                   target_nodeids=[n for _, n in _LEAVES_V3 for _ in (0, 1)], target_ids=[0, 1] * 5,
                   target_weights=[1.5, -0.5, -2.0, 1.0, 0.75, 0.25, 0.25, 2.0, -1.0, -0.75])
    out = []
    for what, seed, attrs in (("sum", 201, summed), ("average_base_values", 202, average)):
        X = _x(seed, (5, 3), avoid=_splits(attrs["nodes_featureids"], attrs["nodes_values"]))
        out.append(_case(what, "TreeEnsembleRegressor", 3, attrs, {"X": X}, ref.tree_ensemble_regressor(X, **attrs),
                         {"Y": _F32}))
    return out


def _tree_ensemble() -> list[BackendCase]:
    # The trees of TreeEnsembleRegressor "sum", in TreeEnsemble's encoding: interior nodes
    # 0 (x0 <= 0.5), 1 (x2 < -0.5), 2 (x1 > 0.25); leaves 0..4 as there.
    summed = dict(tree_roots=[0, 2], nodes_featureids=[0, 2, 1], nodes_splits=np.array([0.5, -0.5, 0.25], np.float32),
                  nodes_modes=np.array([0, 1, 3], np.uint8), nodes_truenodeids=[0, 1, 3], nodes_trueleafs=[1, 1, 1],
                  nodes_falsenodeids=[1, 2, 4], nodes_falseleafs=[0, 1, 1], leaf_targetids=[0] * 5,
                  leaf_weights=np.array([1.5, -2.0, 0.75, 0.25, -1.0], np.float32), n_targets=1)
    # Three trees: x1 >= 0.0 ? (x0 > -0.3 ? l0 : l1) : l2;  x2 < 1.0 ? l3 : l4;  x0 <= 0.8 ? l5 : l6.
    averaged = dict(tree_roots=[0, 2, 3], nodes_featureids=[1, 0, 2, 0],
                    nodes_splits=np.array([0.0, -0.3, 1.0, 0.8], np.float32),
                    nodes_modes=np.array([2, 3, 1, 0], np.uint8), nodes_truenodeids=[1, 0, 3, 5],
                    nodes_trueleafs=[0, 1, 1, 1], nodes_falsenodeids=[2, 1, 4, 6], nodes_falseleafs=[1, 1, 1, 1],
                    leaf_targetids=[0] * 7, leaf_weights=np.array([1.0, -0.5, 2.0, 0.25, -1.5, 0.5, -2.5], np.float32),
                    n_targets=1, aggregate_function=0, post_transform=2)  # AVERAGE, LOGISTIC
    out = []
    for what, seed, attrs in (("sum", 301, summed), ("average_logistic", 302, averaged)):
        X = _x(seed, (5, 3), avoid=_splits(attrs["nodes_featureids"], attrs["nodes_splits"]))
        out.append(_case(what, "TreeEnsemble", 5, attrs, {"X": X}, ref.tree_ensemble(X, **attrs), {"Y": _F32}))
    return out


# Three classes on 4 features: one coefficient row per class.
_LINEAR_CLASSES = dict(classlabels_ints=[3, 5, 7], intercepts=[0.1, -0.2, 0.0],
                       coefficients=[1.0, -0.5, 0.0, 0.25, -0.5, 1.0, 0.5, 0.0, 0.0, 0.25, -1.0, 1.0])


def _linear() -> list[BackendCase]:
    out = []
    for what, seed, extra in (("ovr", 403, {}), ("softmax", 407, dict(post_transform="SOFTMAX"))):
        attrs = {**_LINEAR_CLASSES, **extra}
        X = _x(seed, (5, 4))
        out.append(_case(what, "LinearClassifier", 1, attrs, {"X": X}, ref.linear_classifier(X, **attrs),
                         {"Y": _I64, "Z": _F32}))
    for what, seed, attrs in (("one_target", 411, dict(coefficients=[0.5, -1.0, 0.25, 2.0], intercepts=[0.3])),
                              ("two_targets", 412, dict(targets=2, intercepts=[0.0, -1.0],
                                                        coefficients=[0.5, -1.0, 0.25, 2.0, -0.75, 0.0, 1.5, 0.5]))):
        X = _x(seed, (5, 4))
        out.append(_case(what, "LinearRegressor", 1, attrs, {"X": X}, ref.linear_regressor(X, **attrs), {"Y": _F32}))
    for what, seed, attrs in (("per_feature", 421, dict(offset=[0.5, -1.0, 2.0], scale=[2.0, 0.5, -1.0])),
                              ("broadcast", 422, dict(offset=[1.0], scale=[0.25]))):
        X = _x(seed, (5, 3))
        out.append(_case(what, "Scaler", 1, attrs, {"X": X}, ref.scaler(X, **attrs), {"Y": _F32}))
    return out


def _svm() -> list[BackendCase]:
    # Two support vectors per class near the class centres e0, e1, e2 (3 features); libsvm
    # signs: a class's coefficient is positive in its pairs with later classes, negative with
    # earlier ones (epaudit.reference.ml.svm_classifier).
    rng = np.random.default_rng(500)
    centres = np.repeat(np.eye(3), 2, axis=0)
    sv = np.round(centres + rng.uniform(-0.2, 0.2, centres.shape), 2)
    mag = np.round(rng.uniform(0.5, 1.0, (2, 6)), 2)
    sign = np.array([[1, 1, -1, -1, -1, -1], [1, 1, 1, 1, -1, -1]])
    # kernel_params is optional ("Zero if unused for the kernel"), but ORT's CPU EP refuses an
    # SVM node without it: LINEAR sets it to zeros.
    base = dict(classlabels_ints=[1, 2, 4], vectors_per_class=[2, 2, 2], support_vectors=sv.ravel().tolist(),
                coefficients=(mag * sign).ravel().tolist(), rho=[0.05, -0.1, 0.02], kernel_params=[0.0, 0.0, 0.0])
    out = []
    rbf = dict(kernel_type="RBF", kernel_params=[0.5, 0.0, 0.0])
    for what, seed, extra in (("linear", 501, {}), ("rbf", 503, rbf)):
        attrs = {**base, **extra}
        X = _x(seed, (5, 3), -0.5, 2.0)
        out.append(_case(what, "SVMClassifier", 1, attrs, {"X": X}, ref.svm_classifier(X, **attrs),
                         {"Y": _I64, "Z": _F32}))
    reg = dict(n_supports=3, support_vectors=sv[:3].ravel().tolist(), coefficients=[0.8, -0.5, 0.3], rho=[0.2],
               kernel_params=[0.0, 0.0, 0.0])
    poly = dict(kernel_type="POLY", kernel_params=[0.5, 1.0, 2.0])
    for what, seed, extra in (("linear", 511, {}), ("poly", 512, poly)):
        attrs = {**reg, **extra}
        X = _x(seed, (5, 3))
        out.append(_case(what, "SVMRegressor", 1, attrs, {"X": X}, ref.svm_regressor(X, **attrs), {"Y": _F32}))
    return out


def _preprocessing() -> list[BackendCase]:
    out = []
    for k, norm in enumerate(("MAX", "L1", "L2")):  # positive rows: see epaudit.reference.ml.normalizer
        X = _x(601 + k, (5, 4), 0.1, 3.0)
        attrs = {} if norm == "MAX" else {"norm": norm}
        out.append(_case(norm.lower(), "Normalizer", 1, attrs, {"X": X}, ref.normalizer(X, norm=norm), {"Y": _F32}))
    for what, seed, replaced, attrs in (
            ("per_feature", 611, 0.0, dict(imputed_value_floats=[1.5, -2.0, 0.25, 3.0])),
            ("replaced_value", 612, -1.0, dict(imputed_value_floats=[9.5], replaced_value_float=-1.0))):
        X = _x(seed, (5, 4))
        X[[0, 2, 3, 4], [1, 3, 0, 1]] = replaced
        out.append(_case(what, "Imputer", 1, attrs, {"X": X}, ref.imputer(X, **attrs), {"Y": _F32}))
    for what, seed, values, attrs in (("int64", 621, [1, 3, 5, 7, 8], dict(cats_int64s=[1, 3, 5, 7])),
                                      ("zeros_off", 622, [1, 3, 5, 7], dict(cats_int64s=[1, 3, 5, 7], zeros=0))):
        X = np.random.default_rng(seed).choice(values, (5, 2)).astype(np.int64)
        if what == "int64":
            X[1, 0] = 8  # not a category: a row of zeros
        out.append(_case(what, "OneHotEncoder", 1, attrs, {"X": X}, ref.one_hot_encoder(X, **attrs), {"Y": _F32}))
    A, B = _x(631, (5, 2)), _x(632, (5, 3))
    out.append(_case("two_inputs", "FeatureVectorizer", 1, dict(inputdimensions=[2, 3]), {"A": A, "B": B},
                     ref.feature_vectorizer(A, B, inputdimensions=[2, 3]), {"Y": _F32}))
    keys, values = [0.5, 1.25, -2.0, 3.0], [10.0, -1.5, 0.25, 7.0]
    X = np.random.default_rng(641).choice(keys + [4.5], (5, 3)).astype(np.float32)
    out.append(_case("floats", "LabelEncoder", 2, dict(keys_floats=keys, values_floats=values), {"X": X},
                     ref.label_encoder(X, keys=keys, values=values, default=-0.0), {"Y": _F32}))
    kt, vt, dt = np.array([2, 4, 6, 8]), np.array([0.5, -1.0, 2.5, 4.0], np.float32), np.array([-7.5], np.float32)
    X = np.random.default_rng(642).choice([2, 4, 6, 8, 5], (5, 3)).astype(np.int64)
    out.append(_case("tensor", "LabelEncoder", 4, dict(keys_tensor=kt, values_tensor=vt, default_tensor=dt), {"X": X},
                     ref.label_encoder(X, keys=kt, values=vt, default=dt[0]), {"Y": _F32}))
    for what, seed, attrs in (("default", 651, {}), ("threshold", 652, dict(threshold=0.5))):
        X = _x(seed, (5, 4), avoid=[attrs.get("threshold", 0.0)])
        out.append(_case(what, "Binarizer", 1, attrs, {"X": X}, ref.binarizer(X, **attrs), {"Y": _F32}))
    X, idx = _x(661, (5, 4)), np.array([3, 1], np.int64)
    out.append(_case("int64_indices", "ArrayFeatureExtractor", 1, {}, {"X": X, "Y": idx},
                     ref.array_feature_extractor(X, idx), {"Z": _F32}))
    return out


def cases() -> tuple[BackendCase, ...]:
    """Every synthetic ai.onnx.ml case, in name order."""
    built = _tree_classifier() + _tree_regressor() + _tree_ensemble() + _linear() + _svm() + _preprocessing()
    return tuple(sorted(built, key=lambda c: c.id))
