"""The RotaryEmbedding and fused layer-norm references and catalogs, checked by hand and
against ORT's CPU EP.

``onnx.reference`` has no evaluator for ``com.microsoft.RotaryEmbedding``,
``SkipLayerNormalization``, ``SkipSimplifiedLayerNormalization`` or ORT's
``SimplifiedLayerNormalization``, so :mod:`epaudit.reference.rotary` and
:mod:`epaudit.reference.norms` are checked against small cases worked out by hand and
against the real ``CPUExecutionProvider`` (every probe's subject, control and "ignored"
run, plus configurations outside the catalogs).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import _contrib as c
from epaudit.catalog import norms, rotary
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, PROBE_NODE_NAME, TOLERANCES, Case
from epaudit.reference.norms import (
    simplified_layer_norm_reference,
    skip_layer_norm_reference,
)
from epaudit.reference.rotary import rotary_reference

FEATURES = tuple(rotary.FEATURES) + tuple(norms.FEATURES)
BY_ID = {f.id: f for f in FEATURES}


# --- rotary by hand --------------------------------------------------------------------

def test_rotation_by_a_quarter_turn_by_hand():
    # H = 4, halves: (x0, x1 | x2, x3) pairs (x0, x2), (x1, x3); angle pi/2 on pair 0 only.
    x = np.array([1.0, 2.0, 3.0, 4.0]).reshape(1, 1, 1, 4)
    cos = np.array([[1.0, 1.0], [0.0, 1.0]])
    sin = np.array([[0.0, 0.0], [1.0, 0.0]])
    out = rotary_reference(x, np.array([1]), cos, sin)["output"]
    np.testing.assert_allclose(out.reshape(-1), [-3.0, 2.0, 1.0, 4.0], rtol=0, atol=1e-15)
    inter = rotary_reference(x, np.array([1]), cos, sin, interleaved=1)["output"]
    np.testing.assert_allclose(inter.reshape(-1), [-2.0, 1.0, 3.0, 4.0], rtol=0, atol=1e-15)


def test_partial_rotation_copies_the_tail():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 2 * 8))
    cos, sin = np.cos(rng.standard_normal((4, 2))), np.sin(rng.standard_normal((4, 2)))
    out = rotary_reference(x, np.array([0]), cos, sin, num_heads=2, rotary_embedding_dim=4)["output"]
    heads_in, heads_out = x.reshape(1, 2, 2, 8), out.reshape(1, 2, 2, 8)
    np.testing.assert_array_equal(heads_out[..., 4:], heads_in[..., 4:])
    assert not np.allclose(heads_out[..., :4], heads_in[..., :4])


def test_offset_and_tensor_positions_agree():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 2, 3, 8))
    cos, sin = np.cos(rng.standard_normal((9, 4))), np.sin(rng.standard_normal((9, 4)))
    offset = rotary_reference(x, np.array([4]), cos, sin)["output"]
    tensor = rotary_reference(x, np.array([[4, 5, 6], [4, 5, 6]]), cos, sin)["output"]
    np.testing.assert_array_equal(offset, tensor)


def test_rotation_keeps_the_norm_of_each_pair():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 16))
    ang = rng.standard_normal((5, 8))
    out = rotary_reference(x, np.array([1]), np.cos(ang), np.sin(ang), num_heads=1)["output"]
    np.testing.assert_allclose(out[..., :8] ** 2 + out[..., 8:] ** 2, x[..., :8] ** 2 + x[..., 8:] ** 2,
                               rtol=1e-12)


@pytest.mark.parametrize("kwargs, message", [
    ({"rotary_embedding_dim": 4}, "needs num_heads"),
    ({"position_ids": np.array([9])}, "outside"),
])
def test_rotary_invalid_inputs_raise(kwargs, message):
    x = np.zeros((1, 2, 8))
    args = {"position_ids": np.array([0]), **kwargs}
    pos = args.pop("position_ids")
    with pytest.raises(ValueError, match=message):
        rotary_reference(x, pos, np.ones((4, 4)), np.zeros((4, 4)), **args)


# --- norms by hand ---------------------------------------------------------------------

def test_skip_layer_norm_by_hand():
    # Row s = input + skip + bias = [1, 3]: mean 2, variance 1; epsilon 0.
    r = skip_layer_norm_reference(np.array([[[0.0, 2.0]]]), np.array([[[1.0, 0.0]]]), np.array([2.0, 3.0]),
                                  np.array([0.5, 0.5]), np.array([0.0, 1.0]), epsilon=0.0)
    np.testing.assert_allclose(r["output"].reshape(-1), [-1.5, 3.5], rtol=0, atol=1e-15)
    assert r["mean"].shape == (1, 1, 1) and r["mean"].item() == 2.0 and r["inv_std_var"].item() == 1.0
    np.testing.assert_array_equal(r["input_skip_bias_sum"].reshape(-1), [1.0, 3.0])


def test_simplified_forms_use_the_mean_square():
    # Row [3, 4]: mean square 12.5.
    r = skip_layer_norm_reference(np.array([[3.0, 4.0]]), np.zeros((1, 2)), np.ones(2), epsilon=0.0,
                                  simplified=True)
    np.testing.assert_allclose(r["output"], [[3 / math.sqrt(12.5), 4 / math.sqrt(12.5)]], rtol=1e-15)
    assert r["mean"].item() == 0.0  # the CPU kernel writes 0 there (not probed)
    s = simplified_layer_norm_reference(np.array([[3.0, 4.0]]), np.array([2.0, 1.0]), epsilon=0.5)
    np.testing.assert_allclose(s["Y"], [[6 / math.sqrt(13.0), 4 / math.sqrt(13.0)]], rtol=1e-15)
    assert s["inv_std_var"].item() == pytest.approx(1 / math.sqrt(13.0), rel=1e-15)


def test_epsilon_dominates_tiny_variance():
    x = np.array([[1e-3, -1e-3]])
    small = skip_layer_norm_reference(x, np.zeros_like(x), np.ones(2), epsilon=1e-12)["output"]
    large = skip_layer_norm_reference(x, np.zeros_like(x), np.ones(2), epsilon=1e-4)["output"]
    assert abs(small[0, 0]) == pytest.approx(1.0, rel=1e-5)
    assert abs(large[0, 0]) == pytest.approx(1e-3 / math.sqrt(1e-6 + 1e-4), rel=1e-12)


def test_skip_broadcasts_and_axis_widens_the_statistics():
    rng = np.random.default_rng(3)
    x, skip = rng.standard_normal((2, 3, 4)), rng.standard_normal((3, 4))
    a = skip_layer_norm_reference(x, skip, np.ones(4))["output"]
    b = skip_layer_norm_reference(x, np.broadcast_to(skip, x.shape).copy(), np.ones(4))["output"]
    np.testing.assert_array_equal(a, b)
    s = simplified_layer_norm_reference(x, np.ones((3, 4)), axis=1)
    assert s["inv_std_var"].shape == (2, 1, 1)
    with pytest.raises(ValueError, match="skip shape"):
        skip_layer_norm_reference(x, np.zeros((2, 4)), np.ones(4))


# --- catalogs --------------------------------------------------------------------------

def test_catalog_metadata():
    ids = [f.id for f in FEATURES]
    assert len(ids) == len(set(ids)) >= 30
    for f in FEATURES:
        assert f.changes and "\n" not in f.changes and f.source
        op = rotary.OP if f.id.startswith("rotary.") else {
            "rotary23": rotary.OP23, "skip_layer_norm": norms.SLN, "skip_simplified_layer_norm": norms.SSLN,
            "simplified_layer_norm": norms.SIMP}[f.id.split(".")[0]]
        assert (f.op_type, f.domain) == (op.op_type, op.domain)
        for name in f.uses.inputs:
            assert name in op.inputs
    # SimplifiedLayerNormalization is ORT's schema in the ai.onnx domain, since version 1.
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema
    schema = [s for s in get_all_operator_schema() if s.name == "SimplifiedLayerNormalization"]
    assert [(s.domain, s.since_version) for s in schema] == [("", 1)]


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_probe_is_well_formed_and_decisive(fid):
    p = BY_ID[fid].build()
    for case in (p.subject, p.control):
        graph = onnx.load_from_string(case.model).graph
        nodes = [n for n in graph.node if n.name == PROBE_NODE_NAME]
        assert len(nodes) == 1 and nodes[0].op_type == BY_ID[fid].op_type
        assert tuple(o.name for o in graph.output) == case.outputs
        assert {i.name for i in graph.input} == set(case.feeds)
    assert p.subject.outputs == p.control.outputs
    if ".output." in fid:  # optional output first, so the unwritten fault hits it
        assert p.subject.outputs[0] not in ("output", "Y")
    assert_control_runs_on_subject_arrays(p)
    assert separation(p) >= MIN_SEPARATION


# --- against ORT's CPU EP --------------------------------------------------------------

def _run(case: Case, feeds=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3  # SimplifiedLayerNormalization's inferred inv_std_var shape warns with axis=1
    sess = ort.InferenceSession(case.model, so, providers=["CPUExecutionProvider"])
    return sess.run(list(case.outputs), dict(feeds if feeds is not None else case.feeds))


def _assert_matches(case: Case, tol, feeds=None) -> None:
    for name, actual in zip(case.outputs, _run(case, feeds)):
        expected = case.reference[name]
        assert actual.shape == expected.shape, name
        bad = ~tol.close(actual, expected)
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} elements off"


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_probe_matches_ort_cpu(fid):
    p = BY_ID[fid].build()
    _assert_matches(p.subject, p.tolerance)
    _assert_matches(p.control, p.tolerance)
    _assert_matches(p.control, p.tolerance, feeds={n: p.subject.feeds[n] for n in p.control.feeds})


def _extra_configs():
    rng = np.random.default_rng(11)
    cos, sin = np.cos(rng.standard_normal((12, 4))), np.sin(rng.standard_normal((12, 4)))
    x3 = rng.standard_normal((2, 3, 4 * 16))
    return {
        # 4-D input with partial rotation and interleaving, float16.
        "rotary_4d_partial_interleaved_fp16": (rotary.OP, "float16", {"num_heads": 2, "rotary_embedding_dim": 8,
                                                                     "interleaved": 1},
                                               {"input": rng.standard_normal((2, 2, 3, 16)),
                                                "position_ids": np.array([[1, 7, 3], [0, 11, 2]], np.int64),
                                                "cos_cache": cos, "sin_cache": sin}, ("output",)),
        # scale is read and ignored by the CPU kernel (reference module docstring).
        "rotary_scale_has_no_effect": (rotary.OP, "float32", {"num_heads": 4, "rotary_embedding_dim": 8,
                                                             "scale": 3.0},
                                       {"input": x3, "position_ids": np.array([2], np.int64),
                                        "cos_cache": cos, "sin_cache": sin}, ("output",)),
        "skip_ln_fp16_all_outputs_2d": (norms.SLN, "float16", {"epsilon": 1e-3},
                                        {"input": rng.standard_normal((5, 24)), "skip": rng.standard_normal((5, 24)),
                                         "gamma": rng.standard_normal(24), "beta": rng.standard_normal(24),
                                         "bias": rng.standard_normal(24)},
                                        ("output", "mean", "inv_std_var", "input_skip_bias_sum")),
        "skip_simplified_broadcast_sum": (norms.SSLN, "float32", {"epsilon": 1e-6},
                                          {"input": rng.standard_normal((2, 3, 24)),
                                           "skip": rng.standard_normal((1, 3, 24)),
                                           "gamma": rng.standard_normal(24), "bias": rng.standard_normal(24)},
                                          ("input_skip_bias_sum", "output", "inv_std_var")),
        "simplified_axis0_fp16": (norms.SIMP, "float16", {"axis": 0, "epsilon": 1e-3},
                                  {"X": rng.standard_normal((2, 3, 8)), "scale": rng.standard_normal((2, 3, 8))},
                                  ("Y", "inv_std_var")),
    }


@pytest.mark.parametrize("name", sorted(_extra_configs()))
def test_reference_matches_ort_cpu_beyond_the_catalog(name):
    op, dtype, attrs, values, outputs = _extra_configs()[name]
    feeds = {k: (v if v.dtype.kind in "iu" else c.rounded(v, dtype)) for k, v in values.items()}
    _assert_matches(c.case(op, c.Graph(dtype, attrs, feeds, outputs)), TOLERANCES[dtype])


@pytest.mark.parametrize("fid", [f.id for f in rotary.FEATURES if f.id.startswith("rotary23.")])
def test_rotary23_reference_agrees_with_the_onnx_reference_evaluator(fid):
    """ONNX RotaryEmbedding-23 has an evaluator in onnx.reference: our float64 reference and
    it agree on every rotary23 probe (subject and control) within the probe's tolerance."""
    from onnx.reference import ReferenceEvaluator

    p = BY_ID[fid].build()
    for case in (p.subject, p.control):
        got = ReferenceEvaluator(onnx.load_from_string(case.model)).run(None, dict(case.feeds))[0]
        assert p.tolerance.close(got, case.reference["Y"]).all()
