"""The GQA reference and the GQA probe catalog, checked by hand and against ORT's CPU EP.

Three layers:

* tiny cases worked out by hand (single token, uniform scores, a 2×2 causal mask,
  windows, softcap/bias order, the extra softmax logit, rotary rotation);
* the catalog: ids, metadata, determinism, control feeds, decisive separation;
* every probe (subject and control) and a few extra configurations run on the real
  ``CPUExecutionProvider`` and compared with the reference on every output.
"""

from __future__ import annotations

import math
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnxruntime.capi import onnxruntime_pybind11_state as ort_state
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import BY_ID as ALL_FEATURES
from epaudit.catalog import gqa as catalog
from epaudit.catalog import gqa_graph as graph
from epaudit.catalog import gqa_llm
from epaudit.catalog.models import one_node_model, round_to_bfloat16
from epaudit.classify.compare import separation
from epaudit.contract.probes import (
    MIN_SEPARATION,
    PROBE_NODE_NAME,
    TOLERANCES,
    Case,
    Probe,
    tolerance_for,
)
from epaudit.matrix.load import default_text, tomllib
from epaudit.reference.gqa import gqa_reference, rotary_embedding

#: The catalog's GQA feature ids, in catalog order: every probe test runs over these.
IDS = tuple(f.id for f in catalog.FEATURES)
#: The LLM-serving ones (catalog/gqa_llm.py), a tail of IDS.
LLM_IDS = frozenset(f.id for f in gqa_llm.FEATURES)
#: The GQA ids the shipped matrix declares, in file order, read as plain TOML (not through
#: the catalog): the catalog must hold exactly these, so a feature added without its
#: declaration, or renamed or dropped while the matrix still declares it, fails. Ids that
#: another catalog source owns are not this module's.
EXPECTED_IDS = tuple(fid for fid in tomllib.loads(default_text())["features"]
                     if fid.startswith("gqa.") and (fid in IDS or fid not in ALL_FEATURES))
#: dtypes the CPU EP registers no GroupQueryAttention kernel for (docs/ort-facts.md "GroupQueryAttention", measured).
CPU_UNSUPPORTED_DTYPES = {"bfloat16"}
#: Features the onnxruntime-gpu 1.31.1 CPU EP refuses, with the error it gives (measured):
#: QK-norm (the schema: EPs other than CUDA and WebGPU must reject it) and a float8 cache
#: (T_CACHE registered as float/float16/uint8/int8 only).
ORT_CPU_REFUSES = {
    "gqa.qk_norm": "q_norm_weight / k_norm_weight inputs are not supported",
    "gqa.qk_norm_epsilon": "q_norm_weight / k_norm_weight inputs are not supported",
    "gqa.qk_norm.with_rotary": "q_norm_weight / k_norm_weight inputs are not supported",
    "gqa.kv_cache.float8e4m3fn": "Failed to find kernel for com.microsoft.GroupQueryAttention(1)",
}
#: Features the 1.31.1 CPU EP gets silently wrong, declared skip on CPU in the shipped matrix
#: (pinned in tests/test_llm_serving.py).
ORT_CPU_WRONG = {"gqa.outputs.output_only.with_past": "test_cpu_gqa_decode_without_presents_is_wrong"}


def _ref(q, k, v, *, n=1, nkv=1, **kw):
    """gqa_reference on a first prompt of the query's length, unless told otherwise."""
    b, s = q.shape[:2]
    kw.setdefault("seqlens_k", np.full(b, s - 1))
    kw.setdefault("total_sequence_length", s)
    return gqa_reference(q, k, v, num_heads=n, kv_num_heads=nkv, **kw)


# --- hand-computed cases --------------------------------------------------------------

def test_single_token_output_is_value_of_the_shared_kv_head():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 1, 4 * 8))
    k = rng.standard_normal((1, 1, 2 * 8))
    v = rng.standard_normal((1, 1, 2 * 8))
    r = _ref(q, k, v, n=4, nkv=2)
    # One key: softmax is 1 whatever the score; heads 0,1 read kv head 0, heads 2,3 kv head 1.
    expected = np.concatenate([v[..., :8], v[..., :8], v[..., 8:], v[..., 8:]], axis=-1)
    np.testing.assert_allclose(r["output"], expected, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(r["present_key"], k.reshape(1, 1, 2, 8).transpose(0, 2, 1, 3))
    np.testing.assert_array_equal(r["present_value"], v.reshape(1, 1, 2, 8).transpose(0, 2, 1, 3))
    assert r["output"].shape == (1, 1, 32) and r["present_key"].shape == (1, 2, 1, 8)
    assert "output_qk" not in r


def test_zero_query_gives_the_mean_of_the_causal_prefix():
    rng = np.random.default_rng(1)
    v = rng.standard_normal((1, 3, 8))
    r = _ref(np.zeros((1, 3, 8)), rng.standard_normal((1, 3, 8)), v)
    for s in range(3):
        np.testing.assert_allclose(r["output"][0, s], v[0, :s + 1].mean(axis=0), rtol=0, atol=1e-15)


def _two_tokens():
    """N = Nkv = 1, H = 8, scale 1: scores s00 = 0.5, s10 = 1.0, s11 = 3.0 (s01 masked)."""
    q = np.zeros((1, 2, 8))
    q[0, 0, 0] = 1.0
    q[0, 1, 1] = 1.0
    k = np.zeros((1, 2, 8))
    k[0, 0, :2] = [0.5, 1.0]
    k[0, 1, :2] = [7.0, 3.0]  # k1·q0 = 7 would dominate row 0 if the mask leaked
    v = np.zeros((1, 2, 8))
    v[0, 0, 0] = 1.0
    v[0, 1, 1] = 1.0
    return q, k, v


def test_causal_mask_two_by_two_by_hand():
    q, k, v = _two_tokens()
    p10 = math.exp(1.0) / (math.exp(1.0) + math.exp(3.0))
    r1 = _ref(q, k, v, scale=1.0, qk_output=1)
    np.testing.assert_allclose(r1["output_qk"][0, 0], [[0.5, 0.0], [1.0, 3.0]], rtol=0, atol=1e-15)
    np.testing.assert_allclose(r1["output"][0, 0, :2], [1.0, 0.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(r1["output"][0, 1, :2], [p10, 1 - p10], rtol=0, atol=1e-15)
    r2 = _ref(q, k, v, scale=1.0, qk_output=2)
    np.testing.assert_allclose(r2["output_qk"][0, 0], [[1.0, 0.0], [p10, 1 - p10]], rtol=0, atol=1e-15)


def test_default_scale_is_one_over_sqrt_head_size():
    q, k, v = _two_tokens()
    r = _ref(q, k, v, qk_output=1)
    np.testing.assert_allclose(r["output_qk"][0, 0, 1], [1.0 / math.sqrt(8), 3.0 / math.sqrt(8)],
                               rtol=0, atol=1e-15)


def test_local_window_counts_the_current_key():
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 4, 8)) for _ in range(3))
    # W = 1: every query sees only itself.
    np.testing.assert_allclose(_ref(q, k, v, local_window_size=1)["output"], v, rtol=0, atol=1e-15)
    # W = 2: query 3 sees keys 2 and 3 only.
    r = _ref(q, k, v, local_window_size=2, qk_output=2)
    s = q[0, 3] @ k[0, 2:4].T / math.sqrt(8)
    p = np.exp(s) / np.exp(s).sum()
    np.testing.assert_allclose(r["output_qk"][0, 0, 3], [0.0, 0.0, *p], rtol=0, atol=1e-15)
    np.testing.assert_allclose(r["output"][0, 3], p @ v[0, 2:4], rtol=0, atol=1e-14)


def _one_score(x: float):
    """S = 1, H = 8, scale 1: a single score x; value row e1."""
    q = np.zeros((1, 1, 8))
    q[0, 0, 0] = 1.0
    k = np.zeros((1, 1, 8))
    k[0, 0, 0] = x
    v = np.zeros((1, 1, 8))
    v[0, 0, 1] = 1.0
    return q, k, v


def test_softcap_comes_before_the_bias():
    q, k, v = _one_score(3.0)
    r = _ref(q, k, v, scale=1.0, softcap=2.0, attention_bias=np.full((1, 1, 1, 1), 0.7), qk_output=1)
    # 2·tanh(3/2) + 0.7, not 2·tanh((3 + 0.7)/2).
    assert r["output_qk"][0, 0, 0, 0] == pytest.approx(2.0 * math.tanh(1.5) + 0.7, abs=1e-15)


@pytest.mark.parametrize("smooth, sink, extra", [
    (1, None, 0.0),    # smooth softmax: the extra logit is 0
    (0, -1.5, -1.5),   # head_sink alone turns the extra logit on
    (1, 2.0, 2.0),     # with both, the sink value wins
])
def test_extra_logit_in_the_denominator(smooth, sink, extra):
    q, k, v = _one_score(0.8)
    kw = {} if sink is None else {"head_sink": np.array([sink])}
    r = _ref(q, k, v, scale=1.0, smooth_softmax=smooth, **kw)
    p = math.exp(0.8) / (math.exp(0.8) + math.exp(extra))
    assert r["output"][0, 0, 1] == pytest.approx(p, abs=1e-15)


def test_bias_broadcasts_over_batch_and_heads():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 3, 2 * 8))
    k, v = rng.standard_normal((2, 3, 8)), rng.standard_normal((2, 3, 8))
    bias = rng.standard_normal((1, 1, 3, 3))
    broadcast = _ref(q, k, v, n=2, nkv=1, attention_bias=bias)
    full = _ref(q, k, v, n=2, nkv=1, attention_bias=np.broadcast_to(bias, (2, 2, 3, 3)).copy())
    np.testing.assert_array_equal(broadcast["output"], full["output"])


def test_packed_qkv_equals_separate_inputs():
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((2, 3, 4 * 8)), rng.standard_normal((2, 3, 16)), rng.standard_normal((2, 3, 16))
    packed = _ref(np.concatenate([q, k, v], axis=-1), None, None, n=4, nkv=2)
    separate = _ref(q, k, v, n=4, nkv=2)
    for name in ("output", "present_key", "present_value"):
        np.testing.assert_array_equal(packed[name], separate[name])


def test_rotary_rotates_halves_or_pairs_by_hand():
    x = np.arange(1.0, 17.0)  # H = 16, rotary over all 16 features
    theta = np.linspace(0.1, 0.8, 8)
    cos, sin = np.cos(theta), np.sin(theta)
    halves = rotary_embedding(x, cos, sin, interleaved=False)
    # Pair (i, i + 8) rotated by theta_i.
    assert halves[0] == pytest.approx(x[0] * cos[0] - x[8] * sin[0], abs=1e-14)
    assert halves[8] == pytest.approx(x[8] * cos[0] + x[0] * sin[0], abs=1e-14)
    pairs = rotary_embedding(x, cos, sin, interleaved=True)
    # Pair (2i, 2i + 1) rotated by theta_i.
    assert pairs[6] == pytest.approx(x[6] * cos[3] - x[7] * sin[3], abs=1e-14)
    assert pairs[7] == pytest.approx(x[7] * cos[3] + x[6] * sin[3], abs=1e-14)
    # A partial rotary dim (R = 8) leaves features 8..15 alone.
    partial = rotary_embedding(x, cos[:4], sin[:4], interleaved=False)
    np.testing.assert_array_equal(partial[8:], x[8:])
    assert np.linalg.norm(halves) == pytest.approx(np.linalg.norm(x), rel=1e-14)


def test_decode_appends_the_new_token_to_the_cache():
    rng = np.random.default_rng(5)
    past_k, past_v = rng.standard_normal((1, 1, 3, 8)), rng.standard_normal((1, 1, 3, 8))
    q, k, v = (rng.standard_normal((1, 1, 8)) for _ in range(3))
    r = gqa_reference(q, k, v, num_heads=1, kv_num_heads=1, past_key=past_k, past_value=past_v,
                      seqlens_k=np.array([3]), total_sequence_length=4, qk_output=2)
    np.testing.assert_array_equal(r["present_key"][0, 0], np.vstack([past_k[0, 0], k[0]]))
    np.testing.assert_array_equal(r["present_value"][0, 0], np.vstack([past_v[0, 0], v[0]]))
    keys = r["present_key"][0, 0]
    s = keys @ q[0, 0] / math.sqrt(8)
    p = np.exp(s) / np.exp(s).sum()
    np.testing.assert_allclose(r["output_qk"][0, 0, 0], p, rtol=0, atol=1e-15)
    np.testing.assert_allclose(r["output"][0, 0], p @ r["present_value"][0, 0], rtol=0, atol=1e-14)


@pytest.mark.parametrize("kwargs, message", [
    ({"query": np.zeros((1, 2, 12))}, "multiple of 8"),
    ({"value": None}, "both"),
    ({"kv_num_heads": 2}, "multiple of kv_num_heads"),
    ({"qk_output": 3}, "qk_output"),
    ({"local_window_size": 0}, "local_window_size"),
    ({"do_rotary": 1}, "cos_cache"),
    ({"attention_bias": np.zeros((1, 1, 2, 3))}, "attention_bias"),
    ({"head_sink": np.zeros(2)}, "head_sink"),
])
def test_invalid_inputs_raise(kwargs, message):
    args = {"query": np.zeros((1, 2, 16)), "key": np.zeros((1, 2, 16)), "value": np.zeros((1, 2, 16)),
            "num_heads": 1, "kv_num_heads": 1, "seqlens_k": np.array([1]), "total_sequence_length": 2}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        gqa_reference(args.pop("query"), args.pop("key"), args.pop("value"), **args)


def test_past_context_with_several_new_tokens_needs_batch_one():
    z = np.zeros
    with pytest.raises(ValueError, match="batch_size must be 1"):
        gqa_reference(z((2, 2, 8)), z((2, 2, 8)), z((2, 2, 8)), num_heads=1, kv_num_heads=1,
                      past_key=z((2, 1, 3, 8)), past_value=z((2, 1, 3, 8)),
                      seqlens_k=np.array([4, 4]), total_sequence_length=5)


def test_round_to_bfloat16_ties_to_even_like_an_ort_cast():
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -1 - 2**-8 - 2**-20, 3.14159, 1e-3, -65504.0],
                 dtype=np.float32)
    ours = round_to_bfloat16(x)
    assert ours[1] == 1.0 and ours[2] == 1 + 2**-6  # exact ties go to the even mantissa
    model = one_node_model("Identity", "", 21, [("x", "bfloat16", (x.size,))], [("y", "bfloat16")])
    (ort_rounded,) = _session(model).run(None, {"x": x})
    np.testing.assert_array_equal(ours, ort_rounded)


# --- the catalog ----------------------------------------------------------------------

PROBES: dict[str, Probe] = {}


def _probe(fid: str) -> Probe:
    if fid not in PROBES:
        PROBES[fid] = {f.id: f for f in catalog.FEATURES}[fid].build()
    return PROBES[fid]


def test_catalog_ids_and_metadata():
    assert IDS == EXPECTED_IDS, "catalog.gqa and the GQA features of capabilities.toml differ"
    for f in catalog.FEATURES:
        assert (f.op_type, f.domain, f.opset) == ("GroupQueryAttention", "com.microsoft", 1)
        expected_dtype = f.id.rsplit(".", 1)[1] if f.id.startswith("gqa.dtype.") else "float16"
        assert f.dtype == expected_dtype
        assert f.changes and "\n" not in f.changes and f.source


@pytest.mark.parametrize("fid", IDS)
def test_probe_is_well_formed(fid):
    p = _probe(fid)
    assert p.feature_id == fid and p.dtype == catalog.FEATURES[IDS.index(fid)].dtype
    head = int(fid.rsplit(".", 1)[1]) if ".head_size." in fid else 16
    assert p.tolerance == tolerance_for(p.dtype, head)
    if head > 16:  # widened by sqrt(H / 16) for the longer dot products, never narrowed
        assert p.tolerance.atol == pytest.approx(TOLERANCES[p.dtype].atol * (head / 16) ** 0.5)
    for case in (p.subject, p.control):
        graph = onnx.load_from_string(case.model).graph
        gqa_nodes = [n for n in graph.node if n.op_type == "GroupQueryAttention"]
        assert len(gqa_nodes) == 1 and gqa_nodes[0].name == PROBE_NODE_NAME
        assert tuple(o.name for o in graph.output) == case.outputs
        assert {i.name for i in graph.input} == set(case.feeds)
        assert set(case.reference) == set(case.outputs)
        assert all(r.dtype == np.float64 for r in case.reference.values())
    assert p.subject.outputs == p.control.outputs
    # output first; presents and output_qk as the feature requests them
    assert p.subject.outputs[0] == "output"
    assert set(p.subject.outputs) <= {"output", "present_key", "present_value", "output_qk"}
    # The control runs on the subject's arrays: its feeds are a subset, same values and dtypes.
    assert_control_runs_on_subject_arrays(p)


@pytest.mark.parametrize("fid", ["gqa.prompt", "gqa.decode", "gqa.dtype.bfloat16"])
def test_build_is_deterministic(fid):
    feature = {f.id: f for f in catalog.FEATURES}[fid]
    a, b = feature.build(), feature.build()
    for ca, cb in ((a.subject, b.subject), (a.control, b.control)):
        assert ca.model == cb.model
        for name in ca.feeds:
            np.testing.assert_array_equal(ca.feeds[name], cb.feeds[name])
        for name in ca.reference:
            np.testing.assert_array_equal(ca.reference[name], cb.reference[name])


def test_bfloat16_feeds_hold_bfloat16_values():
    p = _probe("gqa.dtype.bfloat16")
    for name in ("query", "key", "value"):
        arr = p.subject.feeds[name]
        assert arr.dtype == np.float32
        assert not (arr.view(np.uint32) & 0xFFFF).any()


@pytest.mark.parametrize("fid", IDS)
def test_subject_and_control_references_are_decisively_apart(fid):
    p = _probe(fid)
    # classify.compare.separation: a control read with other head counts (gqa.num_heads)
    # has presents of another shape, which counts as infinitely apart.
    assert separation(p) >= MIN_SEPARATION
    # ... and for the LLM-serving features the attention output itself moves by far more
    # than the bound (the qk_output features differ in output_qk only, by design).
    if fid in LLM_IDS:
        out_s, out_c = p.subject.reference["output"], p.control.reference["output"]
        assert np.max(np.abs(out_s - out_c) / p.tolerance.bound(out_c)) >= MIN_SEPARATION


# --- against ORT's CPU EP -------------------------------------------------------------

def _session(model: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3  # GQA shape inference warns that present is longer than past
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _assert_matches(case: Case, tol, feeds=None) -> None:
    got = _session(case.model).run(list(case.outputs), dict(feeds or case.feeds))
    for name, actual in zip(case.outputs, got):
        expected = case.reference[name]
        assert actual.shape == expected.shape, name
        if name in case.exact:  # a copy: bit for bit
            np.testing.assert_array_equal(actual.astype(np.float64), expected, err_msg=name)
        bad = ~tol.close(actual, expected)
        assert not bad.any(), (f"{name}: {int(bad.sum())} elements off, max abs error "
                               f"{float(np.max(np.abs(actual.astype(np.float64) - expected))):.3g}")


@pytest.mark.parametrize("fid", IDS)
def test_probe_matches_ort_cpu(fid):
    p = _probe(fid)
    if fid in ORT_CPU_WRONG:
        pytest.skip(f"the CPU EP is wrong here (declared skip; pinned by {ORT_CPU_WRONG[fid]})")
    if fid in ORT_CPU_REFUSES:
        # The refusal must be ORT's, loud, for the subject (at creation or at run).
        with pytest.raises((ort_state.InvalidArgument, ort_state.NotImplemented), match=re.escape(ORT_CPU_REFUSES[fid])):
            _session(p.subject.model).run(list(p.subject.outputs), dict(p.subject.feeds))
        return
    if p.dtype in CPU_UNSUPPORTED_DTYPES:
        try:
            _session(p.subject.model)
        except ort_state.NotImplemented as exc:
            assert "Could not find an implementation for GroupQueryAttention(1)" in str(exc)
            return
        # A future CPU kernel for this dtype must then be right.
    _assert_matches(p.subject, p.tolerance)
    _assert_matches(p.control, p.tolerance)
    # The "ignored" fault: the control graph fed from the subject's arrays.
    from_subject = {name: p.subject.feeds[name] for name in p.control.feeds}
    _assert_matches(p.control, p.tolerance, feeds=from_subject)


def _extra_case(attrs, **feeds) -> Case:
    """A float32 GQA case (N = 4, Nkv = 2, H = 16) built by the catalog's own machinery."""
    values = {k: (v if v.dtype.kind in "iu" else graph._rounded(v, "float32")) for k, v in feeds.items()}
    return graph._case(graph._Graph("float32", attrs, values))


def _rope(rows):
    return graph._rope_cache(rows, 16)


def _extra_configs():
    rng = np.random.default_rng(7)
    b, s, p = 2, 5, 6
    n, nkv, h = graph.N, graph.NKV, graph.H
    prompt = {"query": rng.standard_normal((b, s, n * h)), "key": rng.standard_normal((b, s, nkv * h)),
              "value": rng.standard_normal((b, s, nkv * h)), "seqlens_k": np.full(b, s - 1, np.int32),
              "total_sequence_length": np.array(s, np.int32)}
    cos, sin = _rope(16)
    decode = {"query": rng.standard_normal((b, 1, n * h)), "key": rng.standard_normal((b, 1, nkv * h)),
              "value": rng.standard_normal((b, 1, nkv * h)),
              "past_key": rng.standard_normal((b, nkv, p, h)), "past_value": rng.standard_normal((b, nkv, p, h)),
              "seqlens_k": np.full(b, p, np.int32), "total_sequence_length": np.array(p + 1, np.int32)}
    chunk = {"query": rng.standard_normal((1, 3, n * h)), "key": rng.standard_normal((1, 3, nkv * h)),
             "value": rng.standard_normal((1, 3, nkv * h)),
             "past_key": rng.standard_normal((1, nkv, p, h)), "past_value": rng.standard_normal((1, nkv, p, h)),
             "seqlens_k": np.array([p + 2], np.int32), "total_sequence_length": np.array(p + 3, np.int32)}
    bias = 2.0 * rng.standard_normal((b, n, s, s))
    return {
        "rotary_interleaved": ({"do_rotary": 1, "rotary_interleaved": 1}, dict(prompt, cos_cache=cos, sin_cache=sin)),
        # First prompt: only position_ids[0, 0] is read (schema text), here 3 -> positions 3..7.
        "rotary_position_ids_first_prompt": ({"do_rotary": 1}, dict(
            prompt, cos_cache=cos, sin_cache=sin,
            position_ids=np.array([[3, 9, 0, 1, 2], [7, 7, 7, 7, 7]], np.int64))),
        "decode_rotary_window_bias_qk1": ({"do_rotary": 1, "local_window_size": 3, "qk_output": 1}, dict(
            decode, cos_cache=cos, sin_cache=sin, attention_bias=2.0 * rng.standard_normal((b, 1, 1, p + 1)))),
        "decode_rotary_position_ids": ({"do_rotary": 1}, dict(
            decode, cos_cache=cos, sin_cache=sin, position_ids=np.array([[2], [11]], np.int64))),
        "subsequent_prompt_rotary": ({"do_rotary": 1, "qk_output": 2}, dict(chunk, cos_cache=cos, sin_cache=sin)),
        "softcap_bias_window_qk2": ({"softcap": 1.5, "local_window_size": 3, "qk_output": 2},
                                    dict(prompt, query=3 * prompt["query"], attention_bias=bias)),
        "smooth_softmax_with_sink_scale": ({"smooth_softmax": 1, "scale": 0.4},
                                           dict(prompt, head_sink=np.array([1.0, -1.0, 0.5, 3.0]))),
    }


@pytest.mark.parametrize("name", sorted(_extra_configs()))
def test_reference_matches_ort_cpu_beyond_the_catalog(name):
    attrs, feeds = _extra_configs()[name]
    _assert_matches(_extra_case(attrs, **feeds), TOLERANCES["float32"])


def test_softcap_with_bias_order_is_decisive():
    """An EP adding the bias before the softcap (the wrong order) cannot pass."""
    p = _probe("gqa.softcap.with_bias")
    f = p.subject.feeds
    # Wrong order by hand: softcap(scores + bias), then the causal softmax.
    q = f["query"].reshape(graph.B, graph.S, graph.N, graph.H).transpose(0, 2, 1, 3)
    k = np.repeat(f["key"].reshape(graph.B, graph.S, graph.NKV, graph.H).transpose(0, 2, 1, 3), 2, axis=1)
    v = np.repeat(f["value"].reshape(graph.B, graph.S, graph.NKV, graph.H).transpose(0, 2, 1, 3), 2, axis=1)
    logits = 2.0 * np.tanh((q @ np.swapaxes(k, -1, -2) / np.sqrt(graph.H) + f["attention_bias"]) / 2.0)
    logits = np.where(np.tril(np.ones((graph.S, graph.S), bool)), logits, -np.inf)
    e = np.exp(logits - logits.max(-1, keepdims=True))
    y = ((e / e.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(graph.B, graph.S, -1)
    ratio = np.abs(p.subject.reference["output"] - y) / p.tolerance.bound(y)
    assert ratio.max() >= MIN_SEPARATION


def test_batch_ragged_padding_never_reaches_the_valid_row():
    """Row 1's padded cache slots (offset +4) carry no weight: zeroing them changes nothing."""
    p = _probe("gqa.batch_ragged")
    f = dict(p.subject.feeds)
    for name in ("past_key", "past_value"):
        f[name] = f[name].copy()
        f[name][1, :, 4:] = 0.0
    clean = gqa_reference(f["query"], f["key"], f["value"], num_heads=graph.N, kv_num_heads=graph.NKV,
                          past_key=f["past_key"], past_value=f["past_value"], seqlens_k=f["seqlens_k"],
                          total_sequence_length=int(f["total_sequence_length"]))
    np.testing.assert_array_equal(clean["output"], p.subject.reference["output"])
