"""The MultiHeadAttention reference and catalog, checked by hand and against ORT's CPU EP.

``onnx.reference`` has no evaluator for ``com.microsoft`` operators, so the float64
reference (:mod:`epaudit.reference.mha`) is checked two ways instead:

* small cases worked out by hand (one key, a zero query, additive masks, the fixed −10000
  causal part, the projection bias, packed inputs equal to separate ones);
* every probe's subject and control, the "ignored" control run on the subject's arrays, and
  a few configurations outside the catalog, run through the real ``CPUExecutionProvider``.
  Packed QKV / KV are ``NOT_IMPLEMENTED`` on CPU, and the tests assert that refusal.
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import _contrib as c
from epaudit.catalog import mha as catalog
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, PROBE_NODE_NAME, TOLERANCES, Case
from epaudit.reference.mha import mha_reference

IDS = tuple(f.id for f in catalog.FEATURES)
BY_ID = {f.id: f for f in catalog.FEATURES}
#: Refused by the CPU kernel (multihead_attention.cc), measured on ORT 1.31.1.
CPU_REFUSED = {"mha.packed_qkv": "Packed QKV of shape (B, L, N, 3, H) not implemented for CPU",
               "mha.packed_kv": "Packed KV not implemented for CPU"}


# --- by hand ---------------------------------------------------------------------------

def test_one_key_returns_its_value_whatever_the_score():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 1, 8)), rng.standard_normal((1, 1, 8))
    r = mha_reference(q, k, v, num_heads=1)
    np.testing.assert_allclose(r["output"], np.broadcast_to(v, (1, 3, 8)), rtol=0, atol=1e-15)
    np.testing.assert_array_equal(r["present_key"], k.reshape(1, 1, 1, 8))


def test_zero_query_is_the_mean_of_the_values():
    rng = np.random.default_rng(1)
    k, v = rng.standard_normal((1, 5, 16)), rng.standard_normal((1, 5, 16))
    r = mha_reference(np.zeros((1, 2, 16)), k, v, num_heads=2)
    np.testing.assert_allclose(r["output"][0, 0], v[0].mean(axis=0), rtol=0, atol=1e-15)


def _two_keys(score0: float, score1: float):
    """N = 1, H = 4, scale 1: query e0, keys with scores score0 / score1, values e1 / e2."""
    q = np.zeros((1, 1, 4))
    q[0, 0, 0] = 1.0
    k = np.zeros((1, 2, 4))
    k[0, :, 0] = [score0, score1]
    v = np.zeros((1, 2, 4))
    v[0, 0, 1] = v[0, 1, 2] = 1.0
    return q, k, v


def test_mask_filter_value_is_added_not_substituted():
    q, k, v = _two_keys(0.5, 2.0)
    r = mha_reference(q, k, v, num_heads=1, scale=1.0, key_padding_mask=np.array([[1, 0]]), mask_filter_value=-1.0)
    # Key 1 keeps its score plus -1 (CPU PrepareMask adds), not -1 alone.
    p1 = math.exp(1.0) / (math.exp(0.5) + math.exp(1.0))
    assert r["output"][0, 0, 2] == pytest.approx(p1, abs=1e-15)


@pytest.mark.parametrize("mask", [np.array([1]), np.array([1, 0, 1, 0, 2]), np.array([[1, 0]]),
                                  np.array([[[1, 0]]])])
def test_every_mask_form_pads_key_one(mask):
    # (B), (3B+2) with B = 1 (key length 1, then offsets), (B, T), (B, S, T): same padding.
    q, k, v = _two_keys(0.5, 2.0)
    r = mha_reference(q, k, v, num_heads=1, scale=1.0, key_padding_mask=mask)
    p1 = math.exp(2.0 - 10000.0) / (math.exp(0.5) + math.exp(2.0 - 10000.0))
    assert r["output"][0, 0, 2] == pytest.approx(p1, abs=1e-300)
    assert r["output"][0, 0, 1] == pytest.approx(1.0, abs=1e-15)


def test_causal_part_is_a_fixed_minus_10000_and_spares_the_last_row():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 3, 4)) for _ in range(3))
    r = mha_reference(q, k, v, num_heads=1, unidirectional=1, mask_filter_value=-1.0)
    s = q[0] @ k[0].T / 2.0
    s[0, 1:] -= 10000.0  # row 0 sees key 0 only, whatever mask_filter_value is
    s[1, 2] -= 10000.0
    p = np.exp(s - s.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(r["output"][0], p @ v[0], rtol=0, atol=1e-14)
    # Cross-attention (L = 4 > S = 2): row 0 masks keys 1..3, the last row sees all keys.
    k4, v4 = rng.standard_normal((1, 4, 4)), rng.standard_normal((1, 4, 4))
    cross = mha_reference(q[:, :2], k4, v4, num_heads=1, unidirectional=1)
    plain = mha_reference(q[:, :2], k4, v4, num_heads=1)
    np.testing.assert_allclose(cross["output"][0, 0], v4[0, 0], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(cross["output"][0, 1], plain["output"][0, 1])


def test_projection_bias_is_added_to_q_k_and_v():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((1, 2, 8)), rng.standard_normal((1, 3, 8)), rng.standard_normal((1, 3, 8))
    bias = rng.standard_normal(24)
    r = mha_reference(q, k, v, num_heads=2, bias=bias)
    direct = mha_reference(q + bias[:8], k + bias[8:16], v + bias[16:], num_heads=2)
    np.testing.assert_array_equal(r["output"], direct["output"])


def test_packed_qkv_and_kv_equal_separate_inputs():
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 3, 2, 8)) for _ in range(3))
    separate = mha_reference(q.reshape(2, 3, 16), k.reshape(2, 3, 16), v.reshape(2, 3, 16), num_heads=2)
    packed = mha_reference(np.stack([q, k, v], axis=3), num_heads=2)
    packed_kv = mha_reference(q.reshape(2, 3, 16), np.stack([k, v], axis=3), num_heads=2)
    for r in (packed, packed_kv):
        np.testing.assert_array_equal(r["output"], separate["output"])


def test_past_is_concatenated_before_the_new_keys():
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((1, 1, 8)) for _ in range(3))
    pk, pv = rng.standard_normal((1, 1, 2, 8)), rng.standard_normal((1, 1, 2, 8))
    r = mha_reference(q, k, v, num_heads=1, past_key=pk, past_value=pv)
    np.testing.assert_array_equal(r["present_key"][0, 0], np.concatenate([pk[0, 0], k[0]]))
    np.testing.assert_array_equal(r["present_value"][0, 0, 2], v[0, 0])


@pytest.mark.parametrize("kwargs, message", [
    ({"key_padding_mask": np.ones((3, 3), np.int32)}, "key_padding_mask shape"),
    ({"attention_bias": np.zeros((1, 1, 2, 5))}, "attention_bias must be"),
    ({"past_key": np.zeros((1, 1, 1, 8))}, "both be given"),
    ({"bias": np.zeros(5)}, "bias must be"),
])
def test_invalid_inputs_raise(kwargs, message):
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match=message):
        mha_reference(rng.standard_normal((1, 2, 8)), rng.standard_normal((1, 3, 8)),
                      rng.standard_normal((1, 3, 8)), num_heads=1, **kwargs)


# --- the catalog -----------------------------------------------------------------------

def test_catalog_metadata():
    assert len(IDS) == len(set(IDS)) >= 20
    for f in catalog.FEATURES:
        assert (f.op_type, f.domain, f.opset) == ("MultiHeadAttention", "com.microsoft", 1)
        assert f.id.startswith("mha.") and f.changes and "\n" not in f.changes
        assert "ContribOperators.md" in f.source
        for name in f.uses.inputs + f.uses.absent:
            assert name in catalog.OP.inputs
    used = {f.id for f in catalog.FEATURES if f.uses.varied or f.uses.absent}
    assert {"mha.bias", "mha.attention_bias", "mha.scale", "mha.unidirectional",
            "mha.mask_filter_value", "mha.packed_qkv"} <= used


@pytest.mark.parametrize("fid", IDS)
def test_probe_is_well_formed_and_decisive(fid):
    p = BY_ID[fid].build()
    for case in (p.subject, p.control):
        graph = onnx.load_from_string(case.model).graph
        nodes = [n for n in graph.node if n.op_type == "MultiHeadAttention"]
        assert len(nodes) == 1 and nodes[0].name == PROBE_NODE_NAME
        assert tuple(o.name for o in graph.output) == case.outputs
        assert {i.name for i in graph.input} == set(case.feeds)
    assert p.subject.outputs == p.control.outputs
    assert_control_runs_on_subject_arrays(p)
    assert separation(p) >= MIN_SEPARATION


def test_build_is_deterministic():
    a, b = BY_ID["mha.key_padding_mask.raw_3d"].build(), BY_ID["mha.key_padding_mask.raw_3d"].build()
    assert a.subject.model == b.subject.model
    np.testing.assert_array_equal(a.subject.reference["output"], b.subject.reference["output"])


# --- against ORT's CPU EP --------------------------------------------------------------

def _run(case: Case, feeds=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(case.model, so, providers=["CPUExecutionProvider"])
    return sess.run(list(case.outputs), dict(feeds if feeds is not None else case.feeds))


def _assert_matches(case: Case, tol, feeds=None) -> None:
    for name, actual in zip(case.outputs, _run(case, feeds)):
        expected = case.reference[name]
        assert actual.shape == expected.shape, name
        if name in case.exact:
            np.testing.assert_array_equal(actual.astype(np.float64), expected, err_msg=name)
        bad = ~tol.close(actual, expected)
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} elements off"


@pytest.mark.parametrize("fid", IDS)
def test_probe_matches_ort_cpu(fid):
    p = BY_ID[fid].build()
    if fid in CPU_REFUSED:
        with pytest.raises(Exception, match=CPU_REFUSED[fid].replace("(", r"\(").replace(")", r"\)")):
            _run(p.subject)
        return
    _assert_matches(p.subject, p.tolerance)
    _assert_matches(p.control, p.tolerance)
    _assert_matches(p.control, p.tolerance, feeds={n: p.subject.feeds[n] for n in p.control.feeds})


def _extra(attrs, dtype="float32", outputs=("output",), **values) -> Case:
    feeds = {k: (v if v.dtype.kind in "iu" else c.rounded(v, dtype)) for k, v in values.items()}
    return c.case(catalog.OP, c.Graph(dtype, {"num_heads": 2, **attrs}, feeds, outputs))


def _extra_configs():
    rng = np.random.default_rng(9)
    b, s, n, h = 2, 5, 2, 8
    qkv = {"query": rng.standard_normal((b, s, n * h)), "key": rng.standard_normal((b, 7, n * h)),
           "value": rng.standard_normal((b, 7, n * h))}
    past = {"past_key": rng.standard_normal((b, n, 3, h)), "past_value": rng.standard_normal((b, n, 3, h))}
    self_qkv = dict(qkv, key=rng.standard_normal((b, s, n * h)), value=rng.standard_normal((b, s, n * h)))
    mask3 = (rng.random((b, s, 8)) > 0.3).astype(np.int32)
    mask3[..., 0] = 1
    return {
        # Cross-attention with unidirectional: the CPU's last-row rule (reference docstring).
        "cross_unidirectional": ({"unidirectional": 1}, qkv),
        "bias_mask_filter_attention_bias": ({"mask_filter_value": -3.0}, dict(
            qkv, bias=rng.standard_normal(3 * n * h), key_padding_mask=np.array([4, 6], np.int32),
            attention_bias=rng.standard_normal((1, n, s, 7)))),
        "past_unidirectional_mask3d_scale": ({"unidirectional": 1, "scale": 0.7}, dict(
            self_qkv, key=self_qkv["key"][:, :s], **past, key_padding_mask=mask3)),
        "float16_past_attention_bias": ({}, dict(self_qkv, **past,
                                                 attention_bias=rng.standard_normal((b, 1, s, s + 3)))),
    }


@pytest.mark.parametrize("name", sorted(_extra_configs()))
def test_reference_matches_ort_cpu_beyond_the_catalog(name):
    attrs, values = _extra_configs()[name]
    dtype = "float16" if name.startswith("float16") else "float32"
    outputs = ("output", "present_key", "present_value") if "past_key" in values else ("output",)
    _assert_matches(_extra(attrs, dtype, outputs, **values), TOLERANCES[dtype])


def test_qk_output_is_the_pre_softmax_buffer_with_bias_and_mask():
    q, k, v = _two_keys(0.5, 2.0)
    r = mha_reference(q, k, v, num_heads=1, scale=1.0, attention_bias=np.array([[[[0.25, -1.0]]]]),
                      key_padding_mask=np.array([[1, 0]]), mask_filter_value=-3.0)
    np.testing.assert_allclose(r["qk"][0, 0, 0], [0.75, 2.0 - 1.0 - 3.0], rtol=0, atol=1e-15)
