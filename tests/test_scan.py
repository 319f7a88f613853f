"""``epaudit scan``: models as exporters write them, mapped to features and joined with real
outcomes of real ORT sessions (broken EPs come from ``inject_fault``, never from mocks)."""

from __future__ import annotations

import json
import textwrap

import onnx
import pytest
import scan_models as sm
from click.testing import CliRunner
from onnx import TensorProto as T

from conftest import CPU_ONLY
from epaudit.audit import run as run_audit
from epaudit.catalog import FEATURES
from epaudit.cli import main
from epaudit.contract.outcomes import Outcome
from epaudit.matrix.load import parse
from epaudit.scan import analyse
from epaudit.scan.join import Verdict
from epaudit.scan.model import read
from epaudit.scan.nodeprobe import plan

GQA = "/model/layers.{}/attn/GroupQueryAttention"

MATRIX = CPU_ONLY + "{extra}\n"


def _broken(fault: str) -> str:
    """A BROKEN provider (the CPU EP with ``fault``) and a governed gap declared on it."""
    return textwrap.dedent(f'''\
        [providers.BROKEN]
        name = "CPUExecutionProvider"
        inject_fault = "{fault}"
        [features."gqa.softcap"]
        CPU = "supported"
        BROKEN = {{ status = "unsupported", issue = "https://github.com/microsoft/onnxruntime/issues/29506", until = 2099-01-01 }}
        ''')


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The exporter-style models on disk; the decoders' weights in separate files."""
    d = tmp_path_factory.mktemp("models")
    sm.save_external(sm.genai_decoder(), d / "decoder.onnx", "decoder.onnx.data")
    sm.save_external(sm.opset23_decoder(), d / "o23.onnx", "o23.onnx.data")
    onnx.save(sm.vision(), d / "vision.onnx")
    return d


def _matrix(tmp_path, extra: str = "") -> str:
    p = tmp_path / "m.toml"
    p.write_text(MATRIX.format(extra=extra))
    return str(p)


# --------------------------------------------------------------------------- reading and mapping


def test_genai_decoder_is_read_without_its_weights(models, tmp_path):
    # The data file is gone: a reader that loaded external data would fail here.
    model = onnx.load(str(models / "decoder.onnx"), load_external_data=False)
    onnx.save(model, tmp_path / "decoder.onnx")
    m = read(tmp_path / "decoder.onnx")
    assert m.external == ("decoder.onnx.data",)
    assert m.opsets == {"": 21, "com.microsoft": 1}
    gqa = [n for n in m.nodes if n.op_type == "GroupQueryAttention"]
    assert [n.name for n in gqa] == [GQA.format(0), GQA.format(1)]
    # dtype carried from MatMulNBits (a contrib op onnx cannot type), shapes symbolic
    assert gqa[0].dtype == "float16"
    assert gqa[0].shapes["past_key"] == ("batch_size", 2, "past_sequence_length", 64)

    used, groups, uncovered = analyse(m, FEATURES)
    for fid in ("gqa.attention_bias", "gqa.attention_bias.broadcast_batch", "gqa.softcap", "gqa.softcap.with_bias",
                "gqa.position_ids", "gqa.rotary", "gqa.decode", "gqa.prompt.head_size.64"):
        assert used[fid] == [GQA.format(0), GQA.format(1)], fid
    for fid in ("gqa.attention_bias.broadcast", "gqa.head_sink", "gqa.local_window", "gqa.packed_qkv",
                "gqa.dtype.float32", "gqa.prompt.head_size.128", "gqa.rotary_interleaved"):
        assert fid not in used, fid
    # Both layers share one configuration: probed once.
    attention = [g for g in groups if g.operator == "com.microsoft.GroupQueryAttention"]
    assert len(attention) == 1 and attention[0].nodes == (GQA.format(0), GQA.format(1))
    assert {p for p in attention[0].parts.values()} == {"config", "past", "attention_bias", "softcap", "rotary",
                                                        "position_ids"}
    ops = {(u.operator, u.item): u.count for u in uncovered}
    # The contrib catalogs probe MatMulNBits and the skip norm: their nodes map to features.
    assert len(used["matmulnbits.dtype.float16"]) == 15 and len(used["matmulnbits.accuracy_level.4.float16"]) == 15
    assert len(used["skip_simplified_layer_norm.dtype.float16"]) == 4
    assert not any(op.endswith("MatMulNBits") for op, _ in ops)
    assert not any(op.endswith("GroupQueryAttention") for op, _ in ops)
    # Every other node is probed in its own configuration by the generic builder (the
    # references of epaudit's contrib catalogs for MatMulNBits and the skip norm), and each
    # distinct configuration once: the 15 projections have 5 shapes (q/o, k/v, gate/up, down, lm_head).
    by_op = {}
    for g in groups:
        by_op.setdefault(g.operator, []).append(g)
    nbits = by_op["com.microsoft.MatMulNBits"]
    assert all(g.probed for g in nbits) and sum(len(g.nodes) for g in nbits) == 15 and len(nbits) == 5
    assert all(g.probed for g in by_op["com.microsoft.SkipSimplifiedLayerNormalization"])
    # The epsilon the norm sets is exercised by its own knock-out, not left uncovered.
    assert ("com.microsoft.SkipSimplifiedLayerNormalization", "attribute epsilon=1e-06") not in ops


def test_opset23_attention_and_its_head_size(models):
    m = read(models / "o23.onnx")
    assert m.opsets == {"": 23}
    used, groups, uncovered = analyse(m, FEATURES)
    names = ["model.layers.0.self_attn/Attention", "model.layers.1.self_attn/Attention"]
    for fid in ("attention.basic", "attention.is_causal", "attention.is_causal.offset", "attention.past"):
        assert used[fid] == names
    assert "attention.mask.bool" not in used and "attention.gqa_heads" not in used
    (attention,) = [g for g in groups if g.operator == "ai.onnx.Attention"]
    assert attention.key == "Attention-23 float32 4-D N=4 Nkv=4 H=32 is_causal past"
    # The catalog's head sizes do not include 32; the node's own probe does.
    _, _, catalog_only = analyse(m, FEATURES, node_probes=False)
    assert ("ai.onnx.Attention", "head_size 32") in {(u.operator, u.item) for u in catalog_only}
    assert ("ai.onnx.Attention", "head_size 32") not in {(u.operator, u.item) for u in uncovered}


def test_vision_subgraph_function_and_resize_attributes(models):
    m = read(models / "vision.onnx")
    by_name = {n.name: n for n in m.nodes}
    assert by_name["/neck/Resize"].scope == "/neck/If/then_branch"
    assert by_name["/neck/Resize"].attributes["mode"] == "linear"
    # a model-local function's body, typed from its call site (If output -> float32)
    assert by_name["/fn/Mul"].scope == "function local.vision.ScaleShift"
    assert by_name["/fn/Mul"].dtype == "float32"
    # Catalog features only (no node probes): what no feature exercises is listed.
    _, groups, uncovered = analyse(m, FEATURES, node_probes=False)
    items = {(u.operator, u.item) for u in uncovered}
    assert {("ai.onnx.Resize", "attribute mode='linear'"), ("ai.onnx.Resize", "attribute antialias=1"),
            ("ai.onnx.Resize", "input scales"), ("ai.onnx.Conv", "operator (no feature probes it)")} <= items
    # the default coordinate_transformation_mode (half_pixel) is no configuration of its own
    assert ("ai.onnx.Resize", "attribute coordinate_transformation_mode='half_pixel'") not in items
    assert groups == []
    # With node probes, the Resize inside the If branch and the function body are probed in
    # their own configurations: nothing is left uncovered but what no probe can reach.
    _, groups, uncovered = analyse(m, FEATURES)
    probed = {n for g in groups if g.probed for n in g.nodes}
    assert {"/stem/Conv", "/stem/Relu", "/neck/Resize"} <= probed
    # The function body's shapes are its call site's, which onnx cannot infer through the
    # If: those two nodes are listed as not probed, with the reason.
    unprobed = {u.item for u in uncovered if u.operator == "ai.onnx.Mul"}
    assert any(i.startswith("not probed in its own configuration: shape of input") for i in unprobed)


@pytest.mark.parametrize("model, item", [
    (sm.gqa_node(head=80, heads=2, kv_heads=2), "head_size 80"),
    (sm.gqa_node(qk_output=2), None),  # covered since the output_qk mode-2 features
    (sm.gqa_node(smooth_softmax=1, rotary=True, interleaved=True), None),
    (sm.attention_node(opset=24, softmax_precision=16), "attribute softmax_precision=16"),
    (sm.gqa_node(dtype=T.DOUBLE), "dtype float64"),
])
def test_uncovered_configurations(tmp_path, model, item):
    onnx.save(model, tmp_path / "m.onnx")
    _, _, uncovered = analyse(read(tmp_path / "m.onnx"), FEATURES, node_probes=False)
    items = {u.item for u in uncovered}
    assert (item in items) if item else not items, items


# --------------------------------------------------------------------------- node-config probes


@pytest.mark.parametrize("model", [
    sm.gqa_node(dtype=T.FLOAT, packed=True, sink=True, past=False),
    sm.gqa_node(local_window_size=16, smooth_softmax=1, head=128, heads=4, kv_heads=1),
    sm.gqa_node(rotary=True, interleaved=True, position_ids=True, bias=(1, 1, "S", "T"), softcap=30.0),
    sm.attention_node(rank=3, mask=(T.BOOL, ["S", "L"]), softcap=20.0, scale=0.3),
    sm.attention_node(dtype=T.FLOAT16, past=True, is_causal=1, qk_output=True, qk_matmul_output_mode=3, head=64),
    sm.attention_node(nonpad=True, opset=24, mask=(T.FLOAT, ["B", 1, "S", "L"])),
], ids=["gqa-f32-packed-sink", "gqa-window-smooth-h128", "gqa-rotary-bias-softcap", "attn-3d-mask-softcap",
        "attn-f16-past-causal-qk3", "attn24-nonpad-floatmask"])
def test_node_config_probes_pass_on_cpu_and_separate(tmp_path, model):
    """Each knock-out is its own probe through the runner and classifier: CPU passes them
    all (the references agree with ORT's CPU kernels at the model's own settings)."""
    onnx.save(model, tmp_path / "m.onnx")
    groups = plan(list(read(tmp_path / "m.onnx").nodes), generic=False)
    assert len(groups) == 1 and groups[0].skipped == ()
    features = list(groups[0].features)
    assert len(features) >= 2
    result = run_audit(parse(MATRIX.format(extra=""), "m.toml"), features=features, gate=False)
    outcomes = {fid: c.outcome for (fid, _), c in result.results.items()}
    assert set(outcomes.values()) == {Outcome.PASS}, {f: (c.outcome, c.summary) for (f, _), c in result.results.items()}


def test_a_knockout_that_cannot_separate_is_reported_not_run(tmp_path):
    onnx.save(sm.gqa_node(local_window_size=4000), tmp_path / "m.onnx")
    groups = plan(list(read(tmp_path / "m.onnx").nodes), generic=False)
    assert "window" not in groups[0].parts.values()
    assert any(s.startswith("window:") for s in groups[0].skipped)


# --------------------------------------------------------------------------- verdicts through real EPs


def test_silently_wrong_ep_found_through_the_nodes(models, tmp_path):
    out = tmp_path / "scan.json"
    r = invoke("scan", str(models / "decoder.onnx"), "--matrix", _matrix(tmp_path, _broken("ignore")),
               "--format", "json", "--output", str(out))
    assert r.exit_code == 1, r.output
    doc = json.loads(out.read_text())
    (model,) = doc["models"]
    eps = {e["ep"]: e for e in model["eps"]}
    assert eps["CPU"]["verdict"] in (Verdict.EXPECTED.value, Verdict.PARTLY.value) and eps["CPU"]["gaps"] == []
    assert eps["BROKEN"]["verdict"] == Verdict.SILENT.value
    gaps = {g["feature"]: g for g in eps["BROKEN"]["gaps"]}
    softcap = gaps["gqa.softcap"]
    assert softcap["outcome"] == "IGNORED" and softcap["count"] == 2
    assert softcap["nodes"] == [GQA.format(0), GQA.format(1)]
    assert softcap["declared"] == "unsupported until 2099-01-01"
    assert softcap["issue"] == "https://github.com/microsoft/onnxruntime/issues/29506"
    gqa_probes = {c["config"]: c for c in model["node_configs"]
                  if c["operator"] == "com.microsoft.GroupQueryAttention"}
    (config,) = gqa_probes.values()
    node_parts = {config["probes"][g["feature"]]: g["outcome"] for g in gaps.values() if g["feature"] in config["probes"]}
    assert node_parts == dict.fromkeys(["config", "past", "attention_bias", "softcap", "rotary", "position_ids"],
                                       "IGNORED")
    # Every other node's own-configuration probe reads IGNORED too (the control's graph ran).
    generic = [g for g in gaps.values() if g["feature"].startswith("node.") and g["feature"] not in config["probes"]]
    assert generic and {g["outcome"] for g in generic} == {"IGNORED"}


def test_refused_is_a_failure_only_on_a_required_ep(models, tmp_path):
    m = _matrix(tmp_path, _broken("refuse"))
    r = invoke("scan", str(models / "o23.onnx"), "--matrix", m)
    assert r.exit_code == 0, r.output
    assert "BROKEN  would be refused" in r.output and "REJECTED" in r.output
    assert "model.layers.0.self_attn/Attention" in r.output
    # The closing line agrees with the verdicts it stands on.
    assert r.output.strip().splitlines()[-1].startswith("exit 0: no model is silently wrong")
    assert "1 would be refused" in r.output.strip().splitlines()[-1]
    r = invoke("scan", str(models / "o23.onnx"), "--matrix", m, "--require", "BROKEN", "--format", "markdown")
    assert r.exit_code == 1
    assert "| o23.onnx" in r.output.replace("\\", "") or "o23" in r.output
    assert "would be refused" in r.output


def test_required_ep_not_live_is_exit_3(models, tmp_path):
    m = _matrix(tmp_path, '[providers.GONE]\nname = "CUDAExecutionProvider"\n')
    r = invoke("scan", str(models / "o23.onnx"), "--matrix", m, "--ep", "GONE", "--require", "GONE")
    assert r.exit_code == 3, r.output
    assert "GONE  not checked (not live)" in r.output and "GONE: not live: " in r.output


def test_saved_results_fleet_files(models, tmp_path):
    """Outcomes from saved reports (no probing): the catalog features are judged, the
    node-config probes are said not to be run."""
    saved = tmp_path / "broken.json"
    r = invoke("probe", "--ep", "BROKEN", "--matrix", _matrix(tmp_path, _broken("ignore")),
               "--feature", "gqa.*", "--json", str(saved))
    r = invoke("scan", str(models / "decoder.onnx"), "--matrix", _matrix(tmp_path, _broken("ignore")),
               "--results", str(saved), "--format", "json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.output)
    assert doc["source"] == f"saved results: {saved}"
    assert any("node-config" in n for n in doc["notes"])
    (ep,) = doc["models"][0]["eps"]
    assert ep["ep"] == "BROKEN" and ep["verdict"] == Verdict.SILENT.value
    assert {g["feature"] for g in ep["gaps"]} >= {"gqa.softcap", "gqa.attention_bias", "gqa.position_ids"}
    assert not any(g["feature"].startswith("node.") for g in ep["gaps"])


def test_a_model_no_probe_covers_is_not_a_pass(models, tmp_path):
    r = invoke("scan", str(models / "vision.onnx"), "--matrix", _matrix(tmp_path), "--no-node-probes")
    assert r.exit_code == 0
    assert "CPU  partly checked (0 of 5 compute nodes probed)" in r.output


def test_a_model_whose_compute_nodes_are_not_all_probed_is_partly_checked(models, tmp_path):
    """The vision model's function-body nodes are typed from the call site, but the If
    output's shape is unknown: what cannot be probed in its own configuration keeps the
    verdict at "partly checked (k of n compute nodes probed)", never "as expected"."""
    r = invoke("scan", str(models / "vision.onnx"), "--matrix", _matrix(tmp_path), "--format", "json")
    doc = json.loads(r.output)
    (m,) = doc["models"]
    (cpu,) = m["eps"]
    # Conv, Relu, Resize and the function body's Mul and Add (the If, the Identity and the
    # function call compute nothing of their own).
    assert m["compute_nodes"] == 5 and cpu["probed_nodes"] == m["probed_nodes"] == 3
    assert cpu["verdict_text"] == "partly checked (3 of 5 compute nodes probed)"
    assert r.exit_code == 0


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("content", [b"not a model at all\n", b"", b"\x08\x07\x12\x03abc"])
def test_a_file_that_is_not_a_model_is_one_line_exit_2(tmp_path, content):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(content)
    r = invoke("scan", str(bad), "--matrix", _matrix(tmp_path))
    assert r.exit_code == 2
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "Traceback" not in r.output


def test_missing_model_and_directory_exit_2(tmp_path):
    for path in (tmp_path / "nope.onnx", tmp_path):
        r = invoke("scan", str(path), "--matrix", _matrix(tmp_path))
        assert r.exit_code == 2 and str(path) in r.output and len(r.output.strip().splitlines()) == 1


# --------------------------------------------------------------------------- the catalog's uses


def test_hand_written_uses_name_real_inputs_attributes_and_known_facts():
    """Every condition a GQA or Attention feature states names an input or attribute of
    the operator's schema (at the feature's opset) or a fact the scan reader computes:
    a misspelt name would never match a node, and the feature would never be used."""
    from epaudit.catalog.attention import FEATURES as ATTENTION
    from epaudit.catalog.gqa import FEATURES as GQA_FEATURES
    from epaudit.scan.match import KNOWN_FACTS
    from epaudit.scan.schemas import schema

    for f in GQA_FEATURES + ATTENTION:
        s = schema(f.op_type, f.domain, f.opset)
        assert s is not None, f.id
        for name in f.uses.inputs + f.uses.absent:
            assert name in s.optional, (f.id, name)
        for name in f.uses.attributes:
            # a required attribute (num_heads) is named by the features that vary it
            assert name in s.defaults or name in s.required, (f.id, name)
        assert set(f.uses.facts) <= KNOWN_FACTS, f.id


def test_operator_itself_features_are_one_per_dtype():
    """A feature with no condition claims every node of its operator and dtype: two such
    features of one operator and dtype would be a feature that does not say when it is used."""
    from epaudit.catalog.attention import FEATURES as ATTENTION
    from epaudit.catalog.gqa import FEATURES as GQA_FEATURES
    from epaudit.contract.probes import Use

    bare = [(f.op_type, f.dtype) for f in GQA_FEATURES + ATTENTION if f.uses == Use()]
    assert len(bare) == len(set(bare)), bare


# --------------------------------------------------------------------------- the real WebGPU EP


@pytest.mark.integration
def test_webgpu_softcap_and_position_ids_found_through_the_nodes(models):
    """onnxruntime-webgpu 1.27.0 (lavapipe) ignores GQA softcap and position_ids (README,
    tests/test_real_eps.py): the scan of a GenAI-builder decoder names the layers' GQA nodes."""
    import os

    from epaudit.matrix.load import load
    from epaudit.scan import scan

    if not os.environ.get("EPAUDIT_WEBGPU_PYTHON"):
        if os.environ.get("EPAUDIT_INTEGRATION") == "required":
            pytest.fail("$EPAUDIT_WEBGPU_PYTHON is not set: .ci/run must build the WebGPU environment")
        pytest.skip("$EPAUDIT_WEBGPU_PYTHON is not set: run `epaudit env create webgpu` and export it")
    matrix = load(None)
    result = scan([str(models / "decoder.onnx")], matrix, providers=[matrix.providers["WebGPU"]], timeout=60.0)
    (verdict,) = result.models[0].eps
    assert verdict.live and verdict.verdict is Verdict.SILENT
    gaps = {g.feature: g for g in verdict.gaps}
    for fid in ("gqa.softcap", "gqa.position_ids"):
        assert gaps[fid].outcome is Outcome.IGNORED, (fid, gaps[fid].summary)
        assert gaps[fid].nodes == (GQA.format(0), GQA.format(1))
    node_position_ids = [g for f, g in gaps.items() if f.startswith("node.") and f.endswith(".position_ids")]
    assert [g.outcome for g in node_position_ids] == [Outcome.IGNORED]
    assert result.exit_code == 1


def test_features_of_other_catalogs_match_by_their_uses(models):
    """A generated feature (as another catalog would declare it) covers what its ``uses``
    names, and an operator definition newer than its probes' is listed as uncovered."""
    from epaudit.contract.probes import Feature, Use

    def never():  # pragma: no cover - mapping never builds a probe
        raise AssertionError("not built by mapping")

    resize_linear = Feature("resize.mode.linear", "Resize", "", 11, "float32", "mode=linear vs nearest",
                            "onnx Resize-11", never, uses=Use(inputs=("scales",), attributes={"mode": "linear"}))
    resize_aa = Feature("resize.antialias", "Resize", "", 18, "float32", "antialias=1 vs 0", "onnx Resize-18",
                        never, uses=Use(attributes={"antialias": 1}))
    m = read(models / "vision.onnx")
    used, _, uncovered = analyse(m, [resize_linear, resize_aa], node_probes=False)
    # The model imports opset 21, where Resize-19 is in force; the probes are of Resize-11
    # and Resize-18: neither outcome is borrowed for this node.
    assert used == {}
    items = {u.item for u in uncovered if u.operator == "ai.onnx.Resize"}
    assert "no probe at Resize-19 (probes at Resize-11, Resize-18)" in items, items
    # Stamped at the node's version, the same features are used.
    at19 = [Feature(f.id, f.op_type, f.domain, 19, f.dtype, f.changes, f.source, f.build, f.uses)
            for f in (resize_linear, resize_aa)]
    used, _, uncovered = analyse(m, at19, node_probes=False)
    assert used == {"resize.mode.linear": ["/neck/Resize"], "resize.antialias": ["/neck/Resize"]}
    assert not {u.item for u in uncovered if u.operator == "ai.onnx.Resize"}
