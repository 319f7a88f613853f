"""Glob feature keys in the matrix (``[features."onnx.Resize.*"]``): which cell applies,
the errors a glob can make, the gate rules through globs (real probes where an outcome
is needed), and ``bless`` writing exact-id cells where a glob is contradicted.

Precedence (``epaudit/matrix/globs.py``): an exact id beats every glob, per EP; between
globs, more literal characters, then a longer literal prefix; equal on both is an error.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import textwrap

import pytest
from click.testing import CliRunner
from conftest import TODAY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epaudit.audit import run
from epaudit.catalog import BY_ID
from epaudit.cli import main
from epaudit.contract.outcomes import FindingKind, Outcome
from epaudit.contract.results import Classified, EPInfo
from epaudit.gate.rules import apply
from epaudit.matrix.load import parse
from epaudit.matrix.model import MatrixError
from epaudit.saved import bless

IDS = ["onnx.Resize.cubic_coeff_a.test_resize_cubic", "onnx.Resize.mode.test_resize_cubic",
       "onnx.Resize.mode.test_resize_linear", "onnx.Relu.x.test_relu",
       "attention.mask.bool", "attention.mask.float", "attention.basic"]
HEAD = textwrap.dedent('''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    gated = ["CUDA"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.CUDA]
    name = "CUDAExecutionProvider"
    ''')  # 8 lines: the first feature table is line 9
GAP = '{ status = "unsupported", issue = "https://example.org/1", until = 2027-01-01 }'


def matrix(cells: str, ids=IDS):
    return parse(HEAD + textwrap.dedent(cells), "m.toml", feature_ids=ids)


def err(cells: str, ids=IDS) -> MatrixError:
    with pytest.raises(MatrixError) as info:
        matrix(cells, ids)
    return info.value


def where(m, fid, alias):
    d = m.declaration(fid, alias)
    return None if d is None else (d.status, d.key, d.line)


# ----------------------------------------------------------------------------- precedence
def test_exact_id_beats_glob_per_ep():
    m = matrix(f'''\
        [features."onnx.Resize.*"]
        CPU = "supported"
        CUDA = {GAP}
        [features."onnx.Resize.mode.test_resize_cubic"]
        CUDA = "supported"
        ''')
    cubic = "onnx.Resize.mode.test_resize_cubic"
    # CUDA from the exact key (line 13), CPU still from the glob (line 10): per cell, not per table
    assert where(m, cubic, "CUDA") == ("supported", cubic, 13)
    assert where(m, cubic, "CPU") == ("supported", "onnx.Resize.*", 10)
    assert where(m, "onnx.Resize.mode.test_resize_linear", "CUDA") == ("unsupported", "onnx.Resize.*", 11)
    assert m.declaration("onnx.Relu.x.test_relu", "CPU") is None
    assert m.line_of(cubic, "CUDA") == 13 and m.line_of(cubic, "CPU") == 10
    assert m.line_of(cubic) == 12  # the exact table
    assert m.line_of("onnx.Resize.mode.test_resize_linear") == 9  # the glob's table
    assert [t.glob.key for t in m.globs] == ["onnx.Resize.*"] and len(m.globs[0].matched) == 3


def test_more_literal_characters_win_then_longer_prefix():
    m = matrix(f'''\
        [features."*"]
        CPU = "supported"
        [features."onnx.*"]
        CPU = {GAP}
        [features."onnx.Resize.*.test_resize_cubic"]
        CPU = "supported"
        [features."attention.*.bool"]
        CUDA = "supported"
        [features."attention.mask.*"]
        CUDA = {GAP}
        ''')
    assert where(m, "attention.basic", "CPU") == ("supported", "*", 10)
    assert where(m, "onnx.Relu.x.test_relu", "CPU")[:2] == ("unsupported", "onnx.*")
    assert where(m, "onnx.Resize.mode.test_resize_cubic", "CPU")[:2] == ("supported", "onnx.Resize.*.test_resize_cubic")
    assert where(m, "onnx.Resize.mode.test_resize_linear", "CPU")[:2] == ("unsupported", "onnx.*")
    # 15 literal characters each; the literal prefix decides: 'attention.mask.' (15) > 'attention.' (10)
    assert where(m, "attention.mask.bool", "CUDA")[:2] == ("unsupported", "attention.mask.*")
    assert where(m, "attention.mask.float", "CUDA")[:2] == ("unsupported", "attention.mask.*")


def test_a_less_specific_glob_fills_the_eps_a_more_specific_one_leaves_out():
    m = matrix(f'''\
        [features."attention.*"]
        CPU = "supported"
        CUDA = "supported"
        [features."attention.mask.*"]
        CUDA = {GAP}
        ''')
    assert where(m, "attention.mask.bool", "CPU")[:2] == ("supported", "attention.*")
    assert where(m, "attention.mask.bool", "CUDA")[:2] == ("unsupported", "attention.mask.*")


def test_tie_between_equally_specific_globs_names_both_lines():
    e = err('''\
        [features."attention.*.bool"]
        CPU = "supported"
        [features."attention.*ask.b*"]
        CPU = "supported"
        ''')
    assert (e.key, e.line) == ('features."attention.*ask.b*"', 11)
    assert 'ties with features."attention.*.bool" (line 9) on attention.mask.bool for CPU' in str(e)
    assert str(e).startswith("m.toml:11: ") and len(str(e).splitlines()) == 1
    # Declaring different EPs is no tie; an exact key settles the tied cell.
    matrix('[features."attention.*.bool"]\nCPU = "supported"\n[features."attention.*ask.b*"]\nCUDA = "supported"\n')
    m = matrix('[features."attention.*.bool"]\nCPU = "supported"\n[features."attention.*ask.b*"]\nCPU = "supported"\n'
               f'[features."attention.mask.bool"]\nCPU = {GAP}\n')
    assert where(m, "attention.mask.bool", "CPU")[:2] == ("unsupported", "attention.mask.bool")


@pytest.mark.parametrize("key, hint", [
    ("onnx.Resise.*", "did you mean 'onnx.Resize.*'?"),
    ("onnx.resize.*", "did you mean 'onnx.Resize.*'?"),
    ("atention.mask.*", "did you mean 'attention.mask.*'?"),
    ("gqa.*", None),
])
def test_a_glob_matching_nothing_is_an_error_with_its_line(key, hint):
    e = err(f'[features."attention.basic"]\nCPU = "supported"\n[features."{key}"]\nCPU = "supported"\n')
    assert (e.key, e.line) == (f'features."{key}"', 11)
    assert "glob matches no feature of the catalog" in str(e) and str(e).startswith("m.toml:11: ")
    assert (hint in str(e)) if hint else ("did you mean" not in str(e))


def test_glob_cells_are_validated_like_exact_ones():
    e = err('[features."attention.*"]\nCPU = "supported"\nCUDE = "supported"\n')
    assert (e.key, e.line) == ('features."attention.*".CUDE', 11) and "did you mean 'CUDA'" in str(e)
    e = err('[features."attention.*"]\nCUDA = { status = "broken" }\n')
    assert (e.key, e.line) == ('features."attention.*".CUDA.status', 10)


def test_an_id_with_a_wildcard_character_is_exact_and_a_plain_unknown_key_is_an_unknown_id():
    m = matrix('[features."op.[1]"]\nCPU = "supported"\n', ids=["op.[1]", "op.1"])
    assert m.declaration("op.[1]", "CPU") is not None and m.declaration("op.1", "CPU") is None
    e = err('[features."attention.masks"]\nCPU = "supported"\n')
    assert "unknown feature id 'attention.masks', did you mean 'attention.mask.bool'" in str(e)


def test_cli_glob_error_is_one_line_exit_2(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text(HEAD + '[features."gqa.sofcap*"]\nCPU = "supported"\n')
    r = CliRunner().invoke(main, ["check", "--matrix", str(path), "--ep", "CPU"])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
    assert r.output == (f'epaudit: error: {path}:9: features."gqa.sofcap*": glob matches no feature of the '
                        "catalog, did you mean 'gqa.softcap*'? (see `epaudit features`)\n")


# ----------------------------------------------------------------------------- property
segment = st.sampled_from(["a", "b", "ab", "*", "?", "a*", "*b", "?b"])
patterns = st.lists(segment, min_size=1, max_size=3).map(".".join)
ids_strategy = st.lists(st.lists(st.sampled_from(["a", "b", "ab", "ba", "abb"]), min_size=1, max_size=3)
                        .map(".".join), min_size=1, max_size=8, unique=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ids_strategy, st.lists(st.tuples(patterns, st.sampled_from(["CPU", "CUDA"])), min_size=1, max_size=5,
                               unique_by=lambda t: t[0]), st.data())
def test_resolution_matches_a_brute_force_reading_of_the_rule(ids, globs, data):
    """Each cell is the exact key's, else the glob declaring that EP with the most
    literal characters, then the longest literal prefix; a tie there is an error, a glob
    matching nothing is an error. Computed here independently of matrix_globs."""
    exact = data.draw(st.lists(st.sampled_from(ids), max_size=2, unique=True))
    keys = [(g, alias) for g, alias in globs if g not in ids and any(ch in g for ch in "*?")]
    text = "".join(f'[features."{g}"]\n{a} = "supported"\n' for g, a in keys)
    text += "".join(f'[features."{fid}"]\nCPU = {GAP}\n' for fid in exact)

    def spec(g):  # literal characters, literal prefix length
        return (sum(ch not in "*?" for ch in g), next((i for i, ch in enumerate(g) if ch in "*?"), len(g)))

    problem = None
    if any(not any(fnmatch.fnmatchcase(f, g) for f in ids) for g, _ in keys):
        problem = "matches no feature"
    want = {}
    for fid in ids:
        for alias in ("CPU", "CUDA"):
            if fid in exact and alias == "CPU":
                want[(fid, alias)] = fid
                continue
            cands = [g for g, a in keys if a == alias and fnmatch.fnmatchcase(fid, g)]
            if not cands:
                continue
            best = max(spec(g) for g in cands)
            top = [g for g in cands if spec(g) == best]
            if len(top) > 1:
                problem = problem or "ties"
            want[(fid, alias)] = top[0]
    try:
        m = parse(HEAD + text, "m.toml", feature_ids=ids)
    except MatrixError as exc:
        assert problem is not None, exc
        assert ("matches no feature" in str(exc)) or ("ties with" in str(exc) and problem == "ties"), exc
        return
    assert problem is None
    got = {(fid, a): m.declaration(fid, a).key for fid in ids for a in ("CPU", "CUDA")
           if m.declaration(fid, a) is not None}
    assert got == want


# ----------------------------------------------------------------------------- gate rules
def eps(**live):
    return {a: EPInfo(a, f"{a}ExecutionProvider", v, reason="" if v else "not here") for a, v in live.items()}


def outcome(fid, alias, o):
    return {(fid, alias): Classified(fid, alias, o, "why")}


def test_gate_rules_through_globs_name_the_glob_line():
    m = matrix(f'''\
        [features."attention.*"]
        CPU = "supported"
        CUDA = {GAP}
        [features."attention.mask.*"]
        CUDA = {{ status = "unsupported", until = 2026-01-01 }}
        [features."onnx.*"]
        CPU = "supported"
        ''')
    res = {**outcome("attention.basic", "CPU", Outcome.PASS), **outcome("attention.basic", "CUDA", Outcome.PASS),
           **outcome("attention.mask.bool", "CPU", Outcome.PASS),
           **outcome("attention.mask.bool", "CUDA", Outcome.REJECTED),
           **outcome("onnx.Relu.x.test_relu", "CPU", Outcome.PASS),
           **outcome("onnx.Relu.x.test_relu", "CUDA", Outcome.REJECTED)}
    g = apply(m, eps(CPU=True, CUDA=True), res, ["attention.basic", "attention.mask.bool", "onnx.Relu.x.test_relu"],
              today=TODAY)
    got = {(f.kind, f.feature_id, f.ep, f.failing, f.line) for f in g.findings}
    assert got == {
        (FindingKind.STALE, "attention.basic", "CUDA", True, 11),            # glob gap, PASS
        (FindingKind.UNGOVERNED, "attention.mask.bool", "CUDA", True, 13),   # narrower glob, no issue
        (FindingKind.EXPIRED, "attention.mask.bool", "CUDA", True, 13),
        (FindingKind.LAG, "attention.mask.bool", "CUDA", True, 13),          # an ungoverned gap does not excuse lag
        (FindingKind.LAG, "onnx.Relu.x.test_relu", "CUDA", True, 14),        # undeclared on CUDA: lag...
        (FindingKind.UNDECLARED, "onnx.Relu.x.test_relu", "CUDA", False, 14),  # ...and a warning (the glob's table)
    }
    strict = apply(m, eps(CPU=True, CUDA=True), res, ["onnx.Relu.x.test_relu"], strict=True, today=TODAY)
    assert any(f.kind is FindingKind.UNDECLARED and f.failing for f in strict.findings)


def test_silent_outcome_under_a_glob_declaring_supported_fails_with_real_probes(broken):
    """A real run: BROKEN is the CPU EP with its inputs dropped from the graph."""
    m = broken("ignore", '[features."gqa.softcap*"]\nCPU = "supported"\nBROKEN = "supported"\n')
    feats = [BY_ID["gqa.softcap"], BY_ID["gqa.softcap.with_bias"]]
    line = next(t.line for t in m.globs) + 2  # the BROKEN cell
    result = run(m, features=feats, today=TODAY)
    silent = {(f.feature_id, f.line) for f in result.gate.findings if f.kind is FindingKind.SILENT and f.failing}
    assert silent == {(f.id, line) for f in feats}
    assert {result.results[(f.id, "BROKEN")].outcome for f in feats} == {Outcome.IGNORED}
    assert result.declared[("gqa.softcap", "BROKEN")] == "supported" and result.gate.exit_code == 1


# ----------------------------------------------------------------------------- bless
BLESS = textwrap.dedent(f'''\
    schema_version = 1
    [gate]
    reference = ["CPU"]
    [providers.CPU]
    name = "CPUExecutionProvider"
    [providers.BROKEN]
    name = "CPUExecutionProvider"
    inject_fault = "refuse"

    # every softcap feature, one line each
    [features."gqa.softcap*"]
    BROKEN = "supported"  # believed to work
    CPU = {GAP}
    ''')  # the gap ends the file with 'until = … }': tomlkit would drop that space


def test_bless_writes_exact_cells_where_a_glob_is_contradicted():
    """Real probes: CPU passes (the glob's gap is stale), BROKEN refuses (the glob's
    'supported' is wrong): two exact cells for the probed feature, the glob left as it
    was and still deciding for the feature that was not probed."""
    m = parse(BLESS, "m.toml")
    result = run(m, features=[BY_ID["gqa.softcap"]], gate=False)
    p = bless.plan(m, BLESS, result, today=dt.date(2026, 11, 29))
    assert {(e.feature_id, e.alias, e.after) for e in p.edits} == {
        ("gqa.softcap", "CPU", "supported"), ("gqa.softcap", "BROKEN", "unsupported")}
    assert {e.alias: e.before for e in p.edits} == {
        "CPU": "unsupported https://example.org/1 until 2027-01-01 (glob 'gqa.softcap*', line 13)",
        "BROKEN": "supported (glob 'gqa.softcap*', line 12)"}
    assert p.new_text.startswith(BLESS)  # nothing above is touched, byte for byte: the glob, its comments
    assert p.new_text.endswith("\n")
    new = parse(p.new_text, "m.toml")
    cpu, gap = new.declaration("gqa.softcap", "CPU"), new.declaration("gqa.softcap", "BROKEN")
    assert (cpu.status, cpu.key) == ("supported", "gqa.softcap")
    assert (gap.status, gap.key, gap.issue) == ("unsupported", "gqa.softcap", "") and "REJECTED" in gap.reason
    assert new.declaration("gqa.softcap.with_bias", "BROKEN").key == "gqa.softcap*"
    # Blessing again from the same observations changes nothing.
    assert bless.plan(new, p.new_text, result, today=dt.date(2026, 11, 29)).edits == ()


def test_bless_leaves_a_glob_that_matches_what_was_seen():
    text = BLESS.replace(f"CPU = {GAP}", 'CPU = "supported"').replace('BROKEN = "supported"', f"BROKEN = {GAP}")
    m = parse(text, "m.toml")
    result = run(m, features=[BY_ID["gqa.softcap"]], gate=False)
    p = bless.plan(m, text, result)
    assert p.edits == () and p.new_text == text
