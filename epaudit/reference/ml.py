"""Float64 numpy references for the synthetic ai.onnx.ml node cases (:mod:`.synthetic`).

Each function takes the node's input arrays and its attributes under their ONNX names, as
:mod:`.synthetic` hands them to ``onnx.helper.make_node`` (strings as ``str``, tensor
attributes as numpy arrays), and returns float64 arrays (an integer output as float64 of
its values). A FLOAT / FLOATS attribute is float32 in a model, so it is rounded to float32
before use (:func:`_floats`), as a kernel sees it.

Written from the operator docs of onnx 1.23.2 (``onnx.defs.get_schema(op, v, "ai.onnx.ml")
.doc`` and the attribute descriptions), quoted in each docstring. Where a doc only *names* a
rule, the docstring says so and which convention is followed: ``post_transform``
(:func:`apply_post_transform`), the SVM kernels and the one-vs-one vote (:func:`svm_classifier`),
the layout of linear coefficients. Checked against ``onnx.reference`` and ORT's CPU EP by
``tests/test_synthetic_ml.py``.

Decisiveness: a function that compares an input with a threshold or takes an argmax
refuses (``ValueError``) an input within ``margin`` (:data:`MARGIN`) of the decision, so a
case's results cannot flip when its feeds are rounded to float16.
"""

from __future__ import annotations

import numpy as np

#: Least distance between a feed value and a split / Binarizer threshold, between the two
#: top class scores, and between an SVM pair decision and 0.
MARGIN = 0.05
#: ``post_transform`` values of TreeEnsemble (ai.onnx.ml 5), an enum there.
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")
#: ``aggregate_function`` values of TreeEnsemble (ai.onnx.ml 5), an enum there.
AGGREGATES = ("AVERAGE", "SUM", "MIN", "MAX")
#: Modes of a branch, by name (TreeEnsemble* v3) and by enum (TreeEnsemble v5, 0..5).
_CMP = {"BRANCH_LEQ": np.less_equal, "BRANCH_LT": np.less, "BRANCH_GTE": np.greater_equal,
        "BRANCH_GT": np.greater, "BRANCH_EQ": np.equal, "BRANCH_NEQ": np.not_equal}
_CMP_ENUM = tuple(_CMP.values())


def _floats(v) -> np.ndarray:
    """A FLOATS attribute (or float tensor) as float64 of its float32 values."""
    return np.asarray(v, dtype=np.float32).astype(np.float64)


def _decisive(gap, what: str, margin: float) -> None:
    if margin and np.min(gap) < margin:
        raise ValueError(f"{what}: within {np.min(gap):.3g} of the decision (margin {margin}): "
                         "pick other feeds")


def _argmax(scores: np.ndarray, what: str, margin: float) -> np.ndarray:
    """Row-wise argmax of ``[N, E]`` scores, refusing a top-two gap under ``margin``."""
    top = np.sort(scores, axis=1)
    if scores.shape[1] > 1:
        _decisive(top[:, -1] - top[:, -2], what, margin)
    return np.argmax(scores, axis=1)


def apply_post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """``post_transform`` applied to ``[N, E]`` float64 scores, row by row.

    The specs (TreeEnsemble*, Linear*, SVM*) only name the values: "Indicates the transform
    to apply to the score. One of 'NONE,' 'SOFTMAX,' 'LOGISTIC,' 'SOFTMAX_ZERO,' or
    'PROBIT'". The usual definitions are used: SOFTMAX ``exp(s) / sum(exp(s))`` over a row,
    LOGISTIC ``1 / (1 + exp(-s))`` elementwise, SOFTMAX_ZERO a softmax over a row's non-zero
    entries (zeros stay 0). PROBIT (``sqrt(2) erfinv(2 s - 1)``) is used by no case and not
    implemented.
    """
    s = np.asarray(scores, dtype=np.float64)
    if name == "NONE":
        return s
    if name == "LOGISTIC":
        return 1.0 / (1.0 + np.exp(-s))
    if name in ("SOFTMAX", "SOFTMAX_ZERO"):
        keep = (s != 0) if name == "SOFTMAX_ZERO" else np.ones(s.shape, bool)
        e = np.where(keep, np.exp(s - np.max(np.where(keep, s, -np.inf), axis=1, keepdims=True)), 0.0)
        return e / np.maximum(e.sum(axis=1, keepdims=True), np.finfo(np.float64).tiny)
    raise NotImplementedError(f"post_transform {name!r}")


def _aggregate(per_tree: np.ndarray, name: str) -> np.ndarray:
    """``[trees, targets]`` leaf values -> ``[targets]`` by ``aggregate_function``
    ("Defines how to aggregate leaf values within a target. One of 'AVERAGE,' 'SUM,' 'MIN,'
    'MAX.'"); AVERAGE divides the sum by the number of trees. A tree without a vote for a
    target holds NaN there and is skipped by MIN / MAX (counted as 0 by SUM / AVERAGE)."""
    if name in ("SUM", "AVERAGE"):
        total = np.nansum(per_tree, axis=0)
        return total / per_tree.shape[0] if name == "AVERAGE" else total
    voted = ~np.all(np.isnan(per_tree), axis=0)
    if name == "MIN":
        agg = np.where(np.isnan(per_tree), np.inf, per_tree).min(axis=0)
    elif name == "MAX":
        agg = np.where(np.isnan(per_tree), -np.inf, per_tree).max(axis=0)
    else:
        raise ValueError(f"aggregate_function {name!r}")
    return np.where(voted, agg, 0.0)


def _leaves_v3(x, treeids, nodeids, featureids, values, modes, trueids, falseids, missing, margin):
    """``(tree id, node id)`` of the leaf each tree (in order of first appearance) sends row
    ``x`` to, by the ``nodes_*`` tuples of TreeEnsembleClassifier / Regressor v3. A tree's
    root is its one node no branch of the tree points to (the Regressor requires ids from 0;
    the Classifier: "Ids may restart at zero for each tree, but it not required to"). A NaN
    feature follows ``nodes_missing_value_tracks_true`` ("the default value is false")."""
    at = {(t, n): i for i, (t, n) in enumerate(zip(treeids, nodeids))}
    out = []
    for tree in dict.fromkeys(treeids):
        mine = [i for i, t in enumerate(treeids) if t == tree]
        children = {c for i in mine if modes[i] != "LEAF" for c in (trueids[i], falseids[i])}
        roots = [i for i in mine if nodeids[i] not in children]
        if len(roots) != 1:
            raise ValueError(f"tree {tree}: {len(roots)} roots")
        i = roots[0]
        while modes[i] != "LEAF":
            v, thr = float(x[featureids[i]]), float(values[i])
            if np.isnan(v):
                go = bool(missing[i]) if missing is not None and len(missing) else False
            else:
                _decisive(abs(v - thr), f"tree {tree} node {nodeids[i]} split {thr:g}", margin)
                go = bool(_CMP[modes[i]](v, thr))
            i = at[(tree, trueids[i] if go else falseids[i])]
        out.append((tree, nodeids[i]))
    return out


def tree_ensemble_classifier(X, *, classlabels_int64s, class_ids, class_nodeids, class_treeids, class_weights,
                             nodes_featureids, nodes_modes, nodes_nodeids, nodes_treeids, nodes_values,
                             nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true=None,
                             nodes_hitrates=None, base_values=None, post_transform="NONE",
                             margin=MARGIN) -> dict[str, np.ndarray]:
    """TreeEnsembleClassifier (ai.onnx.ml 3): ``X [N, F]`` -> ``Y [N]`` (int64 label, as
    float64) and ``Z [N, E]`` class scores, E = ``len(classlabels_int64s)``.

    Spec: "all fields prefixed with 'class_' are tuples of votes at the leaves. A leaf may
    have multiple votes, where each vote is weighted by the associated class_weights index";
    "The class_ids are indices into this list" (the labels); ``base_values`` are "added to
    final class score". So ``Z`` = sum over trees of the weights of the reached leaves'
    votes, plus ``base_values``, then ``post_transform``; ``Y`` ("Returns the top class")
    = the label of the largest raw score (every transform used is monotonic in a row).
    """
    X = np.asarray(X, dtype=np.float64)
    labels, weights = np.asarray(classlabels_int64s), _floats(class_weights)
    votes = list(zip(class_treeids, class_nodeids))
    Z = np.zeros((X.shape[0], len(labels)))
    for r, x in enumerate(X):
        for leaf in _leaves_v3(x, nodes_treeids, nodes_nodeids, nodes_featureids, _floats(nodes_values),
                               nodes_modes, nodes_truenodeids, nodes_falsenodeids,
                               nodes_missing_value_tracks_true, margin):
            for k, v in enumerate(votes):
                if v == leaf:
                    Z[r, class_ids[k]] += weights[k]
    if base_values is not None and len(base_values):
        Z += _floats(base_values)
    top = _argmax(Z, "TreeEnsembleClassifier top class", margin)
    return {"Y": labels[top].astype(np.float64), "Z": apply_post_transform(Z, post_transform)}


def tree_ensemble_regressor(X, *, n_targets, target_ids, target_nodeids, target_treeids, target_weights,
                            nodes_featureids, nodes_modes, nodes_nodeids, nodes_treeids, nodes_values,
                            nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true=None,
                            nodes_hitrates=None, base_values=None, aggregate_function="SUM",
                            post_transform="NONE", margin=MARGIN) -> dict[str, np.ndarray]:
    """TreeEnsembleRegressor (ai.onnx.ml 3): ``X [N, F]`` -> ``Y [N, n_targets]``.

    Spec: "All fields prefixed with target_ are tuples of votes at the leaves. A leaf may have
    multiple votes, where each vote is weighted by the associated target_weights index";
    ``aggregate_function`` "Defines how to aggregate leaf values within a target"
    (:func:`_aggregate`); ``base_values`` are "added to final prediction after applying
    aggregate_function"; then ``post_transform``.
    """
    X = np.asarray(X, dtype=np.float64)
    weights = _floats(target_weights)
    votes = list(zip(target_treeids, target_nodeids))
    Y = np.zeros((X.shape[0], n_targets))
    for r, x in enumerate(X):
        leaves = _leaves_v3(x, nodes_treeids, nodes_nodeids, nodes_featureids, _floats(nodes_values), nodes_modes,
                            nodes_truenodeids, nodes_falsenodeids, nodes_missing_value_tracks_true, margin)
        per_tree = np.full((len(leaves), n_targets), np.nan)
        for t, leaf in enumerate(leaves):
            for k, v in enumerate(votes):
                if v == leaf:
                    per_tree[t, target_ids[k]] = np.nan_to_num(per_tree[t, target_ids[k]]) + weights[k]
        Y[r] = _aggregate(per_tree, aggregate_function)
    if base_values is not None and len(base_values):
        Y += _floats(base_values)
    return {"Y": apply_post_transform(Y, post_transform)}


def tree_ensemble(X, *, tree_roots, nodes_featureids, nodes_splits, nodes_modes, nodes_truenodeids,
                  nodes_trueleafs, nodes_falsenodeids, nodes_falseleafs, leaf_targetids, leaf_weights,
                  n_targets, nodes_missing_value_tracks_true=None, nodes_hitrates=None, aggregate_function=1,
                  post_transform=0, margin=MARGIN) -> dict[str, np.ndarray]:
    """TreeEnsemble (ai.onnx.ml 5): ``X [N, F]`` -> ``Y [N, n_targets]``, type T.

    Spec: ``tree_roots`` "Index into `nodes_*` for the root of each tree"; a true branch is
    ``nodes_truenodeids`` — "If `nodes_trueleafs` is false ... the position of the true
    branch node ... If `nodes_trueleafs` is [true], it is an index into the leaf_*
    attributes" (the false branch alike); ``nodes_modes`` "0 ('BRANCH_LEQ'), 1 ('BRANCH_LT'),
    2 ('BRANCH_GTE'), 3 ('BRANCH_GT'), 4 ('BRANCH_EQ'), 5 ('BRANCH_NEQ'), and 6
    ('BRANCH_MEMBER')" (6 is used by no case, not implemented); a leaf adds
    ``leaf_weights[leaf]`` to target ``leaf_targetids[leaf]``; ``aggregate_function`` "One of
    'AVERAGE' (0) 'SUM' (1) 'MIN' (2) 'MAX (3)" (:func:`_aggregate`); ``post_transform`` "One
    of 'NONE' (0), 'SOFTMAX' (1), 'LOGISTIC' (2), 'SOFTMAX_ZERO' (3) or 'PROBIT' (4)".
    """
    X = np.asarray(X, dtype=np.float64)
    splits, weights, modes = _floats(nodes_splits), _floats(leaf_weights), np.asarray(nodes_modes)
    missing = nodes_missing_value_tracks_true
    Y = np.zeros((X.shape[0], n_targets))
    for r, x in enumerate(X):
        per_tree = np.full((len(tree_roots), n_targets), np.nan)
        for t, i in enumerate(tree_roots):
            while True:
                v, mode = float(x[nodes_featureids[i]]), int(modes[i])
                if mode >= len(_CMP_ENUM):
                    raise NotImplementedError("BRANCH_MEMBER")
                if np.isnan(v):
                    go = bool(missing[i]) if missing is not None and len(missing) else False
                else:
                    _decisive(abs(v - splits[i]), f"tree {t} node {i} split {splits[i]:g}", margin)
                    go = bool(_CMP_ENUM[mode](v, splits[i]))
                i, leaf = ((nodes_truenodeids[i], nodes_trueleafs[i]) if go
                           else (nodes_falsenodeids[i], nodes_falseleafs[i]))
                if leaf:
                    tgt = leaf_targetids[i]
                    per_tree[t, tgt] = np.nan_to_num(per_tree[t, tgt]) + weights[i]
                    break
        Y[r] = _aggregate(per_tree, AGGREGATES[aggregate_function])
    return {"Y": apply_post_transform(Y, POST_TRANSFORMS[post_transform])}


def linear_classifier(X, *, classlabels_ints, coefficients, intercepts=None, multi_class=0,
                      post_transform="NONE", margin=MARGIN) -> dict[str, np.ndarray]:
    """LinearClassifier (ai.onnx.ml 1): ``X [N, F]`` -> ``Y [N]`` (label) and ``Z [N, E]``.

    The doc says only "Linear classifier", ``coefficients`` "A collection of weights of the
    model(s)", ``intercepts`` "A collection of intercepts", ``Z`` "one score for each class
    and example". Layout followed (that of ORT and the converters): ``coefficients`` is
    ``[E, F]`` row-major, one row per class, E = ``len(classlabels_ints)`` (E >= 3 here: the
    binary one-row form is not used); ``Z = post_transform(X @ C.T + intercepts)``; ``Y`` the
    label of the largest raw score. ``multi_class`` (OvR / multinomial) does not change
    these for E >= 3.
    """
    X = np.asarray(X, dtype=np.float64)
    labels = np.asarray(classlabels_ints)
    C = _floats(coefficients).reshape(len(labels), X.shape[1])
    Z = X @ C.T + (_floats(intercepts) if intercepts is not None else 0.0)
    top = _argmax(Z, "LinearClassifier top class", margin)
    return {"Y": labels[top].astype(np.float64), "Z": apply_post_transform(Z, post_transform)}


def linear_regressor(X, *, coefficients, intercepts=None, targets=1, post_transform="NONE") -> dict[str, np.ndarray]:
    """LinearRegressor (ai.onnx.ml 1): ``X [N, F]`` -> ``Y [N, targets]``.

    Spec: "If targets is set to M then M sets of coefficients must be passed in as a sequence
    and M results will be output for each input n in N. The coefficients array is of length
    n, and the coefficients for each target are contiguous. Intercepts are optional but if
    provided must match the number of targets." So ``C`` is ``[targets, F]`` and
    ``Y = post_transform(X @ C.T + intercepts)``.
    """
    X = np.asarray(X, dtype=np.float64)
    C = _floats(coefficients).reshape(targets, X.shape[1])
    Y = X @ C.T + (_floats(intercepts) if intercepts is not None else 0.0)
    return {"Y": apply_post_transform(Y, post_transform)}


def scaler(X, *, offset, scale) -> dict[str, np.ndarray]:
    """Scaler (ai.onnx.ml 1): ``X [N, F]`` -> ``Y [N, F]`` float. Spec: ``offset`` "First,
    offset by this", ``scale`` "Second, multiply by this"; each "Can be length of features
    in an [N,F] tensor or length 1, in which case it applies to all features". The offset
    is subtracted (the doc's use: "removing the mean"): ``Y = (X - offset) * scale``."""
    return {"Y": (np.asarray(X, dtype=np.float64) - _floats(offset)) * _floats(scale)}


def _kernel(X: np.ndarray, SV: np.ndarray, kernel_type: str, kernel_params) -> np.ndarray:
    """``[N, S]`` kernel values. The spec names the kernels ("one of 'LINEAR,' 'POLY,' 'RBF,'
    'SIGMOID'") and ``kernel_params`` ("gamma, coef0, and degree, in that order. Zero if
    unused for the kernel") but not their formulas; libsvm's are used: LINEAR ``<x, s>``,
    POLY ``(gamma <x, s> + coef0) ^ degree``, RBF ``exp(-gamma |x - s|^2)``, SIGMOID
    ``tanh(gamma <x, s> + coef0)``."""
    gamma, coef0, degree = (list(_floats(kernel_params if kernel_params is not None else [])) + [0.0] * 3)[:3]
    dot = X @ SV.T
    if kernel_type == "LINEAR":
        return dot
    if kernel_type == "POLY":
        return (gamma * dot + coef0) ** degree
    if kernel_type == "RBF":
        return np.exp(-gamma * ((X[:, None, :] - SV[None, :, :]) ** 2).sum(axis=2))
    if kernel_type == "SIGMOID":
        return np.tanh(gamma * dot + coef0)
    raise ValueError(f"kernel_type {kernel_type!r}")


def svm_classifier(X, *, classlabels_ints, coefficients, rho, support_vectors, vectors_per_class,
                   kernel_type="LINEAR", kernel_params=None, post_transform="NONE", prob_a=None, prob_b=None,
                   margin=MARGIN) -> dict[str, np.ndarray]:
    """SVMClassifier (ai.onnx.ml 1) with support vectors, no probabilities: ``X [N, F]`` ->
    ``Y [N]`` (label) and ``Z [N, E(E-1)/2]`` raw one-vs-one decision values.

    The doc says only "Support Vector Machine classifier"; ``prob_a`` / ``prob_b``: "If these
    are provided then output Z are probability estimates, otherwise they are raw scores" (so
    they are left out: Z stays raw); ``rho``, ``coefficients``, ``support_vectors``,
    ``vectors_per_class`` have no description. libsvm's multi-class SVC is followed, the
    model the attributes come from: the support vectors are grouped by class
    (``vectors_per_class``), ``coefficients`` is ``[E - 1, S]``; for each class pair i < j in
    order (k = 0, 1, ...) the decision is ``sum_{s in i} C[j-1, s] K(x, s) + sum_{s in j}
    C[i, s] K(x, s) + rho[k]`` (the sign convention of ONNX-ML converters, which store libsvm's
    ``-rho``); a positive decision is a vote for i, else for j; ``Y`` is the label with the
    most votes (a tie, or a decision within ``margin`` of 0, is refused). For E = 3 the
    three decisions are the "one per class" scores ``Z``.
    """
    if prob_a is not None or prob_b is not None:
        raise NotImplementedError("prob_a / prob_b (probability estimates)")
    X = np.asarray(X, dtype=np.float64)
    labels, counts = np.asarray(classlabels_ints), list(vectors_per_class)
    E, S = len(labels), sum(counts)
    K = _kernel(X, _floats(support_vectors).reshape(S, X.shape[1]), kernel_type, kernel_params)
    C, rho = _floats(coefficients).reshape(E - 1, S), _floats(rho)
    start = np.concatenate([[0], np.cumsum(counts)])
    dec, votes = [], np.zeros((X.shape[0], E), dtype=np.int64)
    for i in range(E):
        for j in range(i + 1, E):
            si, sj = slice(start[i], start[i + 1]), slice(start[j], start[j + 1])
            d = K[:, si] @ C[j - 1, si] + K[:, sj] @ C[i, sj] + rho[len(dec)]
            _decisive(np.abs(d), f"SVMClassifier decision {i} vs {j}", margin)
            votes[np.arange(len(d)), np.where(d > 0, i, j)] += 1
            dec.append(d)
    _argmax(votes.astype(np.float64), "SVMClassifier vote", 1.0 if margin else 0.0)
    return {"Y": labels[np.argmax(votes, axis=1)].astype(np.float64),
            "Z": apply_post_transform(np.stack(dec, axis=1), post_transform)}


def svm_regressor(X, *, coefficients, rho, support_vectors, n_supports, kernel_type="LINEAR", kernel_params=None,
                  one_class=0, post_transform="NONE") -> dict[str, np.ndarray]:
    """SVMRegressor (ai.onnx.ml 1) with support vectors: ``X [N, F]`` -> ``Y [N, 1]``.

    The doc says "Support Vector Machine regression prediction and one-class SVM anomaly
    detection", ``coefficients`` "Support vector coefficients", ``n_supports`` "The number
    of support vectors". libsvm's SVR is followed: ``Y = sum_s coefficients[s] K(x, s) +
    rho[0]`` (:func:`_kernel`; ``rho`` added, as for :func:`svm_classifier`). ``one_class``
    (its output is not described) is used by no case and not implemented.
    """
    if one_class:
        raise NotImplementedError("one_class")
    X = np.asarray(X, dtype=np.float64)
    K = _kernel(X, _floats(support_vectors).reshape(n_supports, X.shape[1]), kernel_type, kernel_params)
    return {"Y": apply_post_transform((K @ _floats(coefficients) + _floats(rho)[0])[:, None], post_transform)}


def normalizer(X, *, norm="MAX") -> dict[str, np.ndarray]:
    """Normalizer (ai.onnx.ml 1): ``X [N, C]`` -> ``Y [N, C]`` float, each row on its own.

    Spec, literally: "Max: Y = X / max(X); L1: Y = X / sum(X); L2: Y = sqrt(X^2 /
    sum(X^2)); In all modes, if the divisor is zero, Y == X". (For a row with negative
    entries these differ from ORT and onnx.reference, which divide by ``sum(|X|)`` and keep
    the sign in L2; onnx.reference also divides by ``max(|X|)`` in MAX: the cases feed
    positive rows, where all agree.)
    """
    X = np.asarray(X, dtype=np.float64)
    if norm == "MAX":
        div = X.max(axis=1, keepdims=True)
        return {"Y": np.where(div == 0, X, X / np.where(div == 0, 1.0, div))}
    if norm == "L1":
        div = X.sum(axis=1, keepdims=True)
        return {"Y": np.where(div == 0, X, X / np.where(div == 0, 1.0, div))}
    if norm == "L2":
        div = (X ** 2).sum(axis=1, keepdims=True)
        return {"Y": np.where(div == 0, X, np.sqrt(X ** 2 / np.where(div == 0, 1.0, div)))}
    raise ValueError(f"norm {norm!r}")


def imputer(X, *, imputed_value_floats, replaced_value_float=0.0) -> dict[str, np.ndarray]:
    """Imputer (ai.onnx.ml 1), float form: ``X [N, F]`` -> ``Y [N, F]``, type T. Spec:
    "Replaces inputs that equal one value with another, leaving all other elements alone";
    "The imputed_value attribute length can be 1 element, or it can have one element per
    input feature ... If it is 1, then it is broadcast along the last dimension"."""
    X = np.asarray(X, dtype=np.float64)
    return {"Y": np.where(X == _floats(replaced_value_float), _floats(imputed_value_floats), X)}


def one_hot_encoder(X, *, cats_int64s, zeros=1) -> dict[str, np.ndarray]:
    """OneHotEncoder (ai.onnx.ml 1), integer categories: ``X [...]`` -> ``Y [..., len(cats)]``
    float. Spec: "a single one is placed at the index of the category that was passed in";
    ``zeros`` "If true and category is not present, will return all zeros; if false and a
    category if not found, the operator will fail" (here: ``ValueError``); float input is
    "cast to integers"."""
    X = np.asarray(X).astype(np.int64)
    Y = (X[..., None] == np.asarray(cats_int64s)).astype(np.float64)
    if not zeros and not Y.any(axis=-1).all():
        raise ValueError("OneHotEncoder zeros=0: a category not in cats_int64s")
    return {"Y": Y}


def feature_vectorizer(*xs, inputdimensions) -> dict[str, np.ndarray]:
    """FeatureVectorizer (ai.onnx.ml 1): inputs ``[N, C_i]`` -> ``Y [N, sum C_i]`` float.
    Spec: "All input shapes are 2-D and are concatenated along the second dimension. 1-D
    tensors are treated as [1,C]. Inputs are copied to the output maintaining the order of
    the input arguments"; ``inputdimensions`` "The size of each input in the input list"
    (an input of another width is refused: what then happens is not specified)."""
    parts = [np.atleast_2d(np.asarray(x, dtype=np.float64)) for x in xs]
    if [p.shape[1] for p in parts] != list(inputdimensions):
        raise ValueError(f"inputdimensions {list(inputdimensions)} differ from the input widths")
    return {"Y": np.concatenate(parts, axis=1)}


def label_encoder(X, *, keys, values, default) -> dict[str, np.ndarray]:
    """LabelEncoder (ai.onnx.ml 2 and 4), numeric keys and values: ``X`` -> ``Y``, same
    shape. Spec: "The i-th value in the specified 'keys_*' attribute would be mapped to the
    i-th value in the specified 'values_*' attribute ... If an input element can not be found
    in the specified 'keys_*' attribute, the 'default_*' that matches the specified
    'values_*' attribute may be used"; v4: "If a key is repeated, the last key takes
    precedence". ``keys`` / ``values`` / ``default`` are the chosen ``keys_*`` /
    ``values_*`` / ``default_*``; float ones (``keys_floats``, a float tensor) are rounded to
    float32, as the model stores them (a float64 tensor stays float64)."""
    def exact(v):
        a = np.asarray(v)
        if a.dtype.kind != "f" or (isinstance(v, np.ndarray) and a.dtype == np.float64):
            return a
        return _floats(a)

    table = dict(zip(exact(keys).ravel().tolist(), exact(values).ravel().astype(np.float64).tolist()))
    fallback = float(exact(default))
    return {"Y": np.vectorize(lambda v: table.get(v, fallback), otypes=[np.float64])(np.asarray(X))}


def binarizer(X, *, threshold=0.0, margin=MARGIN) -> dict[str, np.ndarray]:
    """Binarizer (ai.onnx.ml 1): ``Y`` = ``X`` mapped to 0 / 1, type T. Spec: ``threshold``
    "Values greater than this are mapped to 1, others to 0"."""
    X, thr = np.asarray(X, dtype=np.float64), float(_floats(threshold))
    _decisive(np.abs(X - thr), f"Binarizer threshold {thr:g}", margin)
    return {"Y": (X > thr).astype(np.float64)}


def array_feature_extractor(X, indices) -> dict[str, np.ndarray]:
    """ArrayFeatureExtractor (ai.onnx.ml 1): ``X [..., F]``, int64 ``indices [K]`` ->
    ``Z [..., K]``. Spec: "Select elements of the input tensor based on the indices passed.
    The indices are applied to the last axes of the tensor"."""
    return {"Z": np.take(np.asarray(X, dtype=np.float64), np.asarray(indices, dtype=np.int64), axis=-1)}
