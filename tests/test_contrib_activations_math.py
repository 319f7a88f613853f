"""The activation, fused, math and miscellaneous contrib references, checked by hand, against
a second formulation, and every probe of their catalog against ORT's CPU EP.

``onnx.reference`` has no evaluator for ``com.microsoft`` operators, but it has one for the
ONNX operators several of them extend (Conv, ConvTranspose, Gemm, MatMul, MaxPool, Pad,
GatherND, Trilu, Range, Unique, GridSample): those references are compared with the ONNX
evaluator on inputs outside the catalog. The rest are checked on cases worked out by hand,
on published test vectors (MurmurHash3_x86_32) and on properties the schemas promise
(chunked NGramHashMapping / CausalConvWithState equal one full call; VarlenNGramHashMapping
equals NGramHashMapping per request).
"""

from __future__ import annotations

import math

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import activations_math
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, PROBE_NODE_NAME, Case
from epaudit.reference import activations as act
from epaudit.reference import fused, llm_blocks, sampling, tensor_math, tokens

FEATURES = activations_math.FEATURES
BY_ID = {f.id: f for f in FEATURES}
#: Features the CPU EP of onnxruntime-gpu 1.31.1 refuses loudly (declared unsupported on CPU).
CPU_REFUSES = {"fusedgemm.no_activation", "convtransposewithdynamicpads.no_pads", "cdist.metric.cityblock",
               "causalconvwithstate.state_window"}
RNG = np.random.default_rng(20261201)


def _schemas():
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema
    return {s.name: s for s in get_all_operator_schema() if s.domain == "com.microsoft"}


_SCHEMAS = _schemas()


def _onnx_ref(op: str, inputs: dict, attrs: dict | None = None, opset: int = 21, n_out: int = 1):
    """``op``'s outputs under onnx.reference for float inputs (float32) and int64 inputs."""
    vis = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape))
           for k, v in inputs.items()]
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, list(inputs), outs, **(attrs or {}))
    graph = helper.make_graph([node], "g", vis, [helper.make_value_info(o, onnx.TypeProto()) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model).run(None, inputs)


# --------------------------------------------------------------------------- activations
def test_gelu_family_by_hand():
    assert act.gelu(np.array([0.0]))[0] == 0.0
    np.testing.assert_allclose(act.gelu(np.array([1.0, -1.0])), [0.8413447460685429, -0.15865525393145707],
                               rtol=1e-15)
    np.testing.assert_allclose(act.bias_gelu(np.array([[0.5, -2.0]]), np.array([0.5, 1.0])),
                               act.gelu(np.array([[1.0, -1.0]])), rtol=0)
    # tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) at x = 1
    want = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert abs(act.fast_gelu(np.array([1.0]))[0] - want) < 1e-15 and abs(want - 0.8411919906082768) < 1e-15
    np.testing.assert_allclose(act.fast_gelu(np.array([[0.25]]), np.array([0.75])), act.fast_gelu(np.array([[1.0]])))
    np.testing.assert_allclose(act.quick_gelu(np.array([2.0])), [2.0 / (1 + math.exp(-3.404))], rtol=1e-15)
    np.testing.assert_allclose(act.quick_gelu(np.array([2.0]), 0.5), [2.0 / (1 + math.exp(-1.0))], rtol=1e-15)
    with pytest.raises(ValueError, match="1-D"):
        act.bias_gelu(np.zeros((2, 3)), np.zeros(2))


def test_scaled_silu_scale_overrides_alpha_and_gated_add():
    x = np.array([-1.0, 0.5, 3.0])
    z = 2.5 * x
    np.testing.assert_allclose(act.scaled_silu(x, alpha=2.5), z / (1 + np.exp(-z)), rtol=1e-15)
    np.testing.assert_array_equal(act.scaled_silu(x, np.array(0.5), alpha=2.5), act.scaled_silu(x, alpha=0.5))
    with pytest.raises(ValueError, match="scalar"):
        act.scaled_silu(x, np.array([0.5]))
    out = act.gated_add(np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[10.0, 20.0], [30.0, 40.0]]),
                        np.array([[0.5], [-1.0]]))
    np.testing.assert_array_equal(out, [[6.0, 12.0], [-27.0, -36.0]])
    with pytest.raises(ValueError, match="gate"):
        act.gated_add(np.zeros((2, 2)), np.zeros((2, 2)), np.zeros((2, 2)))


def test_fused_activations_by_hand():
    v = np.array([-2.0, -0.5, 0.0, 1.0, 3.0])
    np.testing.assert_array_equal(act.activate(v, "LeakyRelu", [0.1]), [-0.2, -0.05, 0.0, 1.0, 3.0])
    np.testing.assert_allclose(act.activate(v, "HardSigmoid", [0.3, 0.4]), [0.0, 0.25, 0.4, 0.7, 1.0])
    np.testing.assert_array_equal(act.activate(v, "Clip", [-0.5, 0.75]), [-0.5, -0.5, 0.0, 0.75, 0.75])
    np.testing.assert_allclose(act.activate(v, "Selu", named={"alpha": 1.5, "gamma": 1.2})[0],
                               1.2 * 1.5 * (math.exp(-2) - 1))
    np.testing.assert_array_equal(act.activate(v, "LeakyRelu", named={"alpha": 1.0}), v)  # FusedGemm's identity
    np.testing.assert_array_equal(act.activate(v, None), v)
    with pytest.raises(ValueError, match="activation_params"):
        act.activate(v, "Clip", [1.0])


# --------------------------------------------------------------------------- fused
@pytest.mark.parametrize("attrs", [{}, {"pads": [1, 2, 0, 1]}, {"strides": [2, 1], "dilations": [1, 2]},
                                   {"group": 2}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
                                   {"auto_pad": "SAME_LOWER", "strides": [2, 2]}])
def test_conv_matches_onnx_reference(attrs):
    x = RNG.standard_normal((2, 4, 7, 6))
    w = RNG.standard_normal((6, 4 // attrs.get("group", 1), 3, 3))
    b = RNG.standard_normal(6)
    (want,) = _onnx_ref("Conv", {"X": x, "W": w, "B": b}, attrs)
    np.testing.assert_allclose(fused.conv(x, w, b, **attrs), want, rtol=1e-12, atol=1e-12)


def test_fused_conv_adds_z_before_the_activation():
    x, w = np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2))
    assert fused.conv(x, w)[0, 0, 0, 0] == 4.0
    y = fused.fused_conv(x, w, np.array([-1.0]), np.array([[[[-5.0]]]]), activation="Relu")
    assert y[0, 0, 0, 0] == 0.0  # relu(4 - 1 - 5); Z after the activation would give -5
    with pytest.raises(ValueError, match="Z shape"):
        fused.fused_conv(x, w, z=np.zeros((1, 1, 2, 2)))


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 2]}, {"strides": [2, 2], "output_padding": [1, 0]},
                                   {"dilations": [2, 1]}])
def test_conv_transpose_matches_onnx_reference(attrs):
    x = RNG.standard_normal((1, 4, 3, 4))
    w = RNG.standard_normal((4, 3, 3, 2))
    pads = [1, 0, 0, 1]
    (want,) = _onnx_ref("ConvTranspose", {"X": x, "W": w}, {**attrs, "pads": pads})
    np.testing.assert_allclose(fused.conv_transpose(x, w, pads=pads, **attrs), want, rtol=1e-12, atol=1e-12)


def test_conv_transpose_groups_are_independent_transposed_convs():
    # onnx.reference's ConvTranspose fails on group > 1: the groups by hand instead.
    x, w = RNG.standard_normal((1, 4, 3, 3)), RNG.standard_normal((4, 2, 2, 2))
    got = fused.conv_transpose(x, w, group=2, strides=[2, 1])
    halves = [fused.conv_transpose(x[:, 2 * g:2 * g + 2], w[2 * g:2 * g + 2], strides=[2, 1]) for g in range(2)]
    np.testing.assert_allclose(got, np.concatenate(halves, axis=1), rtol=1e-12)


@pytest.mark.parametrize("attrs", [{"transA": 1, "alpha": 0.5}, {"transB": 1, "beta": -2.0}])
def test_fused_gemm_matches_onnx_gemm_then_the_activation(attrs):
    a, b, c = RNG.standard_normal((5, 5)), RNG.standard_normal((5, 3)) if not attrs.get("transB") else \
        RNG.standard_normal((3, 5)), RNG.standard_normal(3)
    (want,) = _onnx_ref("Gemm", {"A": a, "B": b, "C": c}, attrs)
    np.testing.assert_allclose(fused.fused_gemm(a, b, c, **attrs, activation="Tanh"), np.tanh(want), rtol=1e-12)


def test_fused_matmul_trans_batch_by_hand():
    a = RNG.standard_normal((3, 2, 4))  # transBatchA: batch = axis 1 (2), rows = axis 0 (3)
    b = RNG.standard_normal((2, 4, 5))
    want = np.stack([a[:, i, :] @ b[i] for i in range(2)])
    np.testing.assert_allclose(fused.fused_matmul(a, b, transBatchA=1), want, rtol=1e-12)
    a3 = RNG.standard_normal((4, 2, 3))  # transBatchA with transA: K = axis 0, batch = axis 1, rows = axis 2
    np.testing.assert_allclose(fused.fused_matmul(a3, b, transA=1, transBatchA=1, alpha=2.0),
                               2 * np.stack([a3[:, i, :].T @ b[i] for i in range(2)]), rtol=1e-12)
    aa = RNG.standard_normal((2, 3, 4))
    bb = RNG.standard_normal((4, 2, 5))  # transBatchB: batch = axis 1 (2), rows = axis 0 (4)
    np.testing.assert_allclose(fused.fused_matmul(aa, bb, transBatchB=1),
                               np.stack([aa[i] @ bb[:, i, :] for i in range(2)]), rtol=1e-12)


@pytest.mark.parametrize("attrs", [{"kernel_shape": [2, 2]}, {"kernel_shape": [3, 3], "strides": [2, 2]},
                                   {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [2, 2], "dilations": [2, 2]},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
                                   {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"}])
def test_nhwc_max_pool_matches_onnx_max_pool(attrs):
    x = RNG.integers(0, 256, (1, 6, 7, 3)).astype(np.float32)
    (want,) = _onnx_ref("MaxPool", {"X": x.transpose(0, 3, 1, 2)}, attrs)
    np.testing.assert_array_equal(fused.nhwc_max_pool(x, **attrs), want.transpose(0, 2, 3, 1))


# --------------------------------------------------------------------------- tensor math
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_matches_onnx_reference(mode):
    x = RNG.standard_normal((3, 4))
    pads = np.array([1, 2, 2, 1])
    feeds = {"data": x, "pads": pads}
    if mode == "constant":
        feeds["value"] = np.array(2.5)
    (want,) = _onnx_ref("Pad", feeds, {"mode": mode})
    np.testing.assert_array_equal(tensor_math.pad(x, pads, feeds.get("value"), mode), want)


def test_negative_pads_crop():
    x = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(tensor_math.pad(x, np.array([-1, 1, 0, -2])),
                                  [[0, 4, 5], [0, 8, 9]])


def test_gather_nd_trilu_range_unique_match_onnx_reference():
    data = RNG.standard_normal((3, 4, 5))
    for idx in (np.array([[2, 1], [0, 3]]), np.array([[[2]], [[1]]]), np.array([[-1, -2], [-3, 0]])):
        (want,) = _onnx_ref("GatherND", {"data": data, "indices": idx})
        np.testing.assert_array_equal(tensor_math.gather_nd(data, idx), want)
    for upper, k in ((1, 1), (0, -1), (1, -2)):
        (want,) = _onnx_ref("Trilu", {"X": data, "k": np.array(k)}, {"upper": upper})
        np.testing.assert_array_equal(tensor_math.trilu(data, np.array(k), upper), want)
    for s, lim, d in ((1.5, 7.0, 0.75), (5.0, -3.0, -1.5), (3, 20, 4)):
        (want,) = _onnx_ref("Range", {"s": np.array(s), "l": np.array(lim), "d": np.array(d)})
        np.testing.assert_allclose(tensor_math.range_(s, lim, d), want)
    v = np.array([2.0, 1.0, 1.0, 3.0, 4.0, 3.0])
    y, _, inverse, counts = _onnx_ref("Unique", {"x": v}, {"sorted": 0}, n_out=4)
    got = tensor_math.unique(v)
    np.testing.assert_array_equal(got["y"], y)
    np.testing.assert_array_equal(got["idx"], inverse)
    np.testing.assert_array_equal(got["counts"], counts)
    np.testing.assert_array_equal(got["y"], [2, 1, 3, 4])  # the schema's example
    np.testing.assert_array_equal(got["idx"], [0, 1, 1, 2, 3, 2])


def test_expand_dims_inverse_cdist_unfold_by_hand():
    assert tensor_math.expand_dims(np.zeros((2, 3)), -1).shape == (2, 3, 1)
    assert tensor_math.expand_dims(np.zeros((2, 3)), 0).shape == (1, 2, 3)
    m = np.array([[2.0, 1.0], [1.0, 1.0]])
    np.testing.assert_allclose(tensor_math.inverse(m), [[1.0, -1.0], [-1.0, 2.0]])
    a, b = np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[3.0, 4.0]])
    np.testing.assert_array_equal(tensor_math.cdist(a, b), [[25.0], [13.0]])
    np.testing.assert_array_equal(tensor_math.cdist(a, b, "euclidean"), [[5.0], [math.sqrt(13)]])
    np.testing.assert_array_equal(tensor_math.cdist(a, b, "cityblock"), [[7.0], [5.0]])
    u = tensor_math.unfold_tensor(np.arange(10.0).reshape(2, 5), 3, 2, -1)
    np.testing.assert_array_equal(u, [[[0, 1, 2], [2, 3, 4]], [[5, 6, 7], [7, 8, 9]]])
    assert tensor_math.unfold_tensor(np.zeros((2, 6, 8)), 3, 1, 1).shape == (2, 4, 8, 3)
    with pytest.raises(ValueError):
        tensor_math.unfold_tensor(np.zeros((2, 2)), 3)


# --------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("mode,onnx_mode", [("bilinear", "linear"), ("nearest", "nearest"), ("bicubic", "cubic")])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_matches_onnx_grid_sample(mode, onnx_mode, padding, align):
    x = RNG.standard_normal((1, 2, 5, 6))
    # Bicubic samples outside the image differ by design: onnx.reference clamps/reflects the
    # coordinate first, ORT's kernel (and torch) only each tap; the catalog's
    # gridsample.align_corners.bicubic_border probes ORT's rule, on the CPU EP below.
    spread = 1.0 if mode == "bicubic" else 1.6
    grid = RNG.uniform(-spread, spread, (1, 4, 3, 2))
    (want,) = _onnx_ref("GridSample", {"X": x, "grid": grid},
                        {"mode": onnx_mode, "padding_mode": padding, "align_corners": align}, opset=20)
    # onnx.reference denormalizes the grid in float32 (op_grid_sample.py): ~1e-7 apart.
    np.testing.assert_allclose(sampling.grid_sample(x, grid, mode, padding, align), want, rtol=1e-5, atol=1e-6)


def test_crop_and_resize_by_hand():
    x = np.arange(2 * 1 * 3 * 4, dtype=np.float64).reshape(2, 1, 3, 4)
    # The whole image at its own size is the image; a one-pixel crop is the box centre.
    whole = sampling.crop_and_resize(x, np.array([[0.0, 0.0, 1.0, 1.0]]), np.array([1]), np.array([3, 4]))
    np.testing.assert_array_equal(whole[0], x[1])
    centre = sampling.crop_and_resize(x, np.array([[0.0, 0.0, 1.0, 1.0]]), np.array([0]), np.array([1, 1]))
    assert centre[0, 0, 0, 0] == 0.5 * (x[0, 0, 1, 1] + x[0, 0, 1, 2])
    out = sampling.crop_and_resize(x, np.array([[-0.5, 0.0, 1.0, 1.0]]), np.array([0]), np.array([4, 2]),
                                   extrapolation_value=9.0)
    assert out[0, 0, 0, 0] == 9.0 and out[0, 0, -1, -1] == x[0, 0, 2, 3]


# --------------------------------------------------------------------------- tokens
@pytest.mark.parametrize("data,seed,want", [(b"", 0, 0), (b"", 1, 0x514E28B7), (b"", 0xFFFFFFFF, 0x81F16F39),
                                            (b"\0\0\0\0", 0, 0x2362F9DE), (b"aaaa", 0x9747B28C, 0x5A97808A),
                                            (b"abc", 0, 0xB3DD93FA), (b"Hello, world!", 0x9747B28C, 0x24884CBA)])
def test_murmurhash3_published_vectors(data, seed, want):
    assert tokens.murmurhash3_x86_32(data, seed) == want


def test_murmurhash3_of_tensors_is_per_element_little_endian():
    keys = np.array([0, 1, -1], dtype=np.int32)
    got = tokens.murmurhash3(keys, seed=7)
    assert got[1] == tokens.murmurhash3_x86_32((1).to_bytes(4, "little"), 7)
    signed = tokens.murmurhash3(keys, seed=7, positive=0)
    assert all(s == (u - 2 ** 32 if u >= 2 ** 31 else u) for s, u in zip(signed, got))
    assert tokens.murmurhash3(np.array([5], np.int64))[0] == tokens.murmurhash3_x86_32((5).to_bytes(8, "little"))


def test_ngram_repeat_block_and_bifurcation_by_hand():
    out = tokens.ngram_repeat_block(np.array([[1, 2, 3, 1, 2]]), np.zeros((1, 5)), 3)
    np.testing.assert_array_equal(out, [[0, 0, 0, -np.inf, 0]])  # "1 2" was followed by 3
    assert not np.isinf(tokens.ngram_repeat_block(np.array([[1, 2]]), np.zeros((1, 3)), 4)).any()
    src = [5, 3, 8, 1, 9, 3, 8, 2, 7, 4]
    r = tokens.bifurcation_detector(np.array(src), np.array([11, 1, 9]), np.array(0))
    assert r["tokens"].tolist() == [11, 1, 9] and int(r["suffix_match_idx"]) == 5
    # 3 8 occurs twice: ambiguous at n = 2, so the result is -1 unless a longer unique match exists
    r = tokens.bifurcation_detector(np.array(src), np.array([1, 3, 8]), np.array(0), max_ngram_size=2)
    assert int(r["suffix_match_idx"]) == -1
    r = tokens.bifurcation_detector(np.array(src), np.array([0]), np.array(2), np.array([8, 1, 9, 6, 0, 0, 0, 0, 0]))
    assert r["tokens"].tolist() == [0, 8, 1, 9, 6]  # pred diverges from src[2:] at index 3
    with pytest.raises(ValueError, match="pred_tokens"):
        tokens.bifurcation_detector(np.array(src), np.array([0]), np.array(2), np.array([1, 2]))


def test_dynamic_time_warping_by_hand():
    cost = np.array([[0.0, 0.0, 9.0], [9.0, 9.0, 0.0]])  # (0,0) (0,1) (1,2) costs 0; via (1,1) 9
    np.testing.assert_array_equal(tokens.dynamic_time_warping(cost), [[0, 0, 1], [0, 1, 2]])
    np.testing.assert_array_equal(tokens.dynamic_time_warping(cost[None]), [[0, 0, 1], [0, 1, 2]])
    cost = np.array([[0.0, 9.0], [0.0, 9.0], [9.0, 0.0]])  # down, then diagonal
    np.testing.assert_array_equal(tokens.dynamic_time_warping(cost), [[0, 1, 2], [0, 0, 1]])


_NGH = {"max_ngram_size": 3, "n_head_per_ngram": 2, "pad_id": 7}
_MULT, _VOCAB = np.array([3, -5, 11]), np.array([13, 17, 19, 23])


def test_ngram_hash_mapping_by_hand():
    ids = np.array([[4, 6]])
    out = tokens.ngram_hash_mapping(ids, _MULT, _VOCAB, **_NGH)["hash_ids"][0]
    bigram = (6 * 3) ^ (4 * -5)              # position 1: (6, 4)
    trigram = bigram ^ (7 * 11)              # the pad before the sequence
    assert out[1].tolist() == [bigram % 13, bigram % 17, trigram % 19, trigram % 23]
    assert out[0, 0] == ((4 * 3) ^ (7 * -5)) % 13
    offs = tokens.ngram_hash_mapping(ids, _MULT, _VOCAB, head_offsets=np.array([0, 100, 200, 300]), **_NGH)
    assert (offs["hash_ids"][0, 1] - out[1]).tolist() == [0, 100, 200, 300]
    assert tokens.wrap(2 ** 63, 64) == -2 ** 63 and tokens.wrap(-1, 32) == -1


@pytest.mark.parametrize("extra", [{}, {"eos_token_id": np.array(3), "reset_on_eos": 1}])
def test_ngram_hash_mapping_chunks_equal_one_call(extra):
    # The schema: running over consecutive chunks, threading present_ids into past_ids,
    # gives the hashes of one call over the whole sequence, also with reset_on_eos.
    ids = np.array([[9, 3, 14, 3, 8, 21, 5], [4, 4, 3, 12, 6, 3, 2]])
    kw = dict(_NGH, reset_on_eos=extra.pop("reset_on_eos", 0))
    whole = tokens.ngram_hash_mapping(ids, _MULT, _VOCAB, **extra, **kw)["hash_ids"]
    first = tokens.ngram_hash_mapping(ids[:, :4], _MULT, _VOCAB, **extra, **kw)
    second = tokens.ngram_hash_mapping(ids[:, 4:], _MULT, _VOCAB, past_ids=first["present_ids"], **extra, **kw)
    np.testing.assert_array_equal(np.concatenate([first["hash_ids"], second["hash_ids"]], axis=1), whole)


def test_varlen_equals_ngram_hash_mapping_per_request():
    ids = np.array([9, 3, 14, 3, 8, 21, 5, 2])
    cu, segs = np.array([0, 3, 4, 8]), np.array([0, 0, 1, 2, 2, 2, 3, 3])
    past = np.array([[1, 2], [3, 4], [5, 6]])
    got = tokens.varlen_ngram_hash_mapping(ids, _MULT, _VOCAB, cu, past, segment_ids=segs, capture_count=[5, 1, 2],
                                           state_update_capacity=3, **_NGH)
    for b in range(3):
        one = tokens.ngram_hash_mapping(ids[None, cu[b]:cu[b + 1]], _MULT, _VOCAB, past[b:b + 1],
                                        segment_ids=segs[None, cu[b]:cu[b + 1]], **_NGH)
        np.testing.assert_array_equal(got["hash_ids"][cu[b]:cu[b + 1]], one["hash_ids"][0])
        np.testing.assert_array_equal(got["present_ids"][b], one["present_ids"][0])
    assert got["state_update"][0].tolist() == [[2, 9], [9, 3], [3, 14]]  # 3 of capture 5, clamped to 3 tokens
    assert got["state_update"][1].tolist() == [[4, 3], [7, 7], [7, 7]]   # one capture; unused slots pad_id
    assert got["present_segment_ids"][1].tolist() == [2, 2]              # no past segments: the first id


# --------------------------------------------------------------------------- LLM blocks
def test_engram_gate_by_hand():
    key = np.ones((1, 1, 2, 4))
    query = np.stack([np.ones(4), -np.ones(4)])[None, None]
    value = np.array([[[1.0, 2.0, 3.0, 4.0]]])
    r = llm_blocks.engram_gate(key, query, value, np.ones((2, 4)), np.ones((2, 4)), np.ones((2, 4)), epsilon=0.0)
    # dot = Σ 1·1 / sqrt(4) = 2 for branch 0 (-2 for branch 1): gate = sigmoid(±sqrt(2))
    gate = 1 / (1 + math.exp(-math.sqrt(2.0)))
    np.testing.assert_allclose(r["output"][0, 0, 0], gate * value[0, 0], rtol=1e-15)
    np.testing.assert_allclose(r["output"][0, 0, 1], (1 - gate) * value[0, 0], rtol=1e-15)
    normed = r["gated_value_normed"][0, 0, 0]
    np.testing.assert_allclose(normed, value[0, 0] / math.sqrt(7.5), rtol=1e-12)  # RMS of 1..4 is sqrt(7.5)
    zero = llm_blocks.engram_gate(key, np.zeros_like(query), value, np.ones((2, 4)), np.ones((2, 4)))
    np.testing.assert_allclose(zero["output"], 0.5 * np.broadcast_to(value[:, :, None], (1, 1, 2, 4)))


def test_causal_conv_matches_numpy_convolve_and_chunks():
    x = RNG.standard_normal((1, 2, 7))
    w = RNG.standard_normal((2, 1, 3))
    r = llm_blocks.causal_conv_with_state(x, w)
    for ch in range(2):
        full = np.correlate(np.concatenate([np.zeros(2), x[0, ch]]), w[ch, 0], mode="valid")
        np.testing.assert_allclose(r["output"][0, ch], full, rtol=1e-12)
    np.testing.assert_array_equal(r["present_state"], x[:, :, -2:])
    a = llm_blocks.causal_conv_with_state(x[:, :, :4], w, dilation=2)
    b = llm_blocks.causal_conv_with_state(x[:, :, 4:], w, past_state=a["present_state"], dilation=2)
    whole = llm_blocks.causal_conv_with_state(x, w, dilation=2)
    np.testing.assert_allclose(np.concatenate([a["output"], b["output"]], -1), whole["output"], rtol=1e-12)
    cl = llm_blocks.causal_conv_with_state(x.transpose(0, 2, 1), w, channels_last=1, activation="silu")
    silu = llm_blocks.causal_conv_with_state(x, w, activation="swish")
    np.testing.assert_allclose(cl["output"].transpose(0, 2, 1), silu["output"], rtol=1e-12)
    win = llm_blocks.causal_conv_with_state(x, w, state_window=3)["present_state"]
    np.testing.assert_array_equal(win[-1], r["present_state"])
    np.testing.assert_array_equal(win[0], x[:, :, 3:5])  # the state after position L - 3 = 4


def test_hyper_connection_and_rms_norms_by_hand():
    s = RNG.standard_normal((2, 3, 4, 5))
    pre = RNG.standard_normal((2, 3, 4))
    np.testing.assert_allclose(llm_blocks.hyper_connection_pre_mix(s, pre, reduction_scale=0.5),
                               0.5 * np.einsum("bsch,bsc->bsh", s, pre), rtol=1e-12)
    flat = llm_blocks.hyper_connection_pre_mix(s.reshape(2, 3, 20), pre, num_branches=4)
    np.testing.assert_allclose(flat, np.einsum("bsch,bsc->bsh", s, pre), rtol=1e-12)
    blk, post, mix = RNG.standard_normal((2, 3, 5)), RNG.standard_normal((2, 3, 4)), RNG.standard_normal((2, 3, 4, 4))
    want = np.einsum("bsck,bsch->bskh", mix, s) + post[..., None] * blk[:, :, None, :]
    np.testing.assert_allclose(llm_blocks.hyper_connection_post_mix(s, blk, post, mix), want, rtol=1e-12)
    np.testing.assert_allclose(llm_blocks.hyper_connection_post_mix(s, blk, np.zeros((2, 3, 4))), s)
    x = np.array([[3.0, 4.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(llm_blocks.branchwise_rms_norm(x.reshape(1, 8), num_branches=2, epsilon=0.0),
                               [[3 / math.sqrt(6.25), 4 / math.sqrt(6.25), 0, 0, 1, 1, 1, 1]])
    g = llm_blocks.gated_rms_norm(x.reshape(1, 8), np.ones(4), np.zeros((1, 8)), activation="sigmoid", epsilon=0.0)
    np.testing.assert_allclose(g, 0.5 * llm_blocks.branchwise_rms_norm(x.reshape(1, 8), num_branches=2, epsilon=0.0))
    r = llm_blocks.linear_attention_gate(np.array([0.0]), np.array([math.log(math.e - 1)]), np.array([-2.0]),
                                         np.array([0.0]))
    np.testing.assert_allclose(r["decay"], [-2.0])  # softplus(log(e - 1)) = 1
    np.testing.assert_allclose(r["beta"], [0.5])


# --------------------------------------------------------------------------- catalog
def test_catalog_metadata():
    ids = [f.id for f in FEATURES]
    assert len(ids) == len(set(ids)) == 191
    ops = {f.op_type for f in FEATURES}
    assert len(ops) == 37
    schemas = _SCHEMAS
    for f in FEATURES:
        assert f.id.split(".")[0] == f.op_type.lower(), f.id
        assert f.domain == "com.microsoft" and f.opset == 1 and f.changes and "\n" not in f.changes and f.source
        schema = schemas[f.op_type]
        names = {i.name for i in schema.inputs}
        for name in f.uses.inputs + f.uses.absent:
            assert name in names, (f.id, name)
        for name in f.uses.attributes:
            assert name in schema.attributes, (f.id, name)


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_probe_is_well_formed_and_decisive(fid):
    p = BY_ID[fid].build()
    for case in (p.subject, p.control):
        graph = onnx.load_from_string(case.model).graph
        nodes = [n for n in graph.node if n.name == PROBE_NODE_NAME]
        assert len(nodes) == 1 and nodes[0].op_type == BY_ID[fid].op_type
        assert tuple(o.name for o in graph.output) == case.outputs
        declared = {i.name for i in graph.input}
        # Every fed input is declared; a control with nothing fed keeps its constants declared.
        assert set(case.feeds) <= declared and (case.feeds or declared)
    assert p.subject.outputs == p.control.outputs
    if ".output." in fid:  # the optional output is listed first, so the unwritten fault hits it
        assert p.subject.outputs[0] != _SCHEMAS[BY_ID[fid].op_type].outputs[0].name and len(p.subject.outputs) > 1
    assert_control_runs_on_subject_arrays(p)
    assert separation(p) >= MIN_SEPARATION


def _run(case: Case, feeds=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(case.model, so, providers=["CPUExecutionProvider"])
    return sess.run(list(case.outputs), dict(case.feeds if feeds is None else feeds))


def _assert_matches(case: Case, tol, feeds=None) -> None:
    for name, actual in zip(case.outputs, _run(case, feeds)):
        expected = case.reference[name]
        assert actual.shape == expected.shape, name
        if name in case.exact:
            np.testing.assert_array_equal(actual.astype(np.float64), expected, err_msg=name)
            continue
        bad = ~tol.close(actual, expected)
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} elements off"


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_probe_matches_ort_cpu(fid):
    p = BY_ID[fid].build()
    if fid in CPU_REFUSES:
        with pytest.raises(Exception):  # noqa: B017 - ORT's own errors: create or run refuses
            _run(p.subject)
        return
    _assert_matches(p.subject, p.tolerance)
    _assert_matches(p.control, p.tolerance)
    # The control graph on the subject's feeds: what an EP that ignores the feature returns.
    _assert_matches(p.control, p.tolerance, feeds={n: p.subject.feeds[n] for n in p.control.feeds})
