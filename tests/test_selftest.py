"""`epaudit selftest`: every probe of the catalog catches every fault, and a blind probe fails it.

Real ORT sessions on the CPU EP, one worker per fault (``epaudit/run/selftest.py``).
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from epaudit.catalog import BY_ID, FEATURES
from epaudit.cli import main
from epaudit.contract.outcomes import Outcome
from epaudit.contract.probes import Feature, Probe
from epaudit.matrix.load import load
from epaudit.report.selftest import format as format_selftest
from epaudit.run.faults import EXPECTED, not_applicable
from epaudit.run.selftest import FAULTS, cpu_skips, run_selftest


@pytest.fixture(scope="module")
def whole_catalog():
    return run_selftest(FEATURES, skip=cpu_skips(load(None)))


def test_selftest_passes_over_the_whole_catalog(whole_catalog):
    r = whole_catalog
    assert r.misses == () and r.exit_code == 0
    assert r.faults == FAULTS and set(FAULTS) == set(EXPECTED) and "unwritten" in FAULTS
    cpu = load(None)
    for fid in r.features:
        clean = r.clean[fid]
        declared = cpu.declaration(fid, "CPU").status
        # Every feature CPU is declared to support passes clean, and every fault is caught
        # with exactly its outcome; the others are loud refusals with no fault applied.
        if declared == "supported":
            assert clean.got is Outcome.PASS, (fid, clean.summary)
            probe = BY_ID[fid].build()
            for fault in FAULTS:
                d = r.cells[(fid, fault)]
                if fault == "nan" and not_applicable("nan", probe):
                    # Integer-only outputs cannot hold a NaN: the fault is not committed, and
                    # says why, instead of passing as caught.
                    assert not d.applies, (fid, fault)
                    continue
                if fault.startswith("decompose") and not d.applies:
                    # ORT refused the node inside the function wrapper: never committed, said so.
                    assert d.summary.startswith("not applicable: ORT refused the node wrapped in a function"), (fid, d)
                    continue
                assert d.applies and d.got is EXPECTED[fault] and d.detected, (fid, fault, d.summary)
        else:
            # A loud refusal, or a known CPU deviation the matrix skips (not run).
            want = {Outcome.SKIPPED} if declared == "skip" else {Outcome.REJECTED, Outcome.DECOMPOSED}
            assert clean.got in want and clean.detected, fid
            assert not any(r.cells[(fid, f)].applies for f in FAULTS)
    text = format_selftest(r)
    assert "selftest: PASS" in text and "MISS" not in text
    applicable = sum(1 for d in r.cells.values() if d.applies)
    assert f"{applicable} of {applicable} applicable" in text


def _blind_feature() -> Feature:
    """A probe whose control is its subject: an EP that ignores the feature would pass."""
    real = BY_ID["gqa.softcap"]

    def build() -> Probe:
        p = real.build()
        return Probe("test.blind", p.subject, p.subject, p.tolerance, p.dtype)
    return Feature("test.blind", real.op_type, real.domain, real.opset, real.dtype,
                   "subject == control", "test", build)


def test_selftest_fails_when_a_probe_is_blind():
    """A probe whose control equals its subject is refused before it runs (probeset.ProbeSet),
    so the self-test cannot count it as catching anything and names it."""
    r = run_selftest([_blind_feature(), BY_ID["gqa.softcap"]], faults=("ignore", "nan"))
    assert r.exit_code == 1
    assert [(d.feature_id, d.fault, d.got) for d in r.misses] == [("test.blind", "clean", Outcome.ERROR)]
    assert r.cells[("gqa.softcap", "ignore")].got is Outcome.IGNORED
    text = format_selftest(r)
    assert "MISS test.blind × clean run: expected PASS, got ERROR — blind probe" in text
    assert "selftest: FAIL" in text and "(exit 1)" in text


def test_kill_and_hang_need_the_workers_marker():
    """A timeout or crash counts only when the worker reports the injected fault fired."""
    from epaudit.contract.results import Classified
    from epaudit.run.selftest import _fault_detection

    clean = Classified("f", "CPU", Outcome.PASS)
    slow = Classified("f", "CPU+hang", Outcome.TIMEOUT, "no answer", evidence={"detail": "x"})
    fired = Classified("f", "CPU+hang", Outcome.TIMEOUT, "no answer",
                       evidence={"stderr": "epaudit-fault: hang after session creation"})
    assert not _fault_detection("f", "hang", clean, slow).detected
    assert _fault_detection("f", "hang", clean, fired).detected


def test_cli_selftest_exit_0_and_table():
    r = CliRunner().invoke(main, ["selftest", "--feature", "gqa.head_sink"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "gqa.head_sink" in r.output and "✓ UNWRITTEN" in r.output and "✓ TIMEOUT" in r.output
    assert "selftest: PASS: 11 of 11 applicable" in r.output and "✓ DECOMPOSED" in r.output


def test_unknown_fault_is_refused():
    with pytest.raises(KeyError, match="unknown fault 'melt'"):
        run_selftest([BY_ID["gqa.softcap"]], faults=("melt",))


def test_a_selftest_that_proves_nothing_does_not_pass():
    """Found by a fresh user: a feature the CPU EP refuses has no applicable fault, and
    '0 of 0 caught' must not read as PASS."""
    r = run_selftest([BY_ID["attention.dtype.bfloat16"]], faults=("nan",))
    assert not any(d.applies for d in r.cells.values())
    assert r.exit_code == 1 and "selftest: NOTHING PROVEN" in format_selftest(r)


def test_selftest_table_in_a_file_keeps_every_column_whole():
    """Written to a pipe or a CI log, a generated id of ~90 characters squeezed every fault
    column to '✓ …' at the old fixed 160 columns."""
    from epaudit.contract.outcomes import Outcome
    from epaudit.report.selftest import format as format_selftest
    from epaudit.run.faults import EXPECTED
    from epaudit.run.selftest import Detection, SelftestResult

    fid = "onnx.Attention.qk_matmul_output_mode.attention_4d_with_past_and_present_qk_matmul_bias_3d.opset23"
    faults = tuple(EXPECTED)
    cells = {(fid, f): Detection(fid, f, EXPECTED[f], EXPECTED[f], True, "") for f in faults}
    result = SelftestResult((fid,), faults, {fid: Detection(fid, "clean", Outcome.PASS, Outcome.PASS, True, "")},
                            cells)
    text = format_selftest(result)
    row = next(line for line in text.splitlines() if fid in line)
    for f in faults:
        assert f"✓ {EXPECTED[f].value}" in row, row
    assert "…" not in row
