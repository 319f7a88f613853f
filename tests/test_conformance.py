"""`epaudit conformance`: real ONNX backend cases on the real CPU EP, judged by the skip gate.

The cases are generated once per test session from the installed onnx into a temporary
cache (``backend_cases``). Every test runs a handful of them through real ORT sessions;
the broken variants are the CPU EP with a fault injected (``epaudit/run/faults.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from epaudit.catalog.corpus.cases import ConformanceError, load_cases, onnx_version
from epaudit.cli import main
from epaudit.conformance.run import run
from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.probes import Tolerance
from epaudit.matrix.load import load, parse

TODAY = dt.date(2026, 11, 29)
#: Passes on CPU (onnxruntime-gpu 1.31.1, onnx 1.23.2).
GOOD = "test_attention_4d"
#: Fails on CPU: ORT refuses an attn_mask shorter than total_sequence_length (#27542).
BAD = "test_attention_4d_diff_heads_mask4d_padded_kv"


def matrix(skips: str = "", providers: str = ""):
    text = textwrap.dedent('''\
        schema_version = 1
        [gate]
        reference = ["CPU"]
        gated = ["CUDA"]
        [providers.CPU]
        name = "CPUExecutionProvider"
        [providers.CUDA]
        name = "CUDAExecutionProvider"
        ''') + textwrap.dedent(providers) + "\n" + textwrap.dedent(skips)
    return parse(text, "conf.toml", feature_ids=[])


def skip(ep: str, test: str, until: str = "2027-06-30", extra: str = "") -> str:
    return (f'[[conformance.skip]]\nep = "{ep}"\ntest = "{test}"\n'
            f'issue = "https://github.com/microsoft/onnxruntime/pull/27542"\nuntil = {until}\n{extra}')


def conformance(m, backend_cases, cases=(GOOD, BAD), eps=("CPU",), **kw):
    providers = [m.providers[a] for a in eps]
    return run(m, providers=providers, patterns=cases, cases=backend_cases, today=TODAY, **kw)


def kinds(result, ep=None):
    return {(f.kind, f.feature_id) for f in result.gate.findings if f.failing and (ep is None or f.ep == ep)}


def test_cases_are_generated_from_onnx_and_cached_by_version(backend_cases, cache_dir):
    names = [c.id for c in backend_cases]
    assert len(names) == len(set(names)) and GOOD in names and f"{GOOD}_expanded" in names
    assert {c.op_type for c in backend_cases} == {"Attention"}
    assert (cache_dir / f"onnx-{onnx_version()}").is_dir()
    again = load_cases(["Attention"], cache_dir)  # read back from the cache, not regenerated
    assert [c.id for c in again] == names
    case = {c.id: c for c in again}[GOOD]
    assert case.probe.control is None and case.probe.node_name == "probe"
    assert case.probe.tolerance == Tolerance(atol=1e-7, rtol=1e-3)  # onnx's backend-test defaults
    assert {c.id: c for c in again}[f"{GOOD}_expanded"].probe.node_name is None
    bf16 = {c.id: c for c in again}["test_attention_4d_causal_bf16"].probe
    assert bf16.tolerance.rtol == 2.0 ** -6 and bf16.subject.feeds["Q"].dtype == np.float32


def test_unknown_operator_is_a_clear_error(cache_dir):
    with pytest.raises(ConformanceError, match="no backend node test case for op 'GroupQueryAttention'"):
        load_cases(["GroupQueryAttention"], cache_dir)


def test_shipped_matrix_passes_on_cpu_with_its_real_skip_entries(backend_cases):
    """The default matrix accounts for every CPU failure of this onnxruntime, and nothing else."""
    m = load(None)
    r = run(m, providers=[m.providers["CPU"]], cases=backend_cases, today=TODAY)
    assert r.gate.exit_code == 0, [f.message for f in r.gate.findings]
    counts = r.conformance.summary["CPU"]
    assert counts["fail"] == 0 and counts["pass"] > 50 and counts["gap"] >= 1
    assert counts["pass"] + counts["gap"] == len(r.features) == sum(not c.expanded for c in backend_cases)
    # The real gap: CPU refuses the shorter mask loudly, and it is declared with its upstream link.
    c = r.results[(BAD, "CPU")]
    assert c.outcome is Outcome.REJECTED
    assert "inconsistent total_sequence_length" in c.evidence["error"]["message"]
    assert r.declared[(BAD, "CPU")].startswith("xfail https://github.com/microsoft/onnxruntime/pull/27542")
    # -inf in the reference is not matched by ORT's lowest float: a real mismatch, accounted for.
    c = r.results[("test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal", "CPU")]
    assert c.outcome is Outcome.MISMATCH and c.evidence["comparison"]["qk_matmul_output"]["bad"] > 0
    for s in m.skips:
        assert s.governed and s.issue.startswith("https://github.com/") and s.until > TODAY, s


def test_failing_case_without_skip_fails_the_run(backend_cases):
    r = conformance(matrix(), backend_cases)
    assert r.results[(GOOD, "CPU")].outcome is Outcome.PASS
    assert kinds(r) == {(FindingKind.REGRESSION, BAD)}
    assert r.gate.exit_code == 1
    assert r.conformance.summary["CPU"] == {"pass": 1, "fail": 1, "gap": 0, "unavailable": 0}


def test_skipped_failing_case_is_an_accounted_gap(backend_cases):
    r = conformance(matrix(skip("CPU", BAD)), backend_cases)
    assert r.gate.exit_code == 0 and kinds(r) == set()
    assert r.conformance.summary["CPU"] == {"pass": 1, "fail": 0, "gap": 1, "unavailable": 0}


def test_stale_skip_fails_the_run(backend_cases):
    """Strict xfail: a skipped case that passes means the gap is fixed."""
    r = conformance(matrix(skip("CPU", BAD) + skip("CPU", GOOD)), backend_cases)
    assert r.results[(GOOD, "CPU")].outcome is Outcome.PASS
    assert kinds(r) == {(FindingKind.STALE, GOOD)}
    assert r.gate.exit_code == 1


def test_expired_skip_fails_the_run(backend_cases):
    r = conformance(matrix(skip("CPU", BAD, until="2026-01-31")), backend_cases)
    assert kinds(r) == {(FindingKind.EXPIRED, BAD)}
    assert r.gate.exit_code == 1
    f = [f for f in r.gate.findings if f.kind is FindingKind.EXPIRED][0]
    assert f.line == 10 and "2026-01-31" in f.message


def test_skip_for_cuda_never_hides_the_case_on_cpu(backend_cases):
    r = conformance(matrix(skip("CUDA", BAD)), backend_cases, eps=("CPU", "CUDA"))
    assert not r.eps["CUDA"].live
    assert r.results[(BAD, "CUDA")].outcome is Outcome.UNAVAILABLE
    assert kinds(r, "CPU") == {(FindingKind.REGRESSION, BAD)}
    assert r.declared[(BAD, "CPU")] == "supported" and r.declared[(BAD, "CUDA")].startswith("xfail")
    assert r.gate.exit_code == 1


def test_skip_entry_hygiene_ungoverned_dead_overbroad(backend_cases):
    entries = (skip("CPU", BAD).replace("until = 2027-06-30\n", "")
               + skip("CPU", "test_attention_no_such_case")
               + skip("CPU", "test_attention_4d_with_*", extra="max_matches = 2\n"))
    r = conformance(matrix(entries), backend_cases)
    assert kinds(r) == {(FindingKind.UNGOVERNED, BAD), (FindingKind.DEAD, "test_attention_no_such_case"),
                        (FindingKind.OVERBROAD, "test_attention_4d_with_*")}
    overbroad = r.conformance.skips[2]
    assert len(overbroad["matches"]) > 2 and not any(n.endswith("_expanded") for n in overbroad["matches"])


@pytest.mark.parametrize("fault, outcome, kind", [
    ("nan", Outcome.NAN, FindingKind.SILENT),
    ("perturb", Outcome.MISMATCH, FindingKind.SILENT),
    ("fallback", Outcome.FALLBACK, FindingKind.REGRESSION),
    ("refuse", Outcome.REJECTED, FindingKind.REGRESSION),
])
def test_broken_ep_never_passes_a_case(backend_cases, fault, outcome, kind):
    m = matrix(providers=f'[providers.BROKEN]\nname = "CPUExecutionProvider"\ninject_fault = "{fault}"\n')
    r = conformance(m, backend_cases, cases=(GOOD,), eps=("CPU", "BROKEN"))
    assert r.results[(GOOD, "CPU")].outcome is Outcome.PASS
    assert r.results[(GOOD, "BROKEN")].outcome is outcome
    assert kinds(r, "BROKEN") == {(kind, GOOD)}


def test_expanded_case_is_judged_as_a_whole_graph(backend_cases):
    m = matrix(providers='[providers.BROKEN]\nname = "CPUExecutionProvider"\ninject_fault = "fallback"\n')
    r = conformance(m, backend_cases, cases=(f"{GOOD}_expanded",), eps=("CPU", "BROKEN"), expanded=True)
    ok = r.results[(f"{GOOD}_expanded", "CPU")]
    assert ok.outcome is Outcome.PASS and len(ok.evidence["placement"]) > 10  # the function body ran
    assert r.results[(f"{GOOD}_expanded", "BROKEN")].outcome is Outcome.FALLBACK


def test_expanded_cases_are_off_by_default(backend_cases):
    with pytest.raises(ConformanceError, match="add --expanded"):
        conformance(matrix(), backend_cases, cases=(f"{GOOD}_expanded",))


def test_ignore_fault_is_refused_without_a_control(backend_cases):
    m = matrix(providers='[providers.BROKEN]\nname = "CPUExecutionProvider"\ninject_fault = "ignore"\n')
    with pytest.raises(ConformanceError, match="no control model"):
        conformance(m, backend_cases, eps=("BROKEN",))


def test_tolerance_never_matches_a_finite_value_to_an_infinity():
    tol = Tolerance(atol=1e-7, rtol=1e-3)
    lowest = np.finfo(np.float32).min
    assert tol.close(np.array([lowest, -np.inf, 1.0]), np.array([-np.inf, -np.inf, 1.0])).tolist() == [False, True, True]


# --------------------------------------------------------------------------- CLI
def test_cli_conformance_exit_codes_and_json(tmp_path, cache_dir, backend_cases, monkeypatch):
    monkeypatch.setenv("EPAUDIT_CACHE_DIR", str(cache_dir))
    m = tmp_path / "m.toml"
    m.write_text(textwrap.dedent('''\
        schema_version = 1
        [providers.CPU]
        name = "CPUExecutionProvider"
        ''') + skip("CPU", BAD))
    out = tmp_path / "r.json"
    args = ["conformance", "--matrix", str(m), "--case", GOOD, "--case", BAD]
    r = CliRunner().invoke(main, args + ["--format", "json", "--output", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(out.read_text())
    assert report["conformance"]["summary"]["CPU"] == {"pass": 1, "fail": 0, "gap": 1, "unavailable": 0}
    assert report["conformance"]["skips"][0]["matches"] == [BAD]
    m.write_text(m.read_text().replace("2027-06-30", "2020-01-01"))
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and "expired" in r.output and "CPU: 1 pass, 0 fail, 1 gap" in r.output
    r = CliRunner().invoke(main, args + ["--op", "NoSuchOp"])
    assert r.exit_code == 2 and "no backend node test case for op 'NoSuchOp'" in r.output


def test_cli_matrix_error_in_a_skip_entry_names_key_and_line(tmp_path):
    m = tmp_path / "m.toml"
    m.write_text('schema_version = 1\n[providers.CPU]\nname = "CPUExecutionProvider"\n\n'
                 '[[conformance.skip]]\nep = "CPU"\ntest = "test_attention_*"\n')
    r = CliRunner().invoke(main, ["conformance", "--matrix", str(m)])
    assert r.exit_code == 2
    assert r.output.strip() == (f"epaudit: error: {m}:7: conformance.skip[0].test: glob 'test_attention_*' "
                                "needs max_matches (the most cases it may match)")
