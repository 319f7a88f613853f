"""The LLM-serving probes (issue 27 part 1): their references checked by hand, against
independent encoders, against the CPU EP through decompositions it runs, and the measured
CPU facts pinned.

* minifloat codecs against ONNX's own float8/float4 encoding (``onnx.helper`` /
  ``onnx.numpy_helper``, and ``ml_dtypes`` where installed) and ORT's ``Cast``;
* the quantized cache rules, the windowed cache's ``L(T)`` by hand (the schema's examples);
* the CUDA fpA_intB prepack against an independent inverse written from the same steps;
* references the CPU EP cannot check directly (it refuses QK-norm and a float8 cache) checked
  through graphs it does run: SimplifiedLayerNormalization before GQA, DequantizeLinear /
  QuantizeLinear around a float GQA;
* the CPU EP ignoring ``weight_prepacked`` (declared ``skip`` on CPU), and ``epaudit surface``
  counting a feature's named data type.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from epaudit.catalog import BY_ID
from epaudit.catalog import gqa_graph as graph
from epaudit.catalog import gqa_llm
from epaudit.reference import kvcache, minifloat
from epaudit.reference.gqa import gqa_reference
from epaudit.reference.matmulnbits import _LDSM_PERMUTATION, prepack_fpa_intb


def _session(model) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


# --- minifloat -------------------------------------------------------------------------

@pytest.mark.parametrize("name", [n for n, f in minifloat.FORMATS.items() if f.bits == 8])
def test_float8_decode_matches_onnx(name):
    fmt = minifloat.FORMATS[name]
    t = helper.make_tensor("x", fmt.onnx_type, [256], np.arange(256, dtype=np.uint8).tobytes(), raw=True)
    ref = onnx.numpy_helper.to_array(t).astype(np.float64)
    mine = minifloat.decode(np.arange(256), name)
    np.testing.assert_array_equal(np.isnan(ref), np.isnan(mine))
    np.testing.assert_array_equal(ref[~np.isnan(ref)], mine[~np.isnan(mine)])


@pytest.mark.parametrize("name", [n for n, f in minifloat.FORMATS.items() if f.bits == 8])
def test_float8_encode_matches_ort_cast_saturating(name):
    """Our nearest-code rounding (ties to even, saturating) equals ORT's Cast to float8."""
    x = np.random.default_rng(1).standard_normal(2000) * 40.0
    x = np.concatenate([x, [0.0, 1e6, -1e6, 0.0625, -0.0625]]).astype(np.float32)
    fmt = minifloat.FORMATS[name]
    node = helper.make_node("Cast", ["x"], ["y"], to=fmt.onnx_type)
    node2 = helper.make_node("Cast", ["y"], ["z"], to=TensorProto.FLOAT)
    g = helper.make_graph([node, node2], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [x.size])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [x.size])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    got = _session(m).run(None, {"x": x})[0].astype(np.float64)
    mine = minifloat.decode(minifloat.encode(x.astype(np.float64), name), name)
    np.testing.assert_array_equal(got, mine)


def test_float4_values_and_packing():
    assert minifloat.decode(np.arange(8), "float4e2m1").tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert minifloat.decode([9, 15], "float4e2m1").tolist() == [-0.5, -6.0]
    raw = minifloat.pack_fp4([1, 2, 3])
    assert raw == bytes([0x21, 0x03])
    assert minifloat.unpack_fp4(raw, 3).tolist() == [1, 2, 3]
    ml = pytest.importorskip("ml_dtypes")
    if hasattr(ml, "float4_e2m1fn"):
        ref = np.arange(16, dtype=np.uint8).view(ml.float4_e2m1fn).astype(np.float64)
        np.testing.assert_array_equal(ref, minifloat.decode(np.arange(16), "float4e2m1"))


# --- the quantized and the windowed cache ---------------------------------------------

def test_int4_nibbles_carry_the_plus_8_offset_low_first():
    packed = kvcache.pack_int4(np.array([[-8, 7, 0, -1]]))
    assert packed.tolist() == [[0xF0, 0x78]]
    np.testing.assert_array_equal(kvcache.unpack_int4(packed), [[-8, 7, 0, -1]])


def test_quantize_rounds_clamps_and_returns_what_the_attention_reads():
    x = np.array([0.51, -3.0, 200.0, -200.0]).reshape(1, 1, 1, 4) / 64
    raw, vals = kvcache.quantize(x, np.array([1 / 64]), "PER_TENSOR", "int8")
    assert raw.reshape(-1).tolist() == [1, -3, 127, -128]
    np.testing.assert_allclose(vals.reshape(-1), np.array([1, -3, 127, -128]) / 64)
    with pytest.raises(ValueError, match="PER_CHANNEL scale"):
        kvcache.dequantize(np.zeros((1, 2, 3, 4), np.int8), np.ones(4), "PER_CHANNEL", "int8")


@pytest.mark.parametrize("total, capacity, window, rows", [
    (3, 4, 3, 3), (4, 4, 3, 4), (5, 4, 3, 3), (6, 4, 3, 4), (7, 4, 3, 3), (9, 5, 3, 3), (9, 4, 4, 4)])
def test_resident_rows_follow_the_schema_formula(total, capacity, window, rows):
    # G = C - W + 1; L(T) = T for T <= C, else T - G * ceil((T - C) / G); min(T, W) <= L <= min(T, C).
    assert kvcache.resident_rows(total, capacity, window) == rows
    assert min(total, window) <= rows <= min(total, capacity)


def test_windowed_cache_with_capacity_below_the_window_is_refused():
    with pytest.raises(ValueError, match="capacity"):
        kvcache.resident_rows(5, 2, 3)


# --- references the CPU EP refuses, checked through graphs it runs ----------------------

def test_qk_norm_reference_equals_simplified_layer_norm_before_gqa_on_cpu():
    """Qwen3's unfused form: SimplifiedLayerNormalization over the head dim of Q and K (the
    pattern the schema says the fusion folds into q_norm_weight / k_norm_weight), then a plain
    GQA on the CPU EP. Our reference of the fused node must give the same output."""
    p = BY_ID["gqa.qk_norm.with_rotary"].build()
    feeds = dict(p.subject.feeds)
    n, nkv, h = graph.N, graph.NKV, graph.H
    eps = 1e-6

    def norm(x, w, heads):
        b, s, _ = x.shape
        node = helper.make_node("SimplifiedLayerNormalization", ["x", "w"], ["y"], axis=-1, epsilon=eps)
        g = helper.make_graph([node], "n", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [b, s, heads, h]),
                                            helper.make_tensor_value_info("w", TensorProto.FLOAT16, [h])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        return _session(m).run(None, {"x": x.reshape(b, s, heads, h), "w": w})[0].reshape(b, s, heads * h)

    normed = dict(feeds, query=norm(feeds["query"], feeds["q_norm_weight"], n),
                  key=norm(feeds["key"], feeds["k_norm_weight"], nkv))
    del normed["q_norm_weight"], normed["k_norm_weight"]
    g = graph._Graph("float16", {"do_rotary": 1}, {k: v.astype(np.float64) if v.dtype == np.float16 else v
                                                   for k, v in normed.items()})
    plain = graph._case(g)
    got = _session(plain.model).run(["output"], plain.feeds)[0]
    assert p.tolerance.close(got, p.subject.reference["output"]).all()


def test_float8_cache_reference_equals_dequantize_then_float_gqa_on_cpu():
    """The float8e4m3fn cache the CPU EP refuses: DequantizeLinear of the past codes and a
    QuantizeLinear/DequantizeLinear round trip of the new K/V (ONNX's saturating float8
    rounding) around a float16 GQA that the CPU EP runs must equal our reference."""
    p = BY_ID["gqa.kv_cache.float8e4m3fn"].build()
    model = onnx.load_from_string(p.subject.model)
    inits = {t.name: t for t in model.graph.initializer}
    feeds = dict(p.subject.feeds)
    scale = float(feeds["k_scale"].reshape(-1)[0])
    assert scale == float(feeds["v_scale"].reshape(-1)[0])

    def dq(codes_tensor):
        codes = onnx.numpy_helper.to_array(codes_tensor)
        shape = list(codes.shape)
        node = helper.make_node("DequantizeLinear", ["c", "s"], ["y"])
        g = helper.make_graph([node], "d", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("c", TensorProto.FLOAT8E4M3FN, shape,
                                                              codes_tensor.raw_data, raw=True),
                                           helper.make_tensor("s", TensorProto.FLOAT, [], [scale])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        return _session(m).run(None, {})[0]

    def qdq(x):
        nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], saturate=1),
                 helper.make_node("DequantizeLinear", ["q", "s"], ["y"])]
        g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=[helper.make_tensor("s", TensorProto.FLOAT, [], [scale]),
                                           helper.make_tensor("z", TensorProto.FLOAT8E4M3FN, [], [0.0])])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        return _session(m).run(None, {"x": x.astype(np.float32)})[0]

    values = {"query": feeds["query"].astype(np.float64), "key": qdq(feeds["key"]).astype(np.float64),
              "value": qdq(feeds["value"]).astype(np.float64),
              "past_key": dq(inits["past_key"]).astype(np.float64), "past_value": dq(inits["past_value"]).astype(np.float64),
              "seqlens_k": feeds["seqlens_k"], "total_sequence_length": feeds["total_sequence_length"]}
    # presents requested: the 1.31.1 CPU EP computes garbage without them (gqa.outputs.output_only.with_past)
    plain = graph._case(graph._Graph("float16", {}, values))
    got = _session(plain.model).run(["output"], plain.feeds)[0]
    assert p.tolerance.close(got, p.subject.reference["output"]).all()


def test_quantized_probes_keep_new_rows_away_from_rounding_ties():
    for seed, cache, mode in ((2110, "int8", "PER_TENSOR"), (2111, "int8", "PER_CHANNEL"),
                              (2112, "uint8", "PER_TENSOR"), (2113, "uint8", "PER_CHANNEL")):
        g = gqa_llm._quant_graph(seed, cache, mode)
        k = g.feeds["key"].reshape(graph.B, 1, graph.NKV, graph.H).transpose(0, 2, 1, 3)
        s = np.broadcast_to(np.asarray(g.feeds["k_scale"]).reshape(-1) if g.feeds["k_scale"].size == 1
                            else g.feeds["k_scale"], k.shape)
        frac = np.abs(k / s - np.rint(k / s))
        assert frac.max() < 0.45 and frac.min() > 0.05


def test_sliding_window_reference_by_hand():
    """C = 4, W = 3, one row decoding to T = 6: the past holds positions 2, 3, 4 (rows 0-2,
    row 3 unspecified); the query at position 5 sees positions 3, 4, 5; the present holds
    positions 2..5 in rows 0..3."""
    h = 8
    pos_k = np.arange(6, dtype=np.float64)[:, None] * np.ones(h)  # key of position p is p
    past = np.zeros((1, 1, 4, h))
    past[0, 0, :3] = pos_k[2:5]
    past[0, 0, 3] = 99.0  # unspecified: never read
    q = np.zeros((1, 1, h))  # uniform attention over the window
    ref = gqa_reference(q, pos_k[5:6].reshape(1, 1, h), pos_k[5:6].reshape(1, 1, h), num_heads=1, kv_num_heads=1,
                        past_key=past, past_value=past, seqlens_k=np.array([5]), total_sequence_length=6,
                        local_window_size=3, sliding_window_cache=1)
    np.testing.assert_allclose(ref["output"].reshape(-1), np.full(h, 4.0))  # mean of 3, 4, 5
    np.testing.assert_array_equal(ref["present_key"][0, 0, :, 0], [2, 3, 4, 5])


# --- MatMulNBits weight_prepacked ----------------------------------------------------

def _unprepack_sm80(prepacked: np.ndarray, n: int, k: int) -> np.ndarray:
    """An independent inverse of the SM80 prepack, step by step backwards."""
    b = prepacked.reshape(-1)
    nib = np.stack([b & 0xF, b >> 4], axis=-1).reshape(-1, 8).astype(np.int64)  # words of 8 nibbles
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    words = np.empty_like(nib)
    words[:, order] = nib  # undo the register interleave
    words -= 8
    vec_rows = k // 8
    col_major = np.empty_like(words)
    for col in range(n):
        for r in range(vec_rows):
            col_major[col * vec_rows + r] = words[(col // 4) * vec_rows * 4 + 4 * (r // 8 * 8) + 8 * (col % 4) + r % 8]
    t = col_major.reshape(n, k).T  # (K, N) rows permuted
    inv = np.argsort(np.array(_LDSM_PERMUTATION))
    t = t.reshape(k // 32, 32, n)[:, inv, :].reshape(k, n)
    return t.T + 8  # (N, K) codes


def test_sm80_prepack_round_trips_and_moves_every_group():
    codes = np.random.default_rng(3).integers(0, 16, size=(64, 128))
    packed = prepack_fpa_intb(codes, 80)
    assert packed.shape == (64, 4, 16) and packed.dtype == np.uint8
    np.testing.assert_array_equal(_unprepack_sm80(packed, 64, 128), codes)
    standard = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)
    assert (packed.reshape(64, -1) != standard).mean() > 0.8  # not the standard layout
    assert not np.array_equal(prepack_fpa_intb(codes, 90), packed)  # SM90 skips the column interleave


def test_cpu_reads_a_prepacked_weight_as_the_standard_layout():
    """Measured on onnxruntime-gpu 1.31.1: the CPU EP never reads weight_prepacked, so a B in
    the CUDA SM80/SM90 layout gives exactly the weight_prepacked=0 output (declared skip on
    CPU; not found upstream)."""
    for fid in ("matmulnbits.weight_prepacked.1", "matmulnbits.weight_prepacked.2"):
        p = BY_ID[fid].build()
        got = _session(p.subject.model).run(["Y"], p.subject.feeds)[0]
        ctrl = _session(p.control.model).run(["Y"], p.control.feeds)[0]
        np.testing.assert_array_equal(got, ctrl)
        assert not p.tolerance.close(got, p.subject.reference["Y"]).all()


# --- surface ----------------------------------------------------------------------------

def test_surface_counts_a_features_named_data_type():
    from epaudit.catalog import FEATURES
    from epaudit.matrix.model import Provider
    from epaudit.surface.coverage import coverage
    from epaudit.surface.kernels import fetch_all

    reg = fetch_all([Provider("CPU", "CPUExecutionProvider")], None)["CPU"]
    if reg.status != "kernels":
        pytest.skip(f"no CPU registry: {reg.reason}")
    gbq = [f for f in FEATURES if f.op_type == "GatherBlockQuantized"]
    row = next(r for r in coverage(reg, gbq)["by_operator"] if r["operator"] == "com.microsoft.GatherBlockQuantized")
    assert row["uncovered"] == []
    plain = [f for f in gbq if "data_type" not in f.uses.facts]
    row = next(r for r in coverage(reg, plain)["by_operator"] if r["operator"] == "com.microsoft.GatherBlockQuantized")
    assert "1:type:tensor(float8e4m3fn)" in row["uncovered"]


def test_cpu_gqa_decode_without_presents_is_wrong():
    """Measured on onnxruntime-gpu 1.31.1: GQA with past_key/past_value and the optional
    presents not requested returns values no attention can produce (far outside the range of
    V: a softmax-weighted mean of V rows of magnitude < 5). Declared skip on CPU; not found
    upstream (the presents became optional in PR #28242)."""
    p = BY_ID["gqa.outputs.output_only.with_past"].build()
    got = _session(p.subject.model).run(["output"], p.subject.feeds)[0].astype(np.float64)
    v = np.concatenate([p.subject.feeds["past_value"].reshape(-1), p.subject.feeds["value"].reshape(-1)])
    assert not (np.isfinite(got).all() and np.abs(got).max() <= np.abs(v).max())
    # The same decode with the presents requested is right.
    from dataclasses import replace
    g = gqa_llm._Graph("float16", {}, {k: (v.astype(np.float64) if v.dtype == np.float16 else v)
                                       for k, v in p.subject.feeds.items()})
    case = graph._case(replace(g, presents=True))
    ok = _session(case.model).run(["output"], case.feeds)[0]
    assert p.tolerance.close(ok, p.subject.reference["output"]).all()
