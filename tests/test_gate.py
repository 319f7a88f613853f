"""Gate rules 1-8 and the exit-code precedence, each on a tiny matrix."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.results import Classified, EPInfo
from epaudit.gate.rules import apply
from epaudit.matrix.load import parse

IDS = ["f.one", "f.two"]
TODAY = dt.date(2026, 11, 29)


def matrix(cells: str, gate: str = 'reference = ["CPU"]\ngated = ["CUDA"]'):
    text = textwrap.dedent('''\
        schema_version = 1
        [gate]
        {gate}
        [providers.CPU]
        name = "CPUExecutionProvider"
        [providers.CUDA]
        name = "CUDAExecutionProvider"
        [providers.WebGPU]
        name = "WebGpuExecutionProvider"
        ''').format(gate=gate) + textwrap.dedent(cells)
    return parse(text, "m.toml", feature_ids=IDS)


def eps(**live):
    return {a: EPInfo(a, f"{a}ExecutionProvider", v, reason="" if v else "not here") for a, v in live.items()}


def res(**cells):
    out = {}
    for key, outcome in cells.items():
        fid, alias = key.split("__")
        out[(fid.replace("_", "."), alias)] = Classified(fid.replace("_", "."), alias, Outcome[outcome], "why")
    return out


def kinds(g):
    """Findings as tuples, without the never-failing ``not-audited`` note a run without
    the gated CUDA carries (tests/test_gate_honesty.py holds that rule)."""
    return sorted((f.kind.value, f.feature_id, f.ep, f.failing) for f in g.findings
                  if f.kind is not FindingKind.NOT_AUDITED)


GAP = '{ status = "unsupported", issue = "https://x/1", until = 2027-01-01 }'


def test_all_pass_exit_0():
    m = matrix('[features."f.one"]\nCPU = "supported"\nCUDA = "supported"\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA="PASS"), ["f.one"], today=TODAY)
    assert g.exit_code == 0 and g.findings == () and g.verdict == "PASS"


def test_regression_declared_supported_not_pass():
    m = matrix('[features."f.one"]\nCPU = "supported"\n')
    g = apply(m, eps(CPU=True), res(f_one__CPU="REJECTED"), ["f.one"], today=TODAY)
    assert kinds(g) == [("regression", "f.one", "CPU", True)] and g.exit_code == 1


@pytest.mark.parametrize("outcome", ["IGNORED", "UNWRITTEN", "NAN", "MISMATCH"])
def test_silent_on_any_ep_whatever_declared(outcome):
    m = matrix(f'[features."f.one"]\nCPU = "supported"\nCUDA = {GAP}\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA=outcome), ["f.one"], today=TODAY)
    assert kinds(g) == [("silent", "f.one", "CUDA", True)] and g.exit_code == 1


def test_lag_gated_fails_where_reference_passes_and_no_governed_gap():
    m = matrix('[features."f.one"]\nCPU = "supported"\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA="REJECTED"), ["f.one"], today=TODAY)
    assert ("lag", "f.one", "CUDA", True) in kinds(g) and g.exit_code == 1


def test_governed_gap_is_accounted_not_lag():
    m = matrix(f'[features."f.one"]\nCPU = "supported"\nCUDA = {GAP}\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA="REJECTED"), ["f.one"], today=TODAY)
    assert kinds(g) == [] and g.exit_code == 0


def test_lag_needs_a_live_reference_pass_and_parity_all():
    m = matrix('[features."f.one"]\nCPU = "supported"\nWebGPU = "supported"\n',
               gate='reference = ["CPU", "WebGPU"]\ngated = ["CUDA"]\nparity = "all"')
    r = res(f_one__CPU="PASS", f_one__WebGPU="REJECTED", f_one__CUDA="REJECTED")
    g = apply(m, eps(CPU=True, WebGPU=True, CUDA=True), r, ["f.one"], today=TODAY)
    assert not [k for k in kinds(g) if k[0] == "lag"]  # WebGPU does not pass: no bar under "all"
    g_any = apply(matrix('[features."f.one"]\nCPU = "supported"\nWebGPU = "supported"\n',
                         gate='reference = ["CPU", "WebGPU"]\ngated = ["CUDA"]'),
                  eps(CPU=True, WebGPU=True, CUDA=True), r, ["f.one"], today=TODAY)
    assert ("lag", "f.one", "CUDA", True) in kinds(g_any)


def test_stale_gap_that_passes():
    m = matrix(f'[features."f.one"]\nCPU = "supported"\nCUDA = {GAP}\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA="PASS"), ["f.one"], today=TODAY)
    assert kinds(g) == [("stale", "f.one", "CUDA", True)] and g.exit_code == 1


def test_ungoverned_and_expired():
    m = matrix('[features."f.one"]\nCPU = "supported"\nCUDA = { status = "unsupported", until = 2026-01-01 }\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA="REJECTED"), ["f.one"], today=TODAY)
    got = kinds(g)
    assert ("ungoverned", "f.one", "CUDA", True) in got and ("expired", "f.one", "CUDA", True) in got
    # An ungoverned gap does not excuse a lag either.
    assert ("lag", "f.one", "CUDA", True) in got


def test_undeclared_warns_unless_strict():
    m = matrix('[features."f.one"]\nCPU = "supported"\n')
    r = res(f_one__CPU="PASS", f_two__CPU="PASS")
    g = apply(m, eps(CPU=True), r, ["f.one", "f.two"], today=TODAY)
    assert kinds(g) == [("undeclared", "f.two", "CPU", False)] and g.exit_code == 0
    g = apply(m, eps(CPU=True), r, ["f.one", "f.two"], strict=True, today=TODAY)
    assert kinds(g) == [("undeclared", "f.two", "CPU", True)] and g.exit_code == 1


def test_incomplete_exit_3_and_failing_wins():
    m = matrix('[features."f.one"]\nCPU = "supported"\nCUDA = "supported"\n')
    r = res(f_one__CPU="PASS", f_one__CUDA="UNAVAILABLE")
    g = apply(m, eps(CPU=True, CUDA=False), r, ["f.one"], require=["CUDA"], today=TODAY)
    assert kinds(g) == [("incomplete", "", "CUDA", True)] and g.exit_code == 3
    # Unavailable is never a regression or a lag, but a gated EP that was not audited
    # leaves the verdict incomplete unless the run allows it to be absent.
    g = apply(m, eps(CPU=True, CUDA=False), r, ["f.one"], today=TODAY)
    assert kinds(g) == [("incomplete", "", "CUDA", True)] and g.exit_code == 3
    g = apply(m, eps(CPU=True, CUDA=False), r, ["f.one"], today=TODAY, allow_absent=["CUDA"])
    assert g.exit_code == 0 and g.verdict == "PASS; not audited: CUDA (not live, allowed absent)"
    r2 = res(f_one__CPU="NAN", f_one__CUDA="UNAVAILABLE")
    g = apply(m, eps(CPU=True, CUDA=False), r2, ["f.one"], require=["CUDA"], today=TODAY)
    assert g.exit_code == 1 and {f.kind for f in g.findings} == {FindingKind.SILENT, FindingKind.INCOMPLETE}


@pytest.mark.parametrize("outcome, kind", [("CRASH", "crash"), ("TIMEOUT", "timeout"), ("ERROR", "error")])
def test_process_failures_fail_even_on_a_declared_gap(outcome, kind):
    m = matrix(f'[features."f.one"]\nCPU = "supported"\nCUDA = {GAP}\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS", f_one__CUDA=outcome), ["f.one"], today=TODAY)
    assert kinds(g) == [(kind, "f.one", "CUDA", True)] and g.exit_code == 1


def test_require_from_matrix_gate_table():
    m = matrix('[features."f.one"]\nCPU = "supported"\n', gate='reference = ["CPU"]\nrequire = ["CUDA"]')
    g = apply(m, eps(CPU=True, CUDA=False), res(f_one__CPU="PASS"), ["f.one"], today=TODAY)
    assert g.exit_code == 3 and g.findings[0].line == 7


def test_interrupted_run_is_incomplete_unless_a_failing_finding_is_known():
    m = matrix('[features."f.one"]\nCPU = "supported"\nCUDA = "supported"\n')
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS"), ["f.one"], today=TODAY, unfinished=1)
    assert kinds(g) == [("incomplete", "", "", True)] and g.exit_code == 3
    assert g.verdict == "INCOMPLETE: run interrupted: 1 probe(s) did not finish"
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="NAN"), ["f.one"], today=TODAY, unfinished=1)
    assert g.exit_code == 1 and "run interrupted: 1 probe(s) did not finish" in g.verdict
    g = apply(m, eps(CPU=True, CUDA=True), res(f_one__CPU="PASS"), ["f.one"], today=TODAY)
    assert g.exit_code == 0


def test_a_run_where_no_ep_was_live_is_incomplete_never_a_pass():
    """Found by a fresh user: `check --ep CUDA` on a machine without CUDA read PASS, exit 0,
    with zero probes run. A verdict without evidence is INCOMPLETE (exit 3)."""
    from conftest import make_matrix

    from epaudit.audit import run
    from epaudit.catalog import BY_ID

    m = make_matrix('[providers.GONE]\nname = "CPUExecutionProvider"\npython = "$EPAUDIT_TEST_UNSET_PY"\n'
                    'if_unset = "unavailable"\n', gate='reference = ["CPU"]')
    result = run(m, providers=[m.providers["GONE"]], features=[BY_ID["gqa.softcap"]], today=TODAY)
    assert result.gate.exit_code == 3
    assert result.gate.verdict.startswith("INCOMPLETE: no EP was live: nothing was probed (GONE: "
                                          "$EPAUDIT_TEST_UNSET_PY is not set")
    result = run(m, features=[BY_ID["gqa.softcap"]], today=TODAY)  # CPU live beside it
    assert result.gate.exit_code == 0
