"""The activations/math contrib catalog through epaudit itself on the real CPU EP: the gate
over every feature (``epaudit check --ep CPU``), and the self-test's faults caught on one
feature of every operator (the whole catalog's self-test is tests/test_selftest.py; the
page docs/contrib-activations-math.md quotes the CLI run over all 191 features).
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from epaudit.catalog import activations_math
from epaudit.catalog.variants import VARIANT_OF
from epaudit.cli import main
from epaudit.contract.outcomes import Outcome
from epaudit.matrix.load import load
from epaudit.run.faults import EXPECTED, not_applicable
from epaudit.run.selftest import FAULTS, cpu_skips, run_selftest

FEATURES = activations_math.FEATURES
PATTERNS = sorted({f.id.split(".")[0] + ".*" for f in FEATURES})
CPU_REFUSES = {"fusedgemm.no_activation", "convtransposewithdynamicpads.no_pads", "cdist.metric.cityblock",
               "causalconvwithstate.state_window"}
#: The operator globs select the float16 variants of these features too (epaudit/catalog/variants.py):
#: those of refused bases are refused as well, UnfoldTensor's kernel computes no float16, and
#: Gelu, FastGelu and QuickGelu have float kernels only, so ORT inlines their function bodies.
VARIANTS = {v for v, b in VARIANT_OF.items() if b in {f.id for f in FEATURES}}
CPU_REFUSES_F16 = {f"{b}.float16" for b in CPU_REFUSES} & VARIANTS | {
    "unfoldtensor.basic.float16", "unfoldtensor.step.float16", "unfoldtensor.dim.float16"}
CPU_DECOMPOSES_F16 = {"gelu.basic.float16", "fastgelu.basic.float16", "fastgelu.bias.float16",
                      "quickgelu.basic.float16", "quickgelu.alpha.float16"}


def test_cpu_gate_passes_over_every_feature(tmp_path):
    args = ["check", "--ep", "CPU"] + [a for p in PATTERNS for a in ("--feature", p)]
    out = tmp_path / "cpu.json"
    r = CliRunner().invoke(main, args + ["--format", "json", "--output", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output[-3000:]
    report = json.loads(out.read_text())
    cells = {c["feature"]: c for c in report["results"]}
    assert set(cells) == {f.id for f in FEATURES} | VARIANTS
    matrix = load(None)
    for fid, c in cells.items():
        declared = matrix.declaration(fid, "CPU").status
        if fid in CPU_REFUSES | CPU_REFUSES_F16:
            assert c["outcome"] == "REJECTED" and declared == "unsupported", (fid, c["summary"])
        elif fid in CPU_DECOMPOSES_F16:
            assert c["outcome"] == "DECOMPOSED" and declared == "unsupported", (fid, c["summary"])
        else:
            assert c["outcome"] == "PASS" and declared == "supported", (fid, c["summary"])
    assert not [f for f in report["findings"] if f["failing"]]


def test_selftest_catches_every_applicable_fault_on_one_feature_per_operator():
    first = {}
    for f in FEATURES:
        if f.id not in CPU_REFUSES:
            first.setdefault(f.op_type, f)
    chosen = list(first.values())
    assert len(chosen) == 37
    r = run_selftest(chosen, skip=cpu_skips(load(None)))
    assert r.misses == () and r.exit_code == 0
    for f in chosen:
        assert r.clean[f.id].got is Outcome.PASS, (f.id, r.clean[f.id].summary)
        probe = f.build()
        # An integer-only probe is typed by its integer output (epaudit/catalog/_xcase.py).
        integer_only = probe.dtype.startswith(("int", "uint"))
        for fault in FAULTS:
            d = r.cells[(f.id, fault)]
            if fault == "nan" and not_applicable("nan", probe):
                # Integer outputs (hashes, ids, uint8 pools) cannot hold a NaN: the only
                # fault that does not apply, and only there.
                assert integer_only and not d.applies, f.id
                continue
            if fault.startswith("decompose") and not d.applies:
                # ORT refused the node inside the function wrapper (UnfoldTensor's shape
                # inference in 1.31.1): never committed, and the cell says so.
                assert d.summary.startswith(("not applicable: ORT refused the node wrapped in a function",
                                              "not applicable: ORT crashed on the node wrapped in a function")), (f.id, d)
                continue
            assert d.applies and d.got is EXPECTED[fault] and d.detected, (f.id, fault, d.summary)
