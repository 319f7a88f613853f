"""Generated probes of operators whose output type is not their input's (comparisons, Size,
Cast, Where), of Dropout in inference mode, of shape-only operators, bfloat16 variants and
the corpus' ai.onnx.ml cases: the feature's type is the one that names the node, the
surface counts it, and each probe runs on the real CPU EP and can fail."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import cpu_matrix

from epaudit.cache.probecache import decode_probe
from epaudit.catalog.corpus import build as gbuild
from epaudit.catalog.corpus import derive

OPS = {"Greater", "Size", "Dropout", "Cast", "Where", "Transpose", "Identity", "Binarizer"}


@pytest.fixture(scope="module")
def built(cache_dir):
    return gbuild.build(cache_dir, ops=OPS, jobs=2, say=lambda line: None)


@pytest.fixture(scope="module")
def by_id(built):
    return {r["id"]: r for r in built["probes"]}


def _features(built, fids):
    from dataclasses import replace

    from epaudit.catalog.corpus import feature

    recs = {r["id"]: r for r in built["probes"]}
    return [replace(feature(recs[f]), build=lambda p=decode_probe(recs[f]["probe"]): p) for f in fids]


def test_a_comparison_is_typed_by_its_input_and_gets_variants_in_its_input_types(by_id):
    base = "onnx.Greater.input:A=zeros.greater.opset13"
    assert by_id[base]["dtype"] == "float32"  # its output is bool; its T is float
    made = {f.rsplit(".", 1)[1] for f in by_id if f.startswith(base + ".")}
    assert {"float64", "int32", "int64", "uint8"} <= made and "bool" not in made  # bool is not a T of Greater
    p = decode_probe(by_id[base + ".int8"]["probe"])
    assert p.subject.feeds["x"].dtype == np.int8
    out = next(iter(p.subject.reference))
    assert out in p.subject.exact and set(np.unique(p.subject.reference[out])) <= {0.0, 1.0}


def test_size_is_probed_with_a_longer_constant_since_no_same_shape_constant_can_separate(by_id):
    sizes = sorted(f for f in by_id if f.startswith("onnx.Size.") and by_id[f].get("base") is None)
    assert sizes and all("=longer." in f for f in sizes)
    p = decode_probe(by_id[sizes[0]]["probe"])
    fed = next(iter(p.subject.feeds.values()))
    (s,), (c,) = p.subject.reference.values(), p.control.reference.values()
    assert float(s) == fed.size and float(c) == fed.size + fed[0].size  # one more row along axis 0


def test_dropout_without_training_mode_is_a_probe_and_with_it_stays_random(built, by_id):
    drops = {f for f in by_id if f.startswith("onnx.Dropout.")}
    assert drops and not any("training_dropout" in f for f in drops)
    assert built["drops_by_op"]["Dropout"].get("random output", 0) >= 1 or built["drops"]["random output"] >= 1
    p = decode_probe(by_id[sorted(drops)[0]]["probe"])
    x = next(iter(p.subject.feeds.values()))
    np.testing.assert_array_equal(next(iter(p.subject.reference.values())), x.astype(np.float64))  # the identity


def test_cast_cases_feed_finite_values_and_keep_their_infinities(by_id):
    casts = sorted(f for f in by_id if f.startswith("onnx.Cast.") and by_id[f].get("base") is None)
    assert casts
    p = decode_probe(by_id[casts[0]]["probe"])
    x = next(iter(p.subject.feeds.values()))
    assert not np.isnan(x).any() and np.isinf(x).any()  # the case's NaN set to 0, its infinities kept
    ref = next(iter(p.subject.reference.values()))
    assert not np.isnan(ref).any()


def test_where_is_typed_by_x_not_by_its_bool_condition(by_id):
    import onnx.defs

    from epaudit.catalog.corpus import types as vtypes

    assert vtypes.first_param(onnx.defs.get_schema("Where", 16, ""))[0] == "T"
    wheres = {f: r for f, r in by_id.items() if f.startswith("onnx.Where.")}
    assert {r["dtype"] for r in wheres.values()} >= {"float32", "int64", "uint8"}
    p = decode_probe(next(r for r in wheres.values() if r["dtype"] == "int64")["probe"])
    assert {a.dtype.name for a in p.subject.feeds.values()} >= {"bool", "int64"}  # condition stays bool


def test_bfloat16_variant_casts_around_a_bfloat16_node_and_feeds_rounded_values(by_id):
    import onnx

    from epaudit.catalog.models import round_to_bfloat16

    fid = next(f for f in sorted(by_id) if f.startswith("onnx.Transpose.") and f.endswith(".bfloat16"))
    rec, p = by_id[fid], decode_probe(by_id[fid]["probe"])
    assert rec["dtype"] == "bfloat16" and p.tolerance.atol >= 3e-2
    m = onnx.load_from_string(p.subject.model)
    ops = [n.op_type for n in m.graph.node]
    assert ops[0] == "Cast" and ops[-1] == "Cast" and "Transpose" in ops
    probe_node = next(n for n in m.graph.node if n.name == "probe")
    types = {vi.name: vi.type.tensor_type.elem_type for vi in m.graph.value_info}
    assert all(vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT for vi in m.graph.input)
    x = next(iter(p.subject.feeds.values()))
    np.testing.assert_array_equal(x, round_to_bfloat16(x))  # exactly representable: the Cast in is exact
    assert probe_node.input[0].endswith(".bf16") or types.get(probe_node.input[0]) in (None, onnx.TensorProto.BFLOAT16)
    # Identity is removed by ORT's optimizer between the casts: no bfloat16 variant of it
    assert not any(f.startswith("onnx.Identity.") and f.endswith(".bfloat16") for f in by_id)
    assert any(f.startswith("onnx.Identity.") and f.endswith(".float16") for f in by_id)


def test_ml_corpus_cases_are_probes_of_the_ml_domain(by_id):
    from epaudit.catalog.corpus import feature

    recs = [r for f, r in by_id.items() if f.startswith("onnx.Binarizer.")]
    assert recs and all(r["domain"] == "ai.onnx.ml" and r["opset"] == 1 for r in recs)
    f = feature(recs[0])
    assert f.domain == "ai.onnx.ml" and f.op_type == "Binarizer"


def test_random_output_rule():
    import onnx.helper as h

    assert derive.random_output("Dropout", h.make_node("Dropout", ["x", "r", "t"], ["y"]))
    assert not derive.random_output("Dropout", h.make_node("Dropout", ["x", "r"], ["y"]))
    assert not derive.random_output("Dropout", h.make_node("Dropout", ["x", "r", ""], ["y"]))
    assert derive.random_output("RandomNormalLike", h.make_node("RandomNormalLike", ["x"], ["y"]))
    assert not derive.random_output("Relu", h.make_node("Relu", ["x"], ["y"]))


def test_cpu_passes_them_and_the_self_test_catches_every_fault(built, by_id):
    """Real CPU sessions: each kind above PASSes, and a broken EP (input ignored, kernel
    refusing, node on CPU elsewhere, perturbed output) is caught on each."""
    from epaudit.audit import run
    from epaudit.contract.outcomes import Outcome
    from epaudit.run.selftest import run_selftest

    pick = ["onnx.Greater.input:A=zeros.greater.opset13", "onnx.Greater.input:A=zeros.greater.opset13.int64"]
    pick += [sorted(f for f in by_id if f.startswith(p))[0] for p in ("onnx.Size.", "onnx.Dropout.", "onnx.Cast.",
                                                                     "onnx.Binarizer.", "onnx.Where.")]
    pick += [next(f for f in sorted(by_id) if f.startswith("onnx.Transpose.") and f.endswith(".bfloat16"))]
    feats = _features(built, pick)
    m = cpu_matrix("onnx.*", feature_ids=pick)
    result = run(m, features=feats)
    assert {f: result.results[(f, "CPU")].outcome for f in pick} == {f: Outcome.PASS for f in pick}
    st = run_selftest(feats, faults=("ignore", "refuse", "fallback", "perturb"))
    assert st.misses == (), [(x.feature_id, x.fault, x.summary) for x in st.misses]
    assert sum(1 for d in st.cells.values() if d.got is not None and d.detected) == 4 * len(pick)


# ------------------------------------------------------------------ Loop and Scan
@pytest.fixture(scope="module")
def control_flow(cache_dir):
    recs = gbuild.build(cache_dir, ops={"Loop", "Scan"}, jobs=2, say=lambda line: None)["probes"]
    return {r["id"]: r for r in recs if ".cf_" in r["id"]}


def test_control_flow_cases_match_our_reference_the_spec_and_ort():
    """Our references; onnx.reference with our Loop (extra_ops: its own Loop vstacks the scan
    outputs, (6, 3) for 3 iterations of (2, 3)); ORT CPU."""
    import onnx
    import onnxruntime as ort

    from epaudit.catalog.corpus import synthetic_control as sc

    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = sc.loop_identity(3, v)
    assert got["scan"].shape == (3, 2, 3) and (got["scan"][2] == v).all()
    s, x = np.zeros((2, 3), np.float32), np.arange(24, dtype=np.float32).reshape(4, 2, 3)
    got = sc.scan_shift(s, x)
    assert (got["final"] == x[3]).all() and (got["ys"][0] == 0).all() and (got["ys"][3] == x[2]).all()
    for c in sc.cases():
        case = c.probe.subject
        ev = derive.evaluate(onnx.load_from_string(case.model), dict(case.feeds))
        out = ort.InferenceSession(case.model, providers=["CPUExecutionProvider"]).run(None, dict(case.feeds))
        for (name, e), o in zip(ev.items(), out):
            np.testing.assert_array_equal(e, case.reference[name])
            np.testing.assert_array_equal(o, case.reference[name])


def test_control_flow_variants_retype_the_body(control_flow):
    import onnx

    made = {(r["op_type"], r["dtype"]) for r in control_flow.values()}
    for op in ("Loop", "Scan"):
        assert {(op, t) for t in ("float32", "float16", "bfloat16", "int64", "uint8", "bool")} <= made
    fid = next(f for f in sorted(control_flow) if f.startswith("onnx.Loop.") and f.endswith(".int32"))
    m = onnx.load_from_string(decode_probe(control_flow[fid]["probe"]).subject.model)
    body = next(a.g for a in m.graph.node[0].attribute if a.name == "body")
    types = {vi.name: vi.type.tensor_type.elem_type for vi in list(body.input) + list(body.output)}
    assert types["v_in"] == types["v_out"] == types["scan_out"] == onnx.TensorProto.INT32
    assert types["i"] == onnx.TensorProto.INT64 and types["cond_in"] == onnx.TensorProto.BOOL


def test_control_flow_probes_pass_on_cpu_and_catch_every_fault(control_flow):
    from dataclasses import replace

    from epaudit.audit import run
    from epaudit.catalog.corpus import feature
    from epaudit.contract.outcomes import Outcome
    from epaudit.run.selftest import run_selftest

    pick = [next(f for f in sorted(control_flow) if f.startswith(f"onnx.{op}.") and f.endswith(t))
            for op in ("Loop", "Scan") for t in (".opset25", ".float16", ".bfloat16", ".int8")]
    feats = [replace(feature(control_flow[f]), build=lambda p=decode_probe(control_flow[f]["probe"]): p) for f in pick]
    m = cpu_matrix("onnx.*", feature_ids=pick)
    result = run(m, features=feats)
    assert {f: result.results[(f, "CPU")].outcome for f in pick} == {f: Outcome.PASS for f in pick}
    st = run_selftest(feats, faults=("ignore", "refuse", "fallback", "perturb"))
    assert st.misses == (), [(x.feature_id, x.fault, x.summary) for x in st.misses]
