"""float16 type variants of the hand-written probes (epaudit/catalog/variants.py, issue 28):
real models, real feeds, real CPU sessions; the list against the rule; the matrix's inheritance."""

from __future__ import annotations

import sys
import textwrap

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto

from conftest import CPU_ONLY
from epaudit import catalog
from epaudit.catalog import _contrib, _qgraph, _xcase, activations, bert_attention, fused, norms
from epaudit.catalog import variants as V
from epaudit.catalog.variants import BASES, DTYPE, EXCLUDED, FEATURES, VARIANT_OF, variant_base
from epaudit.classify.compare import separation
from epaudit.contract.outcomes import Outcome
from epaudit.contract.probes import MIN_SEPARATION, TOLERANCES, type_variant_of
from epaudit.matrix.load import load, parse
from epaudit.run.selftest import cpu_skips, run_selftest
from probe_contract import assert_control_runs_on_subject_arrays

BY_ID = {f.id: f for f in FEATURES}
F16 = TensorProto.FLOAT16


@pytest.fixture(scope="module")
def built():
    """Every variant's probe and its base's, by variant id."""
    return {f.id: (f.build(), catalog.BY_ID[VARIANT_OF[f.id]].build()) for f in FEATURES}


def _elem_types(model: bytes) -> tuple[dict[str, int], dict[str, int]]:
    g = onnx.load_from_string(model).graph
    return ({i.name: i.type.tensor_type.elem_type for i in g.input},
            {o.name: o.type.tensor_type.elem_type for o in g.output})


def _run(case, feeds=None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(case.model, so, providers=["CPUExecutionProvider"])
    return dict(zip(case.outputs, sess.run(list(case.outputs), dict(case.feeds if feeds is None else feeds))))


@pytest.mark.parametrize("fid, float_in, int_in, fixed_out", [
    ("fastgelu.bias.float16", ("X", "bias"), (), ()),
    ("fusedmatmul.transA.float16", ("A", "B"), (), ()),
    ("gathernd.indices.int32.float16", ("data",), ("indices",), ()),
    ("mha.attention_bias.float16", ("query", "key", "value", "attention_bias"), (), ()),
    ("skip_layer_norm.output.inv_std_var.float16", ("input", "skip", "gamma"), (), ("inv_std_var",)),
    # the _qgraph builder: int32 mask_index / input_ids kept, DMMHA's qk (QK) kept float
    ("ms_attention.mask_index.raw_2d.float16", ("input",), ("mask_index",), ()),
    ("embedlayernormalization.mask.float16", (), ("input_ids", "segment_ids", "mask"), ("mask_index",)),
    ("decodermaskedmultiheadattention.output_qk.float16", ("query", "key", "value", "past_key", "past_value"),
     ("past_sequence_length",), ("qk",)),
    ("linearattention.past_state.float16", ("query", "key", "value", "past_state"), (), ()),
])
def test_model_and_feeds_are_float16_where_the_type_parameter_is(fid, float_in, int_in, fixed_out):
    p = BY_ID[fid].build()
    assert p.feature_id == fid and p.dtype == DTYPE == BY_ID[fid].dtype
    assert set(float_in) | set(int_in) <= set(p.subject.feeds)
    for case in (p.subject, p.control):
        ins, outs = _elem_types(case.model)
        for name in float_in:
            if name in case.feeds:
                assert ins[name] == F16 and case.feeds[name].dtype == np.float16, name
        for name in (n for n in int_in if n in case.feeds):
            assert ins[name] in (TensorProto.INT32, TensorProto.INT64) and case.feeds[name].dtype.kind == "i"
        for name, elem in outs.items():
            if name in fixed_out:
                assert elem in (TensorProto.FLOAT, TensorProto.INT32), name
            else:
                assert elem == F16, name


def test_the_reference_is_computed_from_the_float16_rounded_inputs(built):
    p, base = built["fastgelu.bias.float16"]
    x16, b16 = (p.subject.feeds[n].astype(np.float64) for n in ("X", "bias"))
    x32, b32 = (base.subject.feeds[n].astype(np.float64) for n in ("X", "bias"))
    assert not np.array_equal(x16, x32) and not np.array_equal(b16, b32)  # the rounding is real
    np.testing.assert_array_equal(x16, x32.astype(np.float16).astype(np.float64))
    ref16 = activations.FASTGELU.reference({"X": x16, "bias": b16}, {})["Y"]
    ref32 = activations.FASTGELU.reference({"X": x32, "bias": b32}, {})["Y"]
    np.testing.assert_array_equal(p.subject.reference["Y"], ref16)
    assert not np.array_equal(p.subject.reference["Y"], ref32)
    # FusedMatMul with transA (the _xcase builder) and SkipLayerNormalization (the _contrib builder)
    for fid, op in (("fusedmatmul.transA.float16", fused.FUSEDMATMUL), ("skip_layer_norm.bias.float16", norms.SLN)):
        p, base = built[fid]
        node = onnx.load_from_string(p.subject.model).graph.node[0]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        vals = {n: a.astype(np.float64) for n, a in p.subject.feeds.items()}
        for name, ref in op.reference(vals, attrs).items():
            if name in p.subject.reference:
                # (epsilon read back from the model is its float32 attribute: 1e-13 apart)
                np.testing.assert_allclose(p.subject.reference[name], ref, rtol=1e-11, atol=0, err_msg=fid)
        assert any(not np.array_equal(p.subject.reference[o], base.subject.reference[o]) for o in p.subject.outputs)


def test_every_variant_separates_at_float16_and_takes_float16_tolerance(built):
    for fid, (p, base) in built.items():
        # the base's tolerance widened by its accumulation length; the same factor at float16
        factor = base.tolerance.atol / TOLERANCES["float32"].atol
        assert p.tolerance.atol == pytest.approx(TOLERANCES[DTYPE].atol * factor), fid
        assert p.tolerance.rtol == pytest.approx(TOLERANCES[DTYPE].rtol * factor), fid
        assert separation(p) >= MIN_SEPARATION, fid
        assert_control_runs_on_subject_arrays(p)
        assert p.subject.outputs == base.subject.outputs and p.subject.exact == base.subject.exact


@pytest.mark.parametrize("fid", ["biasgelu.basic.float16", "fusedmatmul.transA.float16", "mha.attention_bias.float16",
                                 "gathernd.indices.int32.float16", "rotary.interleaved.float16",
                                 "skip_layer_norm.output.inv_std_var.float16"])
def test_cpu_session_matches_the_subject_and_not_the_control(fid, built):
    p, _ = built[fid]
    got = _run(p.subject)
    for name, actual in got.items():
        ok = p.tolerance.close(actual, p.subject.reference[name])
        assert ok.all(), (fid, name)
    # the control's reference is never what the subject's session gives
    assert any(not p.tolerance.close(got[n], p.control.reference[n]).all()
               for n in p.subject.outputs if n in p.control.reference), fid


# ------------------------------------------------------------------ the list against the rule
def _builder_bases() -> dict[str, object]:
    """Every hand-written float32 feature built by the two shared builders' ``probe``."""
    codes = {_contrib.probe.__code__, _xcase.probe.__code__, _qgraph.probe.__code__}
    out, seen = {}, []

    def hook(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            seen.append(1)

    for f in catalog.HAND_WRITTEN:
        if f.dtype != "float32":
            continue
        seen.clear()
        sys.setprofile(hook)
        try:
            f.build()
        finally:
            sys.setprofile(None)
        if seen:
            out[f.id] = f
    return out


def _allows_float16(f) -> bool:
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    domain = "" if f.domain in ("", "ai.onnx") else f.domain
    schemas = [s for s in C.get_all_operator_schema()
               if s.name == f.op_type and s.domain == domain and s.since_version <= f.opset]
    schema = max(schemas, key=lambda s: s.since_version)
    param = _float_param(schema)
    allowed = next(tc.allowed_type_strs for tc in schema.type_constraints if tc.type_param_str == param)
    return "tensor(float16)" in allowed


def _float_param(schema) -> str:
    """The type parameter of the schema's first input that can be float (EmbedLayerNormalization's
    first input is its int32 ids: T is the word embedding's)."""
    allowed = {tc.type_param_str: tc.allowed_type_strs for tc in schema.type_constraints}
    return next(i.typeStr for i in schema.inputs if "tensor(float)" in allowed.get(i.typeStr, ()))


def test_every_eligible_base_has_a_variant_and_every_other_one_a_reason():
    bases = _builder_bases()
    assert not set(BASES) & set(EXCLUDED)
    assert set(BASES) | set(EXCLUDED) == set(bases)
    assert len(BASES) == len(FEATURES) == 278 and len(EXCLUDED) == 41
    for b in BASES:
        assert _allows_float16(bases[b]), b
    hand16 = {f.id: f for f in catalog.HAND_WRITTEN if f.dtype == DTYPE}
    for b, why in EXCLUDED.items():
        assert why.strip(), b
        if why.startswith("a hand-written float16 sibling"):
            sibling = hand16[why.rpartition(": ")[2]]
            assert sibling.op_type == bases[b].op_type and b.split(".")[0] == sibling.id.split(".")[0]
        elif "has no float16" in why:
            assert not _allows_float16(bases[b]), b
        else:  # schema allows float16; QMoE's T2
            assert why == V._QMOE, b
            assert _allows_float16(bases[b]) and bases[b].op_type == "QMoE", b


def test_variants_are_features_of_their_base_operator_in_the_catalog():
    assert catalog.VARIANTS == FEATURES
    for f in FEATURES:
        base = catalog.BY_ID[VARIANT_OF[f.id]]
        assert catalog.BY_ID[f.id] is f and f.id == f"{base.id}.{DTYPE}"
        assert (f.op_type, f.domain, f.opset, f.uses) == (base.op_type, base.domain, base.opset, base.uses)
        assert f.dtype == DTYPE and base.id in f.changes and f.source.startswith(base.source)
    # after the hand-written ones, before any generated one
    ids = [f.id for f in catalog.FEATURES]
    assert ids[len(catalog.HAND_WRITTEN):len(catalog.HAND_WRITTEN) + len(FEATURES)] == [f.id for f in FEATURES]


def test_selftest_catches_every_fault_on_variants():
    chosen = [BY_ID[i] for i in ("biasgelu.basic.float16", "mha.attention_bias.float16", "gathernd.basic.float16",
                                 "ms_attention.attention_bias.float16", "linearattention.gqa.float16")]
    r = run_selftest(chosen, skip=cpu_skips(load(None)))
    assert r.misses == () and r.exit_code == 0
    for f in chosen:
        assert r.clean[f.id].got is Outcome.PASS, (f.id, r.clean[f.id].summary)


# ------------------------------------------------------------------ the _qgraph builder
def test_attention_variant_real_values_float16_where_t_is_int32_mask_kept(built):
    """com.microsoft.Attention: T inputs and outputs float16, mask_index int32, reference from the rounded values."""
    p, base = built["ms_attention.mask_index.raw_2d.float16"]
    g = onnx.load_from_string(p.subject.model).graph
    inits = {i.name: i.data_type for i in g.initializer}
    ins, outs = _elem_types(p.subject.model)
    assert ins == {"input": F16, "mask_index": TensorProto.INT32} and outs == {"output": F16}
    assert inits == {"weights": F16, "bias": F16}
    np.testing.assert_array_equal(p.subject.feeds["mask_index"], base.subject.feeds["mask_index"], strict=True)
    vals = {n: onnx.numpy_helper.to_array(i) for n, i in zip(inits, g.initializer)}
    vals.update(p.subject.feeds)
    base_vals = {**{i.name: onnx.numpy_helper.to_array(i) for i in onnx.load_from_string(base.subject.model).graph.initializer},
                 **base.subject.feeds}
    for n in ("input", "weights", "bias"):
        assert vals[n].dtype == np.float16 and not np.array_equal(vals[n], base_vals[n])
        np.testing.assert_array_equal(vals[n], base_vals[n].astype(np.float16))
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in g.node[0].attribute}
    ref = bert_attention.MS.reference({k: (v.astype(np.float64) if v.dtype == np.float16 else v)
                                       for k, v in vals.items()}, attrs)["output"]
    np.testing.assert_allclose(p.subject.reference["output"], ref, rtol=1e-12, atol=0)
    assert not np.array_equal(p.subject.reference["output"], base.subject.reference["output"])
    assert p.tolerance == _qgraph.tolerance_for("float16", bert_attention.H)
    got = _run(p.subject)["output"]
    assert got.dtype == np.float16 and p.tolerance.close(got, p.subject.reference["output"]).all()


def test_float_t_names_what_the_schema_binds_to_t():
    from onnxruntime.capi import onnxruntime_pybind11_state as C

    ops = {f.op_type for f in FEATURES if f.domain == "com.microsoft"}
    qops = {o.op_type: o for m in (bert_attention, V.embed_layer_norm, V.dmmha, V.mrope, V.sparse_attention,
                                   V.linear_attention, V.moe, V.quant_matmul)
            for o in vars(m).values() if isinstance(o, _qgraph.QOp) and o.float_t}
    assert set(qops) == ops & set(qops) == {"Attention", "EmbedLayerNormalization", "DecoderMaskedMultiHeadAttention",
                                           "MRotaryEmbedding", "SparseAttention", "LinearAttention", "MoE", "MatMulBnb4"}
    for name, op in qops.items():
        schema = next(s for s in C.get_all_operator_schema() if s.name == name and s.domain == "com.microsoft")
        t = _float_param(schema)
        bound = {a.name for a in (*schema.inputs, *schema.outputs) if a.typeStr == t}
        if name == "LinearAttention":  # S follows T (linear_attention.OP)
            bound |= {a.name for a in (*schema.inputs, *schema.outputs) if a.typeStr == "S"}
        assert op.float_t == bound, name


def test_variant_tolerance_keeps_the_length_and_refuses_other_bounds():
    for length in (16, 32, 64, 1024):
        got = _qgraph.variant_tolerance(_qgraph.tolerance_for("float32", length), "float16")
        assert got == _qgraph.tolerance_for("float16", length)
    with pytest.raises(ValueError):
        _qgraph.variant_tolerance(_qgraph.STEP, "float16")


# ------------------------------------------------------------------ the matrix
HEAD = CPU_ONLY
GAP = '{ status = "unsupported", issue = "https://example.org/1", until = 2027-01-01 }'
IDS = ["fastgelu.basic", "fastgelu.basic.float16", "matmulnbits.bits.2", "matmulnbits.bits.2.float16"]


def _decl(cells: str, fid: str):
    d = parse(HEAD + textwrap.dedent(cells), "m.toml", feature_ids=IDS).declaration(fid, "CPU")
    return None if d is None else (d.status, d.key)


def test_a_variant_reads_its_base_cell_and_a_key_naming_it_wins():
    base_gap = f'''\
        [features."fastgelu.basic"]
        CPU = {GAP}
        [features."matmulnbits.bits.2"]
        CPU = {GAP}
        '''
    assert _decl(base_gap, "fastgelu.basic.float16") == ("unsupported", "fastgelu.basic")
    # a hand-written id of that shape that is not a variant inherits nothing
    assert variant_base("matmulnbits.bits.2.float16") is None and type_variant_of("fastgelu.basic.float16") is None
    assert _decl(base_gap, "matmulnbits.bits.2.float16") is None
    named = base_gap + '''\
        [features."fastgelu.basic.float16"]
        CPU = "supported"
        '''
    assert _decl(named, "fastgelu.basic.float16") == ("supported", "fastgelu.basic.float16")


def test_shipped_matrix_variants_and_pre_existing_ids():
    m = load(None)
    # the CPU gaps measured in float16 (capabilities.toml, end of file)
    assert m.declaration("gelu.basic.float16", "CPU").status == "unsupported"
    assert m.declaration("gelu.basic", "CPU").status == "supported"
    assert m.declaration("unfoldtensor.dim.float16", "CPU").key == "unfoldtensor.*.float16"
    # elsewhere a variant's cells are its base's
    for fid in ("fusedmatmul.transA.float16", "mha.past.float16", "mha.packed_qkv.float16", "pad.basic.float16"):
        for alias in m.providers:
            assert m.declaration(fid, alias) == m.declaration(VARIANT_OF[fid], alias), (fid, alias)


def test_no_pre_existing_feature_changes_its_cells():
    """The shipped matrix without the variants' section, over the catalog without the variants,
    resolves every other feature exactly as the whole matrix over the whole catalog does."""
    from epaudit.matrix.load import default_text

    text = default_text()
    cut = text.index("# float16 type variants of the hand-written probes")
    ids = [f.id for f in catalog.FEATURES if f.id not in VARIANT_OF]
    before = parse(text[:cut], "before.toml", feature_ids=ids)
    after = load(None)
    for fid in ids:
        for alias in after.providers:
            a, b = after.declaration(fid, alias), before.declaration(fid, alias)
            assert (a is None) == (b is None), (fid, alias)
            if a is not None:
                assert (a.status, a.issue, a.until, a.reason, a.key) == (b.status, b.issue, b.until, b.reason, b.key)


def test_float16_moe_is_made_and_the_cpu_eps_wrong_answer_is_a_declared_finding():
    """The CPU EP of onnxruntime 1.31.1 returns zeros for float16 MoE (variants.MOE_CPU_FLOAT16):
    the variants exist (an EP that runs float16 MoE is audited by them) and the CPU cells are
    declared skip with that finding, never left out of the catalog."""
    import onnxruntime as ort

    from epaudit.classify.compare import compare
    from epaudit.matrix.load import load

    moe = [f for f in FEATURES if f.op_type == "MoE"]
    assert len(moe) == 12
    m = load(None)
    for f in moe:
        d = m.declaration(f.id, "CPU")
        assert (d is not None and d.status == "skip") == (f.id != "moe.fc3.float16"), f.id
    p = next(f for f in moe if f.id == "moe.basic.float16").build()
    s = ort.InferenceSession(p.subject.model, providers=["CPUExecutionProvider"])
    got = dict(zip(p.subject.outputs, s.run(list(p.subject.outputs), dict(p.subject.feeds))))
    ref = p.subject.reference[p.subject.outputs[0]]
    assert np.count_nonzero(ref) > 0
    assert not compare(got, p.subject.reference, p.tolerance)[p.subject.outputs[0]]["match"]
