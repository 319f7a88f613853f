"""Node-config probes of any operator (``epaudit/scan/nodeconfig.py``, ``nodegeneric.py``,
``noderef.py``) and matching by the operator version in force (``match.py``): real
models built like exporters write them, real ORT sessions through the runner and the
classifier, broken EPs from ``inject_fault`` only."""

from __future__ import annotations


import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from conftest import CPU_ONLY
from epaudit.audit import run as run_audit
from epaudit.contract.outcomes import Outcome
from epaudit.contract.probes import MIN_SEPARATION, Feature, Use
from epaudit.matrix.load import parse
from epaudit.scan import analyse
from epaudit.scan.match import uses
from epaudit.scan.model import read
from epaudit.scan.nodeconfig import MAX_BYTES, Unprobed, configure
from epaudit.scan.nodegeneric import probes
from epaudit.scan.nodeprobe import plan

MATRIX = CPU_ONLY + "{broken}\n"


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _silero_conv(c_in: int = 129, opset: int = 16) -> onnx.ModelProto:
    """The silero-vad encoder's first layer: a 1-D Conv of kernel 3 over C_in channels,
    bias and pads 1, after an STFT magnitude (here a Sqrt) whose spatial size is 4."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((128, c_in, 3)).astype(np.float32), "encoder.0.weight")
    b = numpy_helper.from_array(rng.standard_normal(128).astype(np.float32), "encoder.0.bias")
    nodes = [helper.make_node("Sqrt", ["spec"], ["mag"], name="/stft/Sqrt"),
             helper.make_node("Conv", ["mag", "encoder.0.weight", "encoder.0.bias"], ["y"], name="/encoder.0/Conv",
                              kernel_shape=[3], pads=[1, 1], strides=[1], dilations=[1], group=1),
             helper.make_node("Relu", ["y"], ["out"], name="/encoder.0/Relu")]
    return _model(nodes, [helper.make_tensor_value_info("spec", T.FLOAT, ["batch", c_in, 4])],
                  [helper.make_tensor_value_info("out", T.FLOAT, None)], [w, b], opset)


def _run(features, fault=None):
    broken = f'[providers.BROKEN]\nname = "CPUExecutionProvider"\ninject_fault = "{fault}"' if fault else ""
    return run_audit(parse(MATRIX.format(broken=broken), "m.toml"), features=features, gate=False, timeout=60)


def test_conv_probed_at_its_own_channels_kernel_and_shape(tmp_path):
    """The WebGPU defect of the corpus (1-D Conv, k = 3, C_in = 129) is a configuration the
    catalog's Conv probes never reach: the node's own probe has C_in = 129, k = 3, the
    model's spatial size, and seeded weights (not the model's), and CPU passes it."""
    onnx.save(_silero_conv(), tmp_path / "m.onnx")
    m = read(tmp_path / "m.onnx", dims={"batch": 1})
    groups = plan(list(m.nodes), {"batch": 1}, m.opsets)
    (conv,) = [g for g in groups if g.operator == "ai.onnx.Conv"]
    assert conv.key.startswith("Conv-11 float32 X[1,129,4] W[128,129,3] B[128]")
    assert conv.nodes == ("/encoder.0/Conv",) and conv.probed
    parts = set(conv.parts.values())
    assert parts == {"config", "input:B", "attr:pads"}, parts
    config = next(f for f in conv.features if conv.parts[f.id] == "config").build()
    weights = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(config.subject.model).graph.initializer}
    model_w = numpy_helper.to_array(_silero_conv().graph.initializer[0])
    assert weights["W"].shape == model_w.shape and not np.allclose(weights["W"], model_w)
    # CPU passes every probe; a kernel that ignores the feature (the control's graph on the
    # subject's feeds) reads IGNORED, one that perturbs its outputs MISMATCH.
    result = _run(list(conv.features), "ignore")
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "CPU"} == {Outcome.PASS}
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "BROKEN"} == {Outcome.IGNORED}
    result = _run(list(conv.features), "perturb")
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "BROKEN"} == {Outcome.MISMATCH}


def test_an_operator_without_optional_inputs_gets_an_operator_itself_control():
    """Relu has no optional input and no attribute: its config probe's control bakes X in as
    a constant that stays a declared graph input (never folded), decisive by the bound."""
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [helper.make_tensor_value_info("x", T.FLOAT, [2, 8])],
               [helper.make_tensor_value_info("y", T.FLOAT, None)])
    node = read_proto(m).nodes[0]
    cfg = configure(node, {}, {"": 17})
    built, skipped = probes(cfg, "node.x", 1)
    (part, probe), = built
    assert part == "config" and skipped == []
    from epaudit.classify.compare import separation

    assert separation(probe) >= MIN_SEPARATION
    control = onnx.load_from_string(probe.control.model)
    assert [i.name for i in control.graph.input] == ["X"] and [i.name for i in control.graph.initializer] == ["X"]
    assert probe.control.feeds == {}


def test_a_product_with_a_constant_zero_is_probed_by_varying_the_constant(tmp_path):
    """skl2onnx's KMeans: ``Mul(ReduceSumSquare(X), 0)`` is 0 whatever is fed, so no fed input
    separates; the control sets the constant to other values, and an EP that ignores it (the
    control's graph on the subject's feeds) reads IGNORED, one that perturbs MISMATCH."""
    zero = numpy_helper.from_array(np.zeros(1, np.float32), "Mu_Mulcst")
    m = _model([helper.make_node("ReduceSumSquare", ["X"], ["r"], name="rss", axes=[1], keepdims=1),
                helper.make_node("Mul", ["r", "Mu_Mulcst"], ["y"], name="/Mul")],
               [helper.make_tensor_value_info("X", T.FLOAT, ["N", 8])],
               [helper.make_tensor_value_info("y", T.FLOAT, None)], [zero], opset=17)
    onnx.save(m, tmp_path / "m.onnx")
    read_m = read(tmp_path / "m.onnx", dims={"N": 3})
    (mul,) = [g for g in plan(list(read_m.nodes), {"N": 3}, read_m.opsets) if g.operator == "ai.onnx.Mul"]
    assert mul.probed and set(mul.parts.values()) == {"config"}, mul.parts
    probe = mul.features[0].build()
    from epaudit.classify.compare import separation

    assert separation(probe) >= MIN_SEPARATION
    assert all(not np.any(r) for r in probe.subject.reference.values())  # the product is 0
    control_b = {i.name: numpy_helper.to_array(i) for i in onnx.load_from_string(probe.control.model).graph.initializer}
    assert np.all(control_b["B"] != 0) and probe.control.feeds.keys() == probe.subject.feeds.keys()
    result = _run(list(mul.features), "ignore")
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "CPU"} == {Outcome.PASS}
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "BROKEN"} == {Outcome.IGNORED}
    result = _run(list(mul.features), "perturb")
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "BROKEN"} == {Outcome.MISMATCH}


@pytest.mark.parametrize("batch, folded", [(-1, True), ("N", False)])
def test_a_shape_chain_orts_folding_removes_is_no_compute_node(tmp_path, batch, folded):
    """A model declaring its input ``[-1, 3, ?, ?]`` (rapidocr's classifier): after a
    GlobalAveragePool the shape is ``[-1, 8, 1, 1]`` from the declarations alone, so ORT
    folds ``Shape -> Slice -> Concat`` into the Reshape's constant at session creation (those
    nodes are absent from its profile), even where ``--inputs`` binds the input here. With a
    symbolic batch (``N``) the declarations do not give that dim and scan keeps the chain
    as run-time work (ORT's ReshapeFusion happens to absorb this exact pattern into a Reshape
    with a 0 dim too; scan does not emulate fusions, docs/scan.md)."""
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["g"], name="gap"),
             helper.make_node("Shape", ["g"], ["s"], name="shape"),
             helper.make_node("Slice", ["s", "zero", "one"], ["n"], name="slice"),
             helper.make_node("Concat", ["n", "eight"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["g", "target"], ["y"], name="reshape")]
    inits = [numpy_helper.from_array(np.array([v], np.int64), k) for k, v in (("zero", 0), ("one", 1), ("eight", 8))]
    m = _model(nodes, [helper.make_tensor_value_info("x", T.FLOAT, [batch, 8, "h", "w"])],
               [helper.make_tensor_value_info("y", T.FLOAT, None)], inits, opset=13)
    onnx.save(m, tmp_path / "m.onnx")
    got = {n.name: n.folded for n in read(tmp_path / "m.onnx", input_shapes={"x": (1, 8, 5, 6)}).nodes}
    assert (got["slice"], got["concat"]) == (folded, folded)
    assert got["gap"] is False and got["reshape"] is False


def read_proto(m: onnx.ModelProto, tmp=None):
    import tempfile

    d = tempfile.mkdtemp()
    onnx.save(m, f"{d}/m.onnx")
    return read(f"{d}/m.onnx")


def test_a_knockout_whose_attribute_is_its_default_exercises_nothing():
    """``kernel_shape`` written as W's own shape changes nothing when removed: no probe."""
    cfg = configure(read_proto(_silero_conv()).nodes[1], {"batch": 1}, {"": 16})
    built, _ = probes(cfg, "node.c", 3)
    assert "attr:kernel_shape" not in {p for p, _ in built}


def test_too_large_to_probe_is_said_before_anything_is_allocated():
    """A node declaring 2^40 elements is refused from its shapes alone."""
    x = helper.make_tensor_value_info("x", T.FLOAT, [1 << 20, 1 << 20])
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="big")], [x], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(Unprobed, match="too large to probe"):
        configure(read_proto(m).nodes[0], {}, {"": 17})
    x = helper.make_tensor_value_info("x", T.FLOAT, [MAX_BYTES // 4 + 1])
    m = _model([helper.make_node("Relu", ["x"], ["y"], name="big")], [x], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    with pytest.raises(Unprobed, match="too large to probe"):
        configure(read_proto(m).nodes[0], {}, {"": 17})


def test_gqa_with_a_million_heads_is_refused_not_built(tmp_path):
    import scan_models as sm

    onnx.save(sm.gqa_node(heads=1 << 20, kv_heads=1, head=64), tmp_path / "m.onnx")
    (g,) = plan(list(read(tmp_path / "m.onnx").nodes))
    assert not g.features and "too large to probe" in g.skipped[0]


# --------------------------------------------------------------------------- references


def _evaluate(op, inputs, attrs, opset=17):
    from onnx.reference import ReferenceEvaluator

    n = helper.make_node(op, list(inputs), ["Y"], **attrs)
    g = helper.make_graph([n], "g", [helper.make_tensor_value_info(k, T.DOUBLE, None) for k in inputs],
                          [helper.make_tensor_value_info("Y", T.DOUBLE, None)])
    return ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])).run(None, inputs)[0]


@pytest.mark.parametrize("xs, ws, attrs", [
    ((1, 3, 17, 19), (8, 3, 3, 3), dict(pads=[1, 2, 0, 1], strides=[2, 1], dilations=[1, 2])),
    ((2, 6, 9), (4, 3, 3), dict(group=2, auto_pad="SAME_UPPER", strides=[2])),
    ((1, 4, 8, 8), (4, 1, 3, 3), dict(group=4, auto_pad="SAME_LOWER")),
    ((1, 129, 4), (128, 129, 3), dict(pads=[1, 1])),
    ((1, 2, 5, 5, 5), (3, 2, 2, 2, 2), dict(strides=[2, 1, 2])),
])
def test_own_conv_reference_equals_onnx_reference(xs, ws, attrs):
    from epaudit.scan.noderef import _conv

    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    want = _evaluate("Conv", {"X": x, "W": w, "B": b}, attrs)
    got = _conv({"X": x, "W": w, "B": b}, attrs)["Y"]
    assert got.shape == want.shape and np.allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("xs, attrs", [((1, 3, 17, 19), dict(kernel_shape=[3, 3], pads=[1, 2, 0, 1], strides=[2, 1],
                                                              dilations=[1, 2])),
                                       ((2, 6, 9), dict(kernel_shape=[2], strides=[2]))])
def test_own_maxpool_reference_equals_onnx_reference(xs, attrs):
    from epaudit.scan.noderef import _max_pool

    x = np.random.default_rng(1).standard_normal(xs)
    assert np.array_equal(_max_pool({"X": x}, attrs)["Y"], _evaluate("MaxPool", {"X": x}, attrs))


def test_overrides_fix_what_onnx_reference_gets_wrong():
    """BatchNormalization-9 with ``momentum`` set: onnx.reference uses batch statistics
    (training mode, which opset 9 does not have); GlobalMaxPool of a 3-D input: it reduces
    the channels. Each override is the spec's formula, and the evaluator still differs (if
    it stops differing, the override can go)."""
    from epaudit.scan.noderef import _batchnorm_inference, _global_max_pool

    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 4, 3, 3))
    s, b, m = (rng.standard_normal(4) for _ in range(3))
    v = rng.random(4) + 0.5
    spec = (x - m.reshape(1, -1, 1, 1)) / np.sqrt(v.reshape(1, -1, 1, 1) + 1e-5) * s.reshape(1, -1, 1, 1) \
        + b.reshape(1, -1, 1, 1)
    ours = _batchnorm_inference({"X": x, "scale": s, "B": b, "input_mean": m, "input_var": v}, {"epsilon": 1e-5})["Y"]
    assert np.allclose(ours, spec)
    theirs = _evaluate("BatchNormalization", {"X": x, "s": s, "b": b, "m": m, "v": v}, {"momentum": 0.9}, opset=9)
    assert not np.allclose(theirs, spec)
    x3 = rng.standard_normal((2, 3, 5))
    assert _global_max_pool({"X": x3}, {})["Y"].shape == (2, 3, 1)
    assert _evaluate("GlobalMaxPool", {"X": x3}, {}).shape == (2, 1)


def test_contrib_operators_with_a_reference_get_node_probes():
    """Every catalog operator declaration (``Op``/``XOp``/``QOp``) gives its operator a
    reference: the contrib families written for issue 27 gain node probes with no change
    in scan."""
    from epaudit.scan.noderef import contrib_references

    refs = contrib_references()
    for key in (("com.microsoft", "MatMulNBits"), ("com.microsoft", "SkipLayerNormalization"),
                ("com.microsoft", "BiasGelu"), ("com.microsoft", "QLinearConv"), ("", "SimplifiedLayerNormalization")):
        assert key in refs, key
    assert len(refs) >= 50


# --------------------------------------------------------------------------- matching


def _feature(op, opset, **use):
    def never():  # pragma: no cover - matching never builds
        raise AssertionError
    return Feature(f"{op}.{opset}", op, "", opset, use.pop("dtype", "float32"), "", "", never, uses=Use(**use))


def test_a_feature_probes_a_node_only_at_the_operator_version_in_force():
    """An opset-12 model's Transpose is Transpose-1 (Transpose-13 came at opset 13): the
    opset-25 stamp's outcome is not borrowed; an opset-16 Identity is Identity-16 and uses
    one stamp, not nine."""
    t = _model([helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[1, 0])],
               [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", T.FLOAT, None)],
               opset=12)
    node = read_proto(t).nodes[0]
    assert node.since == 1
    assert uses(_feature("Transpose", 7), node) and not uses(_feature("Transpose", 25), node)
    idents = [_feature("Identity", v) for v in (7, 13, 14, 16, 19, 21, 23, 24, 25)]
    i = _model([helper.make_node("Identity", ["x"], ["y"], name="i")], [helper.make_tensor_value_info("x", T.FLOAT, [2])],
               [helper.make_tensor_value_info("y", T.FLOAT, None)], opset=16)
    used, _, _ = analyse(read_proto(i), idents, node_probes=False)
    assert list(used) == ["Identity.16"]


def test_an_absent_attribute_without_default_matches_no_value_and_integer_nodes_keep_their_type():
    """``Shape`` without ``end`` does not use an ``end=0`` probe; a ``ConvInteger`` node is
    uint8, not float32."""
    s = _model([helper.make_node("Shape", ["x"], ["y"], name="s")], [helper.make_tensor_value_info("x", T.FLOAT, [2])],
               [helper.make_tensor_value_info("y", T.INT64, None)], opset=21)
    node = read_proto(s).nodes[0]
    assert not uses(_feature("Shape", 21, attributes={"end": 0}), node)
    assert uses(_feature("Shape", 21), node)
    w = numpy_helper.from_array(np.ones((2, 1, 1, 1), np.uint8), "w")
    c = _model([helper.make_node("ConvInteger", ["x", "w"], ["y"], name="ci")],
               [helper.make_tensor_value_info("x", T.UINT8, [1, 1, 3, 3])],
               [helper.make_tensor_value_info("y", T.INT32, None)], [w], opset=17)
    assert read_proto(c).nodes[0].dtype == "uint8"


def test_constant_values_are_summarised_not_printed_as_protobuf():
    k = helper.make_node("Constant", [], ["k"], name="k", value=numpy_helper.from_array(np.array([3], np.int64)))
    m = _model([k, helper.make_node("Unsqueeze", ["x", "k"], ["y"], name="u")],
               [helper.make_tensor_value_info("x", T.FLOAT, [2])], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    node = read_proto(m).nodes[0]
    assert str(node.attributes["value"]) == "tensor int64[1]"


# --------------------------------------------------------------------------- the real WebGPU EP


@pytest.mark.integration
@pytest.mark.parametrize("c_in, wrong", [(129, True), (3, False)])
def test_webgpu_conv_at_the_silero_channels_is_found_by_its_own_node_probe(tmp_path, c_in, wrong):
    """onnxruntime-webgpu 1.27.0 (lavapipe) miscomputes a 1-D Conv of kernel 3 at C_in = 129
    and not at C_in = 3 (corpus truth: every silero-vad model diverges at its first Conv):
    the node probe built from the node itself reads MISMATCH at 129, PASS at 3."""
    import os

    from epaudit.matrix.load import load
    from epaudit.scan import scan

    if not os.environ.get("EPAUDIT_WEBGPU_PYTHON"):
        if os.environ.get("EPAUDIT_INTEGRATION") == "required":
            pytest.fail("$EPAUDIT_WEBGPU_PYTHON is not set: .ci/run must build the WebGPU environment")
        pytest.skip("$EPAUDIT_WEBGPU_PYTHON is not set: run `epaudit env create webgpu` and export it")
    onnx.save(_silero_conv(c_in), tmp_path / "m.onnx")
    matrix = load(None)
    result = scan([str(tmp_path / "m.onnx")], matrix, providers=[matrix.providers["WebGPU"]], timeout=120.0,
                  dims={"batch": 1})
    (verdict,) = result.models[0].eps
    conv = next(c for c in result.models[0].configs if c.operator == "ai.onnx.Conv")
    outcomes = {g.feature: g.outcome for g in verdict.gaps if g.feature in conv.parts}
    if wrong:
        assert outcomes and set(outcomes.values()) == {Outcome.MISMATCH}, outcomes
        assert verdict.verdict.value == "would be silently wrong" and result.exit_code == 1
    else:
        assert not outcomes, outcomes


@pytest.mark.parametrize("value, want", [(np.array([0.5], np.float32), "float32"),
                                         (np.array([3], np.int32), "int32"), (None, "float32")])
def test_a_folded_constant_of_shape_keeps_the_type_of_its_value(tmp_path, value, want):
    """ConstantOfShape's output has its ``value`` attribute's type (float32 when absent), not
    the int64 of its shape input: torch.onnx's LSTM export builds ``initial_h`` this way, and
    typing it int64 made every probe of the LSTM a refusal (an exported LSTM at 15 of 17
    compute nodes probed before the fix; benchmarks/scan_corpus.py)."""
    dtype = T.FLOAT if value is None or value.dtype == np.float32 else T.INT32
    attrs = {} if value is None else {"value": numpy_helper.from_array(value, "v")}
    nodes = [helper.make_node("Shape", ["X"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["c"], **attrs),
             helper.make_node("Add", ["X", "c"], ["Y"]),
             helper.make_node("Less", ["X", "Y"], ["Z"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", dtype, [2, 3])],
                          [helper.make_tensor_value_info("Z", T.BOOL, None)])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "m.onnx")
    nodes = {n.op_type: n for n in read(tmp_path / "m.onnx").nodes}
    assert nodes["Add"].input_types == {"A": want, "B": want}
    assert set(nodes["Less"].input_types.values()) == {want}


def _embed_layer_norm(vocab: int = 30) -> onnx.ModelProto:
    """The first node of a BERT fused by ORT's transformers optimizer: int32 ids into a
    (vocab, 32) word table, (16, 32) position and (2, 32) segment tables, gamma and beta."""
    rng = np.random.default_rng(3)
    tables = {"word": (vocab, 32), "pos": (16, 32), "seg": (2, 32), "gamma": (32,), "beta": (32,)}
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in tables.items()]
    node = helper.make_node("EmbedLayerNormalization", ["ids", "segs", "word", "pos", "seg", "gamma", "beta"],
                            ["out", "mask_index"], name="EmbedLayerNormalization_0", domain="com.microsoft",
                            epsilon=1e-12)
    m = _model([node], [helper.make_tensor_value_info("ids", T.INT32, ["batch", "seq"]),
                        helper.make_tensor_value_info("segs", T.INT32, ["batch", "seq"])],
               [helper.make_tensor_value_info("out", T.FLOAT, None)], inits)
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


def test_embed_layer_normalization_ids_are_drawn_inside_its_tables(tmp_path):
    """Found on a float16 BERT fused by ORT's transformers optimizer: the node's ids were drawn
    from -4..4 like any integer input, our reference refused them ("input_ids outside the word
    embedding") and the node went unprobed. Its ids now index the rows of their tables."""
    onnx.save(_embed_layer_norm(), tmp_path / "m.onnx")
    m = read(tmp_path / "m.onnx", dims={"batch": 2, "seq": 8})
    (group,) = [g for g in plan(list(m.nodes), {"batch": 2, "seq": 8}, m.opsets)
                if g.operator == "com.microsoft.EmbedLayerNormalization"]
    assert group.probed, group
    feature = next(f for f in group.features if group.parts[f.id] == "config")
    feeds = feature.build().subject.feeds
    ids, segs = feeds["input_ids"], feeds["segment_ids"]
    assert ids.min() >= 0 and ids.max() < 30 and segs.min() >= 0 and segs.max() < 2
    result = _run([feature])
    assert {c.outcome for (_, ep), c in result.results.items() if ep == "CPU"} == {Outcome.PASS}
