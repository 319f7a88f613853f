"""Bad results files never break the gate: a property-based fuzzer over saved reports.

Mutations of a real saved report (values replaced by other JSON values, keys deleted,
text truncated or spliced, random bytes) either load or raise :class:`SavedError` with
one line naming the file; through ``epaudit check --results`` they give exit 0, 1, 2 or
3, a one-line ``epaudit: error: …`` on exit 2, and never a traceback.
"""

from __future__ import annotations

import copy
import json
import os

import numpy as np

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epaudit.cli import main
from epaudit.contract.outcomes import Outcome
from epaudit.saved.read import SavedError, load

FUZZ = settings(max_examples=int(os.environ.get("EPAUDIT_FUZZ_EXAMPLES", "60")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**70, max_value=2**70),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=12)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    """A real report: two features on the CPU EP, as `epaudit probe --json` writes it."""
    path = tmp_path_factory.mktemp("saved") / "cpu.json"
    r = CliRunner().invoke(main, ["probe", "--ep", "CPU", "--feature", "gqa.softcap", "--feature",
                                  "attention.dtype.bfloat16", "--json", str(path)])
    assert r.exit_code == 0, r.output
    return path.read_text()


def _paths(doc, prefix=()):
    """Every (container path, key) in a JSON document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield prefix, k
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield prefix, i
            yield from _paths(v, prefix + (i,))


def _at(doc, path):
    for p in path:
        doc = doc[p]
    return doc


@st.composite
def mutated(draw, text: str) -> bytes:
    doc = json.loads(text)
    kind = draw(st.sampled_from(["replace", "delete", "truncate", "splice", "bytes"]))
    if kind in ("replace", "delete"):
        places = list(_paths(doc))
        parent, key = draw(st.sampled_from(places))
        doc = copy.deepcopy(doc)
        container = _at(doc, parent)
        if kind == "delete":
            del container[key]
        else:
            container[key] = draw(json_values)
        return json.dumps(doc).encode()
    if kind == "truncate":
        return text.encode()[: draw(st.integers(0, len(text) - 1))]
    if kind == "splice":
        at = draw(st.integers(0, len(text)))
        return (text[:at] + draw(st.text(max_size=10)) + text[at:]).encode("utf-8", "surrogatepass")
    return draw(st.binary(max_size=200))


def test_the_unmutated_report_loads(saved, tmp_path):
    p = tmp_path / "r.json"
    p.write_text(saved)
    result = load(p)
    assert {c.outcome.value for c in result.results.values()} == {"PASS", "REJECTED"}


@FUZZ
@given(data=st.data())
def test_mutated_reports_load_or_fail_in_one_line(saved, tmp_path, data):
    p = tmp_path / "r.json"
    p.write_bytes(data.draw(mutated(saved)))
    try:
        load(p)
    except SavedError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(str(p))


@settings(max_examples=int(os.environ.get("EPAUDIT_FUZZ_EXAMPLES", "60")) // 3, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_check_results_never_tracebacks(saved, tmp_path, data):
    p = tmp_path / "r.json"
    p.write_bytes(data.draw(mutated(saved)))
    r = CliRunner().invoke(main, ["check", "--results", str(p)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code in (0, 1, 2, 3)
    assert "Traceback" not in r.output
    if r.exit_code == 2:
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("epaudit: error: ")


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["eps"][0].update(live=False), "which the report says was not live"),
    (lambda d: d["eps"][0].update(name="CUDAExecutionProvider"), "from a session that asked for 'CPUExecutionProvider'"),
    (lambda d: [r["evidence"].update(placement=[]) for r in d["results"]], "but its placement gives 'unknown'"),
    # found by this fuzzer: a null placement entry was a traceback
    (lambda d: [r["evidence"].update(placement=[None]) for r in d["results"]], "not an object"),
    (lambda d: [p.update(ep="CPUExecutionProvider") or r["evidence"].update(asked="X")
                for r in d["results"] for p in r["evidence"].get("placement") or []]
     and d["eps"][0].update(name="X"), "but its placement gives 'fallback'"),
])
def test_a_pass_edited_or_relabelled_is_refused(saved, tmp_path, edit, words):
    """Found by a fresh user: a saved PASS must carry the evidence that earned it."""
    doc = json.loads(saved)
    edit(doc)
    p = tmp_path / "forged.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(SavedError, match="evidence|not live|outcome") as info:
        load(p)
    assert words in str(info.value)


@pytest.mark.parametrize("alias", [["CPU"], {"a": 1}, 7])
def test_an_eps_alias_that_is_not_a_string_is_one_line(saved, tmp_path, alias):
    """Found by the fuzz test above on a fresh clone: the streamed reader cross-checked a cell
    against ``eps`` aliases before their types were validated and hashed a list (TypeError,
    a traceback). Now one line naming the file and key, exit 2."""
    doc = json.loads(saved)
    doc["eps"][0]["alias"] = alias
    p = tmp_path / "r.json"
    p.write_text(json.dumps(doc))
    r = CliRunner().invoke(main, ["check", "--results", str(p)])
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    assert f"{p}: " in r.output and ("eps" in r.output or "results[0].ep" in r.output)


def _infinite_mismatch(doc: dict) -> dict:
    """The PASS cell of ``doc`` turned into the MISMATCH a real EP gave on QNN (Attention's
    ``qk_matmul_output``: the lowest float where the reference is ``-inf``), its comparison
    made by the real comparator and written by the real JSON writer."""
    from epaudit.classify.compare import compare
    from epaudit.contract.probes import Tolerance
    from epaudit.report.json import _clean

    cell = next(r for r in doc["results"] if r["outcome"] == "PASS")
    out = next(iter(cell["evidence"]["comparison"]))
    ref = np.zeros((2, 4))
    ref[0, 3] = -np.inf
    got = ref.copy()
    got[0, 3] = np.finfo(np.float32).min
    cmp = compare({out: got}, {out: ref}, Tolerance(atol=1e-4, rtol=1e-3))
    assert cmp[out]["max_abs"] == np.inf and not cmp[out]["match"]
    cell["evidence"]["comparison"][out] = _clean(cmp[out])
    return cell


def test_a_cell_whose_error_is_infinite_is_read_back(saved, tmp_path):
    """Found on the real QNN run of the whole catalog: the report writes an infinite error
    as the string "inf", and re-deriving the cell formatted it as a number, so `check
    --results` refused the whole 16,000-cell report (exit 2). The cell reads as the MISMATCH
    it is, and an edit to PASS is still refused."""
    doc = json.loads(saved)
    cell = _infinite_mismatch(doc)
    cell["outcome"] = "MISMATCH"
    p = tmp_path / "inf.json"
    p.write_text(json.dumps(doc))
    result = load(p)
    assert Outcome.MISMATCH in {c.outcome for c in result.results.values()}
    cell["outcome"] = "PASS"
    p.write_text(json.dumps(doc))
    with pytest.raises(SavedError, match="evidence decides MISMATCH"):
        load(p)
