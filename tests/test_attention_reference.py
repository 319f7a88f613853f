"""The ONNX Attention reference and probe catalog, checked three ways.

1. Hand-computed tiny cases: each rule of ``epaudit.reference.attention`` against values
   derived on paper (scalar ``math`` formulas, never the vectorized code under test).
2. Every catalog feature: subject and control references are decisively apart, the
   subject is decisively apart from the known wrong semantics it exists to catch, and
   the controls keep the contract (feeds a subset of the subject's, same arrays).
3. Cross-checks on every feature's subject and control: the real ORT CPU EP, and
   ``onnx.reference.ReferenceEvaluator`` (through ``epaudit.reference.oracle``). Known disagreements are listed explicitly, each
   with the spec clause each side follows, so a new disagreement (or a fix) fails here.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import BY_ID as ALL_FEATURES
from epaudit.catalog.attention import FEATURES
from epaudit.catalog.models import round_to_bfloat16
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, PROBE_NODE_NAME, Probe
from epaudit.matrix.load import default_text, tomllib
from epaudit.reference.attention import attention_reference
from epaudit.reference.oracle import KNOWN, Verdict, check_case

ort.set_default_logger_severity(3)  # the bfloat16 refusal would log an error line


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def bhsd(rows) -> np.ndarray:
    """A (1, 1, S, D) tensor from a list of rows."""
    a = np.asarray(rows, dtype=np.float64)
    return a.reshape(1, 1, *a.shape)


# V with one-hot rows: Y = the attention probabilities themselves.
V2 = bhsd([[1.0, 0.0], [0.0, 1.0]])


# ----------------------------------------------------------------------------- hand cases


def test_explicit_scale_softmax_and_weighted_sum():
    # scale=1: scores = Q.K^T = [2, 0]; softmax = [sigmoid(2), sigmoid(-2)]; V one-hot.
    out = attention_reference(bhsd([[1.0, 0.0]]), bhsd([[2.0, 0.0], [0.0, 0.0]]), V2, scale=1.0)
    np.testing.assert_allclose(out["Y"][0, 0, 0], [sigmoid(2), sigmoid(-2)], rtol=1e-14)
    assert out["Y"].dtype == np.float64


def test_default_scale_is_inverse_sqrt_head_size():
    # H=4: Q.K^T = 4, default scale 1/sqrt(4) = 1/2 -> scores [2, 0].
    q = bhsd([[1.0, 1.0, 1.0, 1.0]])
    k = bhsd([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    out = attention_reference(q, k, V2, want_qk=True)
    np.testing.assert_allclose(out["qk_matmul_output"][0, 0, 0], [2.0, 0.0], rtol=1e-14)
    np.testing.assert_allclose(out["Y"][0, 0, 0], [sigmoid(2), sigmoid(-2)], rtol=1e-14)


def test_bool_mask_true_attends_false_excludes():
    out = attention_reference(bhsd([[1.0, 0.0]]), bhsd([[2.0, 0.0], [0.0, 0.0]]), V2,
                              attn_mask=np.array([[False, True]]), scale=1.0)
    np.testing.assert_array_equal(out["Y"][0, 0, 0], [0.0, 1.0])


def test_float_mask_is_added_to_scores():
    # scores [2, 0] + mask [0, 2] = [2, 2]: uniform.
    out = attention_reference(bhsd([[1.0, 0.0]]), bhsd([[2.0, 0.0], [0.0, 0.0]]), V2,
                              attn_mask=np.array([[0.0, 2.0]]), scale=1.0)
    np.testing.assert_allclose(out["Y"][0, 0, 0], [0.5, 0.5], rtol=1e-14)


def test_short_mask_is_padded_with_minus_inf():
    # [DOC24 attn_mask]: a last dimension shorter than T is padded with -inf / False.
    v = bhsd([[1.0], [3.0], [100.0]])
    out = attention_reference(np.zeros((1, 1, 1, 2)), np.zeros((1, 1, 3, 2)), v,
                              attn_mask=np.array([[True, True]]))
    np.testing.assert_allclose(out["Y"][0, 0, 0], [2.0], rtol=1e-14)


def test_softcap_then_mask_and_every_qk_mode():
    # scores [2, 0]; softcap c=1 -> [tanh 2, 0]; float mask [0, -1] -> [tanh 2, -1].
    q, k = bhsd([[1.0, 0.0]]), bhsd([[2.0, 0.0], [0.0, 0.0]])
    mask = np.array([[0.0, -1.0]])
    t2 = math.tanh(2.0)
    p0 = sigmoid(t2 + 1.0)
    expected = {0: [2.0, 0.0], 1: [t2, 0.0], 2: [t2, -1.0], 3: [p0, 1.0 - p0]}
    for mode, row in expected.items():
        out = attention_reference(q, k, V2, attn_mask=mask, scale=1.0, softcap=1.0,
                                  qk_matmul_output_mode=mode, want_qk=True)
        np.testing.assert_allclose(out["qk_matmul_output"][0, 0, 0], row, rtol=1e-14, err_msg=f"mode {mode}")
        np.testing.assert_allclose(out["Y"][0, 0, 0], [p0, 1.0 - p0], rtol=1e-14)


def test_mode_1_without_softcap_equals_mode_0():
    q, k = bhsd([[1.0, 0.0]]), bhsd([[2.0, 0.0], [0.0, 0.0]])
    out = attention_reference(q, k, V2, attn_mask=np.array([[0.0, -1.0]]), scale=1.0,
                              qk_matmul_output_mode=1, want_qk=True)
    np.testing.assert_array_equal(out["qk_matmul_output"][0, 0, 0], [2.0, 0.0])


def test_softcap_keeps_masked_keys_at_zero_weight():
    # Mask before softcap would turn -inf into -c and leak weight to the masked key.
    out = attention_reference(bhsd([[1.0, 0.0]]), bhsd([[2.0, 0.0], [0.0, 0.0]]), V2,
                              attn_mask=np.array([[True, False]]), scale=1.0, softcap=1.0)
    np.testing.assert_array_equal(out["Y"][0, 0, 0], [1.0, 0.0])


@pytest.mark.parametrize("mask", [np.array([[False, False], [True, False]]),
                                  np.array([[-np.inf, -np.inf], [0.0, -np.inf]])],
                         ids=["bool", "float_neg_inf"])
def test_fully_masked_row_is_zero_in_y_and_mode_3(mask):
    q, k = np.ones((1, 1, 2, 2)), bhsd([[2.0, 0.0], [0.0, 0.0]])
    with np.errstate(all="raise"):  # no NaN is ever formed, not even transiently
        y3 = attention_reference(q, k, V2, attn_mask=mask, qk_matmul_output_mode=3, want_qk=True)
        y2 = attention_reference(q, k, V2, attn_mask=mask, qk_matmul_output_mode=2, want_qk=True)
    np.testing.assert_array_equal(y3["Y"][0, 0], [[0.0, 0.0], [1.0, 0.0]])
    np.testing.assert_array_equal(y3["qk_matmul_output"][0, 0], [[0.0, 0.0], [1.0, 0.0]])
    # Mode 2 is before softmax: the masked row keeps its -inf.
    assert np.isneginf(y2["qk_matmul_output"][0, 0, 0]).all()


def test_is_causal_square_is_lower_triangular():
    v = bhsd([[1.0], [2.0], [6.0]])
    out = attention_reference(np.zeros((1, 1, 3, 2)), np.zeros((1, 1, 3, 2)), v, is_causal=1)
    np.testing.assert_allclose(out["Y"][0, 0, :, 0], [1.0, 1.5, 3.0], rtol=1e-14)


def test_is_causal_with_past_is_bottom_right_and_present_concatenates():
    # P=2 past + 2 new keys, S_q=2: offset 2, query i sees keys 0..i+2.
    past_v = bhsd([[1.0], [2.0]])
    v = bhsd([[3.0], [6.0]])
    past_k = bhsd([[0.5, 0.5], [0.25, 0.0]])
    k = bhsd([[1.0, 2.0], [3.0, 4.0]])
    out = attention_reference(np.zeros((1, 1, 2, 2)), k, v, past_key=past_k, past_value=past_v, is_causal=1)
    np.testing.assert_allclose(out["Y"][0, 0, :, 0], [2.0, 3.0], rtol=1e-14)
    np.testing.assert_array_equal(out["present_key"][0, 0], [[0.5, 0.5], [0.25, 0.0], [1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(out["present_value"][0, 0, :, 0], [1.0, 2.0, 3.0, 6.0])


def test_is_causal_without_cache_is_top_left_even_when_s_q_lt_s_kv():
    # [DOC24 is_causal]: "offset = 0 when neither is provided" (no past, no nonpad).
    v = bhsd([[1.0], [3.0], [8.0]])
    out = attention_reference(np.zeros((1, 1, 2, 2)), np.zeros((1, 1, 3, 2)), v, is_causal=1)
    np.testing.assert_allclose(out["Y"][0, 0, :, 0], [1.0, 2.0], rtol=1e-14)


def test_nonpad_kv_seqlen_masks_padding_and_shifts_causal():
    v = np.broadcast_to(np.array([1.0, 2.0, 3.0, 10.0]).reshape(1, 1, 4, 1), (2, 1, 4, 1))
    q, k = np.zeros((2, 1, 2, 2)), np.zeros((2, 1, 4, 2))
    plain = attention_reference(q, k, v, nonpad_kv_seqlen=np.array([1, 3]))
    np.testing.assert_allclose(plain["Y"][:, 0, :, 0], [[1.0, 1.0], [2.0, 2.0]], rtol=1e-14)
    # is_causal with nonpad: offset[b] = nonpad[b] - S_q = [1, 2].
    causal = attention_reference(q, k, v, nonpad_kv_seqlen=np.array([3, 4]), is_causal=1)
    np.testing.assert_allclose(causal["Y"][:, 0, :, 0], [[1.5, 2.0], [2.0, 4.0]], rtol=1e-14)
    # Negative offset (nonpad 1 < S_q 2): the leading row has no key and is zero.
    neg = attention_reference(q[:1], k[:1], v[:1], nonpad_kv_seqlen=np.array([1]), is_causal=1)
    np.testing.assert_array_equal(neg["Y"][0, 0, :, 0], [0.0, 1.0])


def test_gqa_query_head_h_reads_kv_head_h_div_group():
    v = np.stack([np.full((3, 2), 1.0), np.full((3, 2), 2.0)])[None]  # (1, 2, 3, 2)
    out = attention_reference(np.zeros((1, 4, 1, 2)), np.zeros((1, 2, 3, 2)), v)
    np.testing.assert_array_equal(out["Y"][0, :, 0, 0], [1.0, 1.0, 2.0, 2.0])


def test_3d_layout_equals_4d_transposed():
    rng = np.random.default_rng(7)
    q4, k4, v4 = (rng.standard_normal((2, 4, s, 8)) for s in (3, 5, 5))
    to3 = lambda a: a.transpose(0, 2, 1, 3).reshape(a.shape[0], a.shape[2], -1)  # noqa: E731
    ref4 = attention_reference(q4, k4[:, ::2], v4[:, ::2])
    ref3 = attention_reference(to3(q4), to3(k4[:, ::2]), to3(v4[:, ::2]), q_num_heads=4, kv_num_heads=2)
    np.testing.assert_allclose(ref3["Y"], to3(ref4["Y"]), rtol=1e-14)
    assert ref3["present_key"].shape == (2, 2, 5, 8)  # present is always BNSH


@pytest.mark.parametrize("kwargs, match", [
    (dict(Q=np.zeros((1, 4, 8)), K=np.zeros((1, 4, 8)), V=np.zeros((1, 4, 8))), "q_num_heads"),
    (dict(Q=np.zeros((1, 3, 2, 4)), K=np.zeros((1, 2, 2, 4)), V=np.zeros((1, 2, 2, 4))), "multiple"),
    (dict(past_key=np.zeros((1, 1, 1, 2))), "together"),
    (dict(past_key=np.zeros((1, 1, 1, 2)), past_value=np.zeros((1, 1, 1, 2)),
          nonpad_kv_seqlen=np.array([1])), "nonpad"),
    (dict(nonpad_kv_seqlen=np.array([3])), r"\[0, 2\]"),
    (dict(qk_matmul_output_mode=4), "qk_matmul_output_mode"),
    (dict(softcap=-1.0), "softcap"),
    (dict(scale=0.0), "scale"),
    (dict(attn_mask=np.array([[1, 0]])), "neither bool nor float"),
    (dict(attn_mask=np.array([[np.nan, 0.0]])), "NaN"),
    (dict(attn_mask=np.zeros((3, 2))), "broadcast"),
])
def test_invalid_inputs_raise(kwargs, match):
    args = dict(Q=np.zeros((1, 1, 1, 2)), K=np.zeros((1, 1, 2, 2)), V=np.zeros((1, 1, 2, 2)))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        attention_reference(args.pop("Q"), args.pop("K"), args.pop("V"), **args)


def test_round_to_bfloat16_is_nearest_even():
    one = np.float32(1.0)
    ulp = np.float32(2.0 ** -7)  # bfloat16 spacing at 1
    x = np.array([one + ulp / 2, one + 3 * ulp / 2, -(one + ulp / 2 + ulp / 256), 3.0e38], np.float32)
    np.testing.assert_array_equal(round_to_bfloat16(x)[:3], [one, one + 2 * ulp, -(one + ulp)])
    rng = np.random.default_rng(0)
    y = (rng.standard_normal(10_000) * 10.0 ** rng.integers(-30, 30, 10_000)).astype(np.float32)
    expect = y.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(round_to_bfloat16(y), expect)


# ----------------------------------------------------------------------------- the catalog

#: The ONNX Attention ids the shipped matrix declares, read as plain TOML (not through the
#: catalog): the catalog must hold exactly these, so a feature added without its
#: declaration, or renamed or dropped while the matrix still declares it, fails. Ids that
#: another catalog source owns are not this module's.
EXPECTED_IDS = tuple(fid for fid in tomllib.loads(default_text())["features"]
                     if fid.startswith("attention.") and (fid in {f.id for f in FEATURES} or fid not in ALL_FEATURES))
IDS = tuple(f.id for f in FEATURES)
BY_ID = {f.id: f for f in FEATURES}
_BUILT: dict[str, Probe] = {}


def probe(fid: str) -> Probe:
    """Each probe is built once per test session (builds are deterministic)."""
    if fid not in _BUILT:
        _BUILT[fid] = BY_ID[fid].build()
    return _BUILT[fid]


def test_catalog_ids_and_metadata():
    assert sorted(IDS) == sorted(EXPECTED_IDS) and len(IDS) == len(set(IDS))
    for f in FEATURES:
        assert (f.op_type, f.domain) == ("Attention", "")
        # opset 24 for what it added (nonpad_kv_seqlen) and for the features restated there.
        opset24 = ("attention.nonpad_kv_seqlen", "attention.opset24.mask_shorter")
        assert f.opset == (24 if f.id in opset24 or "nonpad" in f.id or f.id.endswith(".opset24") else 23), f.id
        float16 = f.id in ("attention.dtype.float16", "attention.softmax_precision") or ".head_size." in f.id
        assert f.dtype == {"attention.dtype.bfloat16": "bfloat16", "attention.dtype.float64": "float64"}.get(
            f.id, "float16" if float16 else "float32"), f.id
        assert f.changes and "\n" not in f.changes and "ONNX Attention" in f.source


def _graph_inputs(case) -> dict[str, onnx.ValueInfoProto]:
    return {i.name: i for i in onnx.load_from_string(case.model).graph.input}


@pytest.mark.parametrize("fid", IDS)
def test_probe_contract(fid):
    p = probe(fid)
    again = BY_ID[fid].build()
    assert p.feature_id == fid and p.dtype == BY_ID[fid].dtype
    for role in ("subject", "control"):
        case, other = getattr(p, role), getattr(again, role)
        assert case.model == other.model, "build() is deterministic"
        # Strict ONNX shape inference validates the node (types, attributes) and, where
        # it infers an output shape, that shape must be the reference's.
        model = onnx.shape_inference.infer_shapes(onnx.load_from_string(case.model), check_type=True,
                                                  strict_mode=True)
        for out in model.graph.output:
            dims = tuple(d.dim_value for d in out.type.tensor_type.shape.dim)
            if out.name == "qk_matmul_output" and "past_key" in case.feeds:
                # onnx 1.23.2's inference gives qk_matmul_output the new keys' length, not
                # past + new (seen on attention.outputs.qk_matmul_output.with_past); the
                # reference follows the spec's total length, as ORT CPU does.
                continue
            assert not dims or dims == case.reference[out.name].shape, (role, out.name)
        probed = [n for n in model.graph.node if n.name == PROBE_NODE_NAME]
        assert len(probed) == 1 and probed[0].op_type == "Attention"
        assert model.opset_import[0].version == BY_ID[fid].opset
        assert set(_graph_inputs(case)) == set(case.feeds)
        assert tuple(case.reference) == case.outputs == tuple(o.name for o in model.graph.output)
        for name, ref in case.reference.items():
            assert ref.dtype == np.float64 and not np.isnan(ref).any(), (role, name)
        for name, arr in case.feeds.items():
            elem = _graph_inputs(case)[name].type.tensor_type.elem_type
            assert arr.dtype == onnx.helper.tensor_dtype_to_np_dtype(elem), (role, name)
    # The control's feeds are a subset of the subject's, with the same arrays.
    assert_control_runs_on_subject_arrays(p)
    assert set(p.control.outputs) == set(p.subject.outputs)


@pytest.mark.parametrize("fid", IDS)
def test_subject_and_control_are_decisively_apart(fid):
    assert separation(probe(fid)) >= MIN_SEPARATION


def _ratio(subject: np.ndarray, wrong: np.ndarray, p: Probe) -> float:
    """Worst |subject - wrong| / bound(wrong): what an EP computing ``wrong`` would score."""
    with np.errstate(invalid="ignore"):
        r = np.abs(subject - wrong) / p.tolerance.bound(wrong)
    return float(np.nanmax(np.where(np.isfinite(r), r, 0.0)))


def _scores(feeds, scale: float | None = None) -> np.ndarray:
    q, k = (np.asarray(feeds[n], np.float64) for n in ("Q", "K"))
    k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    return (q @ np.swapaxes(k, -1, -2)) * (scale or 1.0 / math.sqrt(q.shape[-1]))


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_softcap_with_mask_order_is_decisive():
    # The pre-onnx#7867 order, mask then softcap: masked keys get logit -c, not -inf.
    p = probe("attention.softcap_with_mask")
    feeds = p.subject.feeds
    bias = np.where(feeds["attn_mask"], 0.0, -np.inf)
    wrong_logits = 1.0 * np.tanh((_scores(feeds) + bias) / 1.0)
    wrong_y = _softmax(wrong_logits) @ feeds["V"].astype(np.float64)
    assert _ratio(p.subject.reference["Y"], wrong_y, p) >= MIN_SEPARATION


@pytest.mark.parametrize("mode", [1, 2])
def test_qk_modes_differ_from_the_pre_7913_numbering(mode):
    # Before onnx#7913 (and #7867): mode 1 was scores + mask, mode 2 softcap(scores + mask).
    p = probe(f"attention.qk_matmul_output_mode.{mode}")
    feeds = p.subject.feeds
    x, m = _scores(feeds), feeds["attn_mask"].astype(np.float64)
    old = x + m if mode == 1 else 2.0 * np.tanh((x + m) / 2.0)
    assert _ratio(p.subject.reference["qk_matmul_output"], old, p) >= MIN_SEPARATION


def test_is_causal_offset_differs_from_top_left():
    p = probe("attention.is_causal.offset")
    f = p.subject.feeds
    s_q, total = f["Q"].shape[2], f["past_key"].shape[2] + f["K"].shape[2]
    top_left = np.arange(total)[None, :] <= np.arange(s_q)[:, None]
    wrong = attention_reference(f["Q"], f["K"], f["V"], top_left, f["past_key"], f["past_value"])
    assert _ratio(p.subject.reference["Y"], wrong["Y"], p) >= MIN_SEPARATION


def test_gqa_heads_differ_from_modulo_head_mapping():
    # A kernel pairing query head h with K/V head h % Nkv instead of h // (Nq/Nkv).
    p = probe("attention.gqa_heads")
    f = p.subject.feeds
    n_q, n_kv = f["Q"].shape[1], f["K"].shape[1]
    tiled = [np.tile(f[n], (1, n_q // n_kv, 1, 1)) for n in ("K", "V")]
    wrong = attention_reference(f["Q"], *tiled)
    assert _ratio(p.subject.reference["Y"], wrong["Y"], p) >= MIN_SEPARATION


@pytest.mark.parametrize("fid", ["attention.fully_masked_row", "attention.fully_masked_row.neg_inf"])
def test_fully_masked_row_subject_is_zero_and_not_mean_of_v(fid):
    p = probe(fid)
    y = p.subject.reference["Y"]
    np.testing.assert_array_equal(y[0, :, 1, :], 0.0)  # batch 0, query row 1, every head
    assert np.abs(p.control.reference["Y"][0, :, 1, :]).max() > 0.5
    mean_v = p.subject.feeds["V"][0].astype(np.float64).mean(axis=1)  # (heads, Hv)
    assert _ratio(y[0, :, 1, :], mean_v, p) >= MIN_SEPARATION


# ----------------------------------------------------------------------------- ORT CPU EP

#: Features ORT CPU does not run, with the error it must give (onnxruntime-gpu 1.31.1):
#: no bfloat16 Attention kernel on CPU, so ORT inlines the function body and fails on a
#: primitive of it.
ORT_CPU_REFUSES = {
    "attention.dtype.bfloat16": (ort.capi.onnxruntime_pybind11_state.NotImplemented,
                                 r"Could not find an implementation for Expand\(13\)"),
}


#: Features whose subject ORT CPU refuses when the session runs (1.31.1): attention_helper.h requires the
#: mask's last dimension to equal the total length (onnxruntime PR #27542 left a TODO: the
#: spec pads a shorter opset-24 mask with -inf).
ORT_CPU_REFUSES_AT_RUN = {
    "attention.opset24.mask_shorter": (ort.capi.onnxruntime_pybind11_state.Fail,
                                       "inconsistent total_sequence_length"),
}
#: Features ORT CPU refuses at run time in both roles (both feed a past): a past_key or
#: past_value without its present output (attention.cc; microsoft/onnxruntime#26262).
ORT_CPU_NEEDS_PRESENTS = {
    "attention.outputs.qk_matmul_output.with_past": "past_key provided and present_key being null",
    "attention.outputs.present_key.with_past": "past_value provided and present_value being null",
}
#: Features ORT CPU runs by inlining the function body (no float64 Attention kernel): the
#: primitives are right, but no Attention kernel ran (DECOMPOSED in the audit).
ORT_CPU_DECOMPOSES = {"attention.dtype.float64"}
#: (feature, role) where ORT CPU deviates from the spec, with the row it writes instead:
#: a float-mask row at the lowest float32 is not masked by the spec (only -inf is), so
#: its softmax is uniform and Y is the mean of V; ORT CPU writes zeros there.
ORT_CPU_DEVIATES = {("attention.fully_masked_row.lowest", "subject"): (0, 1),
                    ("attention.fully_masked_row.lowest.opset24", "subject"): (0, 1)}


def _ort_session(model: bytes) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def _assert_matches(outputs, case, tol, who):
    for name, got in zip(case.outputs, outputs):
        ref = case.reference[name]
        assert got.shape == ref.shape, (who, name)
        close = tol.close(got, ref)
        assert close.all(), f"{who} {name}: {int((~close).sum())} of {close.size} out of tolerance, " \
                            f"max abs err {np.nanmax(np.abs(got.astype(np.float64) - ref)):.3g}"


@pytest.mark.parametrize("fid", IDS)
@pytest.mark.parametrize("role", ["subject", "control"])
def test_ort_cpu(fid, role):
    p = probe(fid)
    case = getattr(p, role)
    if fid in ORT_CPU_REFUSES:
        exc, message = ORT_CPU_REFUSES[fid]
        with pytest.raises(exc, match=message):
            _ort_session(case.model)
        return
    sess = _ort_session(case.model)
    placed = [(sg.ep_name, n.op_type, n.name) for sg in sess.get_provider_graph_assignment_info()
              for n in sg.get_nodes()]
    if fid in ORT_CPU_DECOMPOSES:
        assert PROBE_NODE_NAME not in {name for _, _, name in placed}
        assert {op for _, op, _ in placed} >= {"MatMul", "Softmax"}
    else:
        # The node stays one Attention kernel on CPU (not an inlined function body).
        assert placed == [("CPUExecutionProvider", "Attention", PROBE_NODE_NAME)]
    if fid in ORT_CPU_NEEDS_PRESENTS:
        with pytest.raises(ort.capi.onnxruntime_pybind11_state.Fail, match=ORT_CPU_NEEDS_PRESENTS[fid]):
            sess.run(list(case.outputs), dict(case.feeds))
        return
    if fid in ORT_CPU_REFUSES_AT_RUN and role == "subject":  # the control has no mask
        exc, message = ORT_CPU_REFUSES_AT_RUN[fid]
        with pytest.raises(exc, match=message):
            sess.run(list(case.outputs), dict(case.feeds))
        return
    got = sess.run(list(case.outputs), dict(case.feeds))
    if (fid, role) in ORT_CPU_DEVIATES:
        b, row = ORT_CPU_DEVIATES[(fid, role)]
        y, ref = got[0].astype(np.float64), case.reference["Y"]
        np.testing.assert_array_equal(y[b, :, row], 0.0)  # ORT: zeros
        mean_v = case.feeds["V"][b].astype(np.float64).mean(axis=1)
        np.testing.assert_allclose(ref[b, :, row], mean_v, rtol=1e-6)  # spec: mean of V
        rest = np.ones(y.shape, bool)
        rest[b, :, row] = False
        assert p.tolerance.close(y[rest], ref[rest]).all()  # every other row agrees
        return
    _assert_matches(got, case, p.tolerance, "ORT CPU")


# ----------------------------------------------------------------------------- ReferenceEvaluator

@pytest.mark.parametrize("fid", IDS)
@pytest.mark.parametrize("role", ["subject", "control"])
def test_reference_evaluator(fid, role):
    """Our reference and onnx's agree, or disagree exactly as listed in epaudit/reference/oracle.py
    (with the clause each side follows); a new disagreement, or a fix, fails here."""
    row = check_case(fid, role, probe(fid))
    want = Verdict.KNOWN if (fid, role) in KNOWN else Verdict.AGREE
    assert row.verdict is want, row.detail


def test_oracle_reports_a_wrong_reference_as_new():
    """The oracle can fail: a reference off by 10 tolerance bounds on one element."""
    p = probe("attention.basic")
    y = p.subject.reference["Y"].copy()
    y[0, 0, 0, 0] += 10 * float(p.tolerance.bound(y[0, 0, 0, 0]))
    broken = dataclasses.replace(p, subject=dataclasses.replace(p.subject, reference={"Y": y}))
    row = check_case("attention.basic", "subject", broken)
    assert row.verdict is Verdict.NEW and row.detail.startswith("Y: worst")
    # On a listed case, a disagreement on another output as well is new, not the listed one.
    p0 = probe("attention.qk_matmul_output_mode.0")
    ref = dict(p0.subject.reference, Y=p0.subject.reference["Y"] + 1.0)
    odd = dataclasses.replace(p0, subject=dataclasses.replace(p0.subject, reference=ref))
    assert check_case("attention.qk_matmul_output_mode.0", "subject", odd).verdict is Verdict.NEW


def test_oracle_command_lists_the_disagreements_and_the_semantics():
    from click.testing import CliRunner

    from epaudit.cli import main

    r = CliRunner().invoke(main, ["oracle", "--feature", "attention.qk_matmul_output_mode.0"])
    assert r.exit_code == 0, r.output
    assert "known disagreement attention.qk_matmul_output_mode.0 (subject)" in " ".join(r.output.split())
    assert "The gate uses epaudit's reference: epaudit-attention-semantics/1" in " ".join(r.output.split())
    assert "oracle: PASS: 1 agree, 1 listed disagreement(s), 0 other (exit 0)" in r.output
