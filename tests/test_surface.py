"""The surface (registered kernels x operator schemas), its coverage, and the claims audit
(registered x claimed x observed), through real onnxruntime sessions and registries."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import TODAY, make_matrix

from epaudit.audit import run
from epaudit.catalog.models import one_node_model
from epaudit.cli import main
from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.probes import NON_DEFAULT, TOLERANCES, Case, Feature, Probe, Use
from epaudit.gate.claims import attach, findings
from epaudit.matrix.model import Provider
from epaudit.surface import kernels as surface
from epaudit.surface.coverage import coverage, surface_items

CPU = Provider("CPU", "CPUExecutionProvider")


@pytest.fixture(scope="session")
def cpu_registry(tmp_path_factory):
    """The CPU EP's registry, read once per test session (a throw-away process, ~0.5 s)."""
    reg = surface.fetch(CPU, str(tmp_path_factory.mktemp("surface-cache")))
    assert reg.status == "kernels", reg.reason
    return reg


def _feature(fid, op, domain, opset, dtype, uses=Use()):
    return Feature(fid, op, domain, opset, dtype, "test", "test", lambda: None, uses=uses)


def test_cpu_registry_matches_what_field_notes_measured(cpu_registry):
    reg = cpu_registry
    assert reg.provider == "CPUExecutionProvider" and len(reg.kernels) > 1000
    # docs/ort-facts.md: CPU GQA float and float16, no bfloat16; ONNX Attention opsets 23 and
    # 24; float64 Attention is inlined.
    assert reg.registers("com.microsoft", "GroupQueryAttention", 1, "float16") is True
    assert reg.registers("com.microsoft", "GroupQueryAttention", 1, "float32") is True
    assert reg.registers("com.microsoft", "GroupQueryAttention", 1, "bfloat16") is False
    assert reg.registers("", "Attention", 23, "float32") is True
    assert reg.registers("ai.onnx", "Attention", 24, "float16") is True
    assert reg.registers("", "Attention", 23, "float64") is False
    # The "since 24" kernel is listed as 24..INT_MAX; ORT 1.32 has an Attention-25 schema it
    # does not serve (docs/ort-facts.md: inlined), while a build whose newest schema is 24 runs
    # an opset-25 node as version 24.
    newest = reg.versions("", "Attention")[-1][2]
    assert reg.registers("", "Attention", 25, "float32") is (newest == 24)
    # A feature's dtype is its float type, not always the first input's: GatherBlockQuantized's
    # first input is uint8/int4 data (T1), its floats are T2 (float, float16 on CPU).
    assert reg.registers("com.microsoft", "GatherBlockQuantized", 1, "float32") is True
    assert reg.registers("com.microsoft", "GatherBlockQuantized", 1, "float64") is False
    # Sequence kernels list their element type wrapped (SequenceInsert S: seq(tensor(float)));
    # a float32 sequence probe is registered (it read "unregistered" before), a string one not.
    assert reg.registers("", "SequenceInsert", 21, "float32") is True
    assert reg.registers("", "SequenceLength", 21, "int64") is True
    assert reg.registers("", "SequenceInsert", 21, "float8e4m3fn") is False
    # The schema in effect at an opset is the newest version at or below it.
    assert reg.schema_at("", "Attention", 24)[2] == 24 and reg.schema_at("", "Attention", 22) is None


def test_a_kernel_serves_schema_versions_by_orts_rule():
    """kernel_registry.cc VerifyKernelDef: start == since, or a versioned range holding it."""
    assert surface.serves(("", "X", 24, surface.OPEN, {}), 24)
    assert not surface.serves(("", "X", 24, surface.OPEN, {}), 25)  # open-ended: its first version only
    assert surface.serves(("", "X", 6, 12, {}), 11) and surface.serves(("", "X", 6, 12, {}), 6)
    assert not surface.serves(("", "X", 6, 12, {}), 13) and not surface.serves(("", "X", 7, 12, {}), 6)


def test_the_ml_domain_is_on_the_surface(cpu_registry):
    """ai.onnx.ml (issue 28): what skl2onnx writes is part of the CPU EP's surface, its
    types and attributes items like any operator's."""
    items = surface_items(cpu_registry)
    ml = {op for dom, op in items if dom == "ai.onnx.ml"}
    assert {"TreeEnsembleClassifier", "TreeEnsembleRegressor", "LinearClassifier", "Scaler",
            "SVMClassifier", "ArrayFeatureExtractor", "LabelEncoder"} <= ml
    tree = items[("ai.onnx.ml", "TreeEnsembleRegressor")]
    newest = tree[max(tree)]
    assert ("type", "tensor(float)") in newest and ("type", "tensor(double)") in newest
    assert ("attribute", "nodes_featureids") in newest
    assert coverage(cpu_registry, [])["by_operator"][0]["covered"] == 0


def test_surface_items_join_kernels_with_schemas(cpu_registry):
    items = surface_items(cpu_registry)
    gqa = items[("com.microsoft", "GroupQueryAttention")]
    assert set(gqa) == {1}
    assert ("input", "attention_bias") in gqa[1] and ("attribute", "softcap") in gqa[1]
    assert {n for k, n in gqa[1] if k == "type"} == {"tensor(float)", "tensor(float16)"}
    assert ("input", "query") not in gqa[1]  # required inputs are not surface items
    # Attention: schema versions 23 and 24 are served, 25 (no kernel) is not.
    assert set(items[("", "Attention")]) == {23, 24}
    assert ("input", "nonpad_kv_seqlen") in items[("", "Attention")][24]
    assert ("input", "nonpad_kv_seqlen") not in items[("", "Attention")][23]


def test_type_items_are_the_types_a_valid_node_of_the_version_can_have(cpu_registry):
    """The CPU EP registers one Cast kernel over versions 6-8 with the types of later versions
    too (float8, int4); Cast-6's schema allows none of them: not items of version 6. Where's
    items are its X's types (the first input whose parameter has more than one type), not
    its bool condition's."""
    items = surface_items(cpu_registry)
    cast6 = {n for k, n in items[("", "Cast")][6] if k == "type"}
    kernel6 = {t for k in cpu_registry.kernels_of("", "Cast") if k[2] <= 6 <= k[3] for t in cpu_registry.types(k, "T1")}
    assert "tensor(float8e4m3fn)" in kernel6 and "tensor(float8e4m3fn)" not in cast6
    assert {"tensor(float)", "tensor(int8)", "tensor(bool)"} <= cast6
    where = {n for k, n in items[("", "Where")][16] if k == "type"}
    assert {"tensor(float)", "tensor(int64)", "tensor(uint8)"} <= where


def test_a_feature_covers_what_its_use_names_where_a_kernel_is_registered(cpu_registry):
    bias = _feature("t.bias", "GroupQueryAttention", "com.microsoft", 1, "float16", Use(inputs=("attention_bias",)))
    softcap = _feature("t.softcap", "GroupQueryAttention", "com.microsoft", 1, "float32",
                       Use(attributes={"softcap": NON_DEFAULT}))
    bf16 = _feature("t.bf16", "GroupQueryAttention", "com.microsoft", 1, "bfloat16", Use(inputs=("head_sink",)))
    f64 = _feature("t.a64", "Attention", "", 23, "float64", Use(inputs=("attn_mask",)))
    cov = coverage(cpu_registry, [bias, softcap, bf16, f64], covered_by=True)
    row = next(r for r in cov["by_operator"] if r["operator"] == "com.microsoft.GroupQueryAttention")
    assert row["covered_by"] == {"1:type:tensor(float16)": ["t.bias"], "1:input:attention_bias": ["t.bias"],
                                 "1:type:tensor(float)": ["t.softcap"], "1:attribute:softcap": ["t.softcap"]}
    assert row["covered"] == 4 and "1:input:head_sink" in row["uncovered"]  # bfloat16: no kernel
    attention = next(r for r in cov["by_operator"] if r["operator"] == "ai.onnx.Attention")
    assert attention["covered"] == 0  # float64 has no CPU kernel: nothing of it is exercised
    assert cov["covered"] == 4 and cov["probed"] == 1
    assert cov["items"] == sum(r["items"] for r in cov["by_operator"]) > 1000
    # Sorted most-uncovered first.
    gaps = [r["items"] - r["covered"] for r in cov["by_operator"]]
    assert gaps == sorted(gaps, reverse=True)


def test_registry_answers_come_from_the_cache_the_second_time(tmp_path):
    first = surface.fetch(CPU, str(tmp_path))
    surface._memo.clear()
    second = surface.fetch(CPU, str(tmp_path))
    assert not first.cached and second.cached
    assert second.kernels == first.kernels and second.schemas == first.schemas
    assert len(list(tmp_path.glob("registry-*.json"))) == 1


def test_a_segfault_in_the_registry_query_is_contained(tmp_path):
    """A SIGSEGV in the EP's interpreter is a reason, never a crash of epaudit."""
    # An onnxruntime whose schema query segfaults, first on the EP interpreter's path.
    capi = tmp_path / "site" / "onnxruntime" / "capi"
    capi.mkdir(parents=True)
    (capi.parent / "__init__.py").write_text("__version__ = '0'\n")
    (capi / "__init__.py").write_text("")
    (capi / "onnxruntime_pybind11_state.py").write_text(
        "def get_all_operator_schema():\n    import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)\n")
    p = Provider("SEGV", "CPUExecutionProvider", env={"PYTHONPATH": str(tmp_path / "site")})
    reg = surface.fetch(p, str(tmp_path / "cache"))
    assert reg.status == "unknown"
    assert "killed by SIGSEGV in get_all_operator_schema" in reg.reason and "contained" in reg.reason
    assert coverage(reg, [])["status"] == "unknown"
    # The crash is this build's answer now: the next process reads it instead of crashing.
    surface._memo.clear()
    again = surface.fetch(p, str(tmp_path / "cache"))
    assert again.cached and again.status == "unknown"
    assert "killed by SIGSEGV" in again.reason and "earlier run" in again.reason


def test_cuda_registry_in_the_gpu_wheel_is_read_or_its_crash_reported(tmp_path):
    """docs/ort-facts.md: get_all_opkernel_def segfaults in the GPU wheel without a GPU."""
    reg = surface.fetch(Provider("CUDA", "CUDAExecutionProvider"), str(tmp_path))
    if reg.status == "kernels":  # a machine with the GPU
        assert reg.registers("com.microsoft", "GroupQueryAttention", 1, "float16") is True
    else:
        assert reg.status == "unknown" and reg.reason
        assert "SIGSEGV in get_all_opkernel_def" in reg.reason or "CUDA" in reg.reason


def _reshape_feature(fid="t.reshape.refused"):
    """Reshape (CPU kernel registered) to a shape of another size: the EP takes the node,
    then refuses it at run time."""
    model = one_node_model("Reshape", "", 14, [("data", "float32", [2, 3]), ("shape", "int64", [2])],
                           [("reshaped", "float32")])
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    subject = Case(model, {"data": data, "shape": np.array([4, 4], np.int64)}, ("reshaped",),
                   {"reshaped": np.zeros((4, 4))})
    control = Case(model, {"data": data, "shape": np.array([3, 2], np.int64)}, ("reshaped",),
                   {"reshaped": data.reshape(3, 2).astype(np.float64)})
    return Feature(fid, "Reshape", "", 14, "float32", "shape of another size", "test",
                   lambda: Probe(fid, subject, control, TOLERANCES["float32"], "float32"))


def _claims(result):
    return [(f.kind, f.feature_id, f.ep, f.failing) for f in result.gate.findings
            if f.kind in (FindingKind.REFUSED, FindingKind.UNCLAIMED, FindingKind.UNREGISTERED)]


def test_registered_and_claimed_but_refused_is_a_warning_unless_strict():
    m = make_matrix("", gate='reference = ["CPU"]')
    feature = _reshape_feature()
    result = run(m, features=[feature], today=TODAY)
    c = result.results[(feature.id, "CPU")]
    assert c.outcome is Outcome.REJECTED  # never turned into anything else
    assert c.evidence["layers"] == {"operator": "ai.onnx.Reshape", "opset": 14, "dtype": "float32",
                                    "registered": True, "claimed": True, "observed": "REJECTED"}
    assert _claims(result) == [(FindingKind.REFUSED, feature.id, "CPU", False)]
    assert result.gate.exit_code == 0 and "warning" in result.gate.verdict
    # --strict: the same cells, the claim finding now fails the gate.
    from epaudit.gate.rules import verdict

    strict = findings(result.results, result.eps, result.declared, strict=True)
    assert [(f.kind, f.failing) for f in strict] == [(FindingKind.REFUSED, True)]
    assert verdict(strict).exit_code == 1


def test_registered_but_placed_elsewhere_is_unclaimed(broken):
    """The fallback fault: the session asks for CUDA, ORT places the node on CPU."""
    from epaudit.catalog import BY_ID

    feature = BY_ID["gqa.prompt"]
    result = run(broken("fallback"), features=[feature], today=TODAY)
    ok = result.results[(feature.id, "CPU")]
    assert ok.outcome is Outcome.PASS
    assert ok.evidence["layers"]["registered"] is True and ok.evidence["layers"]["claimed"] is True
    bad = result.results[(feature.id, "BROKEN")]
    assert bad.outcome is Outcome.FALLBACK
    assert bad.evidence["layers"]["registered"] is True and bad.evidence["layers"]["claimed"] is False
    assert (FindingKind.UNCLAIMED, feature.id, "BROKEN", False) in _claims(result)
    assert not any(ep == "CPU" for _, _, ep, _ in _claims(result))
    # Coverage rides along: both columns are the CPU EP, the feature covers its dtype.
    assert result.coverage["CPU"]["covered"] >= 1 and result.coverage["BROKEN"]["status"] == "kernels"


def test_claimed_but_not_registered_against_a_registry_without_the_kernel(cpu_registry):
    """A real CPU session took the node; a registry variant without GQA kernels (as an EP
    whose registry does not document a kernel it runs) makes that an unregistered claim."""
    from epaudit.catalog import BY_ID

    feature = BY_ID["gqa.prompt"]
    m = make_matrix("", gate='reference = ["CPU"]')
    result = run(m, features=[feature], today=TODAY, gate=False)
    undocumented = dataclasses.replace(
        cpu_registry, kernels=tuple(k for k in cpu_registry.kernels if k[1] != "GroupQueryAttention"), _index={})
    again = attach(result, [m.providers["CPU"]], [feature], registries={"CPU": undocumented})
    c = again.results[(feature.id, "CPU")]
    assert c.outcome is Outcome.PASS
    assert c.evidence["layers"]["registered"] is False and c.evidence["layers"]["claimed"] is True
    got = findings(again.results, again.eps, {}, strict=False)
    assert [(f.kind, f.failing) for f in got] == [(FindingKind.UNREGISTERED, False)]
    assert findings(again.results, again.eps, {}, strict=True)[0].failing


def test_json_report_carries_layers_and_coverage_and_reads_back(tmp_path):
    from epaudit.report import FORMATS
    from epaudit.saved.read import load

    m = make_matrix("", gate='reference = ["CPU"]')
    result = run(m, features=[_reshape_feature()], today=TODAY)
    path = tmp_path / "r.json"
    path.write_text(FORMATS["json"](result))
    doc = json.loads(path.read_text())
    assert doc["coverage"]["CPU"]["status"] == "kernels" and doc["coverage"]["CPU"]["covered"] == 1
    assert doc["results"][0]["evidence"]["layers"]["claimed"] is True
    back = load(path)
    assert back.coverage["CPU"]["covered"] == 1
    assert FindingKind.REFUSED in {f.kind for f in back.gate.findings}
    # A report written before coverage existed still loads.
    del doc["coverage"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    assert load(old).coverage == {}
    assert "coverage CPU: 1/" in FORMATS["table"](result)


def test_surface_and_observed_page_commands(tmp_path):
    runner = CliRunner()
    out = tmp_path / "s.json"
    r = runner.invoke(main, ["surface", "--ep", "CPU", "--format", "json", "--output", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    cpu = data["eps"]["CPU"]
    assert cpu["status"] == "kernels" and cpu["items"] > 1000 and cpu["operators"] > 100
    assert cpu["covered"] > 0  # the shipped catalog probes GQA and Attention on CPU
    m = make_matrix("", gate='reference = ["CPU"]')
    saved = tmp_path / "run.json"
    from epaudit.report import FORMATS

    saved.write_text(FORMATS["json"](run(m, features=[_reshape_feature()], today=TODAY)))
    r = runner.invoke(main, ["surface", "--observed", str(tmp_path / "run*.json"), "--format", "markdown"])
    assert r.exit_code == 0, r.output
    assert "| `ai.onnx.Reshape` | opsets " in r.output
    row = next(line for line in r.output.splitlines() if line.startswith("| `ai.onnx.Reshape`"))
    # probed 1, claimed 1, passed 0; no type working, float32 registered and never passing
    assert row.endswith("| 1 | 1 | 0 | REJECTED 1 | — | float32 | — |"), row
    r = runner.invoke(main, ["surface", "--observed", str(tmp_path / "nothing*.json")])
    assert r.exit_code == 2 and "matches no file" in r.output


def test_open_ended_kernels_with_a_newer_unserved_schema_are_listed(cpu_registry):
    """An open-ended kernel ("since 24") with a schema 25 no kernel serves: the registry
    reads "24+", ORT runs 24 only (microsoft/onnxruntime#23452)."""
    from epaudit.surface.coverage import unserved

    extra = ("", "Attention", 25, False, "T1", ("attn_mask",), ("scale",))
    newer = dataclasses.replace(cpu_registry, schemas=cpu_registry.schemas + (extra,), _index={})
    assert "ai.onnx.Attention: listed 24+, schema 25 not served" in unserved(newer)
    assert newer.registers("", "Attention", 25, "float32") is False
    assert 25 not in surface_items(newer)[("", "Attention")]
