"""A gate no file can talk into a pass (issue 24): the attacks, each a test that failed
before its fix (docs/reliability.md lists them with their counts).

Everything here is black-box: real ``epaudit`` commands (in process through click, or as
processes where signals, closed descriptors and timing matter), real ORT sessions, real
files edited the way an attacker or a careless user would edit them. The failing cells
come from real CPU behaviour, not from faults: ``attention.fully_masked_row.lowest`` is a
real silent deviation of ORT's CPU kernel (``MISMATCH``, declared ``skip`` on CPU in the
shipped matrix) and ``attention.dtype.bfloat16`` a real refusal (``REJECTED``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from epaudit.cli import main

MISMATCH = "attention.fully_masked_row.lowest"
REJECTED = "attention.dtype.bfloat16"
PASSING = "gqa.prompt"
KEY = "k" * 32
CPU_ONLY = 'schema_version = 1\n[providers.CPU]\nname = "CPUExecutionProvider"\n'


def cli(*args, env=None):
    """``epaudit ARGS`` in process: (exit code, stdout, stderr)."""
    r = CliRunner(env=env).invoke(main, [str(a) for a in args], catch_exceptions=False)
    return r.exit_code, r.stdout, r.stderr


def run(*args, env=None, timeout=120, **kw):
    """``epaudit ARGS`` as a process: the CompletedProcess."""
    return subprocess.run([sys.executable, "-m", "epaudit", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, **kw)


def write(path: Path, text: str) -> str:
    path.write_text(textwrap.dedent(text))
    return str(path)


def edit(src: str | Path, dst: Path, fn) -> str:
    doc = json.loads(Path(src).read_text())
    fn(doc)
    dst.write_text(json.dumps(doc))
    return str(dst)


def cell(doc: dict, feature: str) -> dict:
    return next(r for r in doc["results"] if r["feature"] == feature)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Real saved runs: ``cpu`` (three features on the CPU EP: PASS, MISMATCH, REJECTED, label m1),
    ``other`` (the same on a second machine, m2), and a gate matrix declaring all three supported."""
    d = tmp_path_factory.mktemp("saved")
    runner = write(d / "runner.toml", CPU_ONLY)
    out = {}
    for name, label in (("cpu", "m1"), ("other", "m2")):
        path = d / f"{name}.json"
        code, _, err = cli("probe", "--ep", "CPU", "--matrix", runner, "--label", label, "--json", path,
                           "--feature", PASSING, "--feature", MISMATCH, "--feature", REJECTED)
        assert code == 0, err
        out[name] = str(path)
    doc = json.loads(Path(out["cpu"]).read_text())
    assert {r["feature"]: r["outcome"] for r in doc["results"]} == {PASSING: "PASS", MISMATCH: "MISMATCH",
                                                                      REJECTED: "REJECTED"}
    out["gate"] = write(d / "gate.toml", CPU_ONLY + f'''\
        [features."{PASSING}"]
        CPU = "supported"
        [features."{MISMATCH}"]
        CPU = "supported"
        ''')
    out["dir"] = str(d)
    return out


def gate(saved, *files, feature=(PASSING, MISMATCH), extra=(), env=None):
    args = ["check", "--matrix", saved["gate"]]
    for f in files:
        args += ["--results", f]
    for f in feature:
        args += ["--feature", f]
    return cli(*args, *extra, env=env)


def test_the_honest_files_fail_the_gate(saved):
    """The baseline every attack starts from: the real MISMATCH fails the gate."""
    code, out, _ = gate(saved, saved["cpu"])
    assert code == 1 and "silent" in out


# --- one edited word, the fault field, duplicate keys, numbers (the issue's attacks) ----

def test_an_edited_outcome_with_its_evidence_left_is_refused(saved, tmp_path):
    """"outcome": "MISMATCH" -> "PASS", comparison still match: false: the gate passed."""
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: cell(d, MISMATCH).update(outcome="PASS"))
    code, _, err = gate(saved, forged)
    assert code == 2, err
    assert f"{forged}: results[" in err and "out of tolerance" in err and err.count("\n") == 1


def test_an_edited_outcome_is_refused_with_require_too(saved, tmp_path):
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: cell(d, MISMATCH).update(outcome="PASS"))
    code, _, err = gate(saved, forged, extra=("--require", "CPU"))
    assert code == 2 and "out of tolerance" in err


def test_a_relabelled_run_with_a_fault_field_is_refused(saved, tmp_path):
    """A CPU run relabelled as CUDA with "fault": "perturb": the relabel check was off."""
    def relabel(d):
        d["eps"][0].update(alias="CUDA", name="CUDAExecutionProvider", fault="perturb")
        d["results"] = [dict(r, ep="CUDA") for r in d["results"] if r["feature"] == PASSING]
        d["features"] = [PASSING]
    forged = edit(saved["cpu"], tmp_path / "cuda.json", relabel)
    m = write(tmp_path / "g.toml", '''\
        schema_version = 1
        [gate]
        gated = ["CUDA"]
        [providers.CUDA]
        name = "CUDAExecutionProvider"
        ''')
    code, out, err = cli("check", "--matrix", m, "--results", forged, "--require", "CUDA", "--feature", PASSING)
    assert code == 2, out + err
    assert "from a session that asked for 'CPUExecutionProvider'" in err


def test_a_faulted_run_is_never_evidence_a_gate_passes_on(saved, tmp_path):
    """The fault field alone, nothing else edited: the column reads incomplete."""
    faulted = edit(saved["cpu"], tmp_path / "f.json", lambda d: d["eps"][0].update(fault="perturb"))
    code, out, _ = gate(saved, faulted, feature=(PASSING,))
    assert code == 3 and "with the fault 'perturb' injected" in out


def test_duplicate_keys_are_refused(saved, tmp_path):
    """"outcome": "IGNORED", "outcome": "PASS" read as PASS (Python's json keeps the last)."""
    text = Path(saved["cpu"]).read_text()
    forged = tmp_path / "dup.json"
    forged.write_text(text.replace('"outcome": "MISMATCH"', '"outcome": "IGNORED", "outcome": "PASS"', 1))
    code, _, err = gate(saved, str(forged))
    assert code == 2 and "key 'outcome' given twice" in err and err.count("\n") == 1


@pytest.mark.parametrize("number", ["1e999", "-1e999", "1" + "0" * 400 + ".0"])
def test_numbers_no_double_holds_are_refused(saved, tmp_path, number):
    """1e999 read as infinity; the merged report then held "inf", which epaudit refused."""
    text = Path(saved["cpu"]).read_text()
    forged = tmp_path / "inf.json"
    forged.write_text(re.sub(r'"seconds": [0-9.e-]+', f'"seconds": {number}', text, count=1))
    code, _, err = gate(saved, str(forged))
    assert code == 2 and "beyond what a double holds" in err


def test_a_merged_report_reads_back(saved, tmp_path):
    """Held: what check --results writes, epaudit reads (no "inf" in it)."""
    out = tmp_path / "merged.json"
    gate(saved, saved["cpu"], extra=("--format", "json", "--output", out))
    code, _, err = cli("diff", out, out)
    assert code == 0, err


def test_integers_beyond_64_bits_are_refused(saved, tmp_path):
    """Own attack: an integer no double holds exactly, where a number is read."""
    forged = edit(saved["cpu"], tmp_path / "big.json", lambda d: cell(d, PASSING).update(seconds=2 ** 70))
    code, _, err = gate(saved, forged, feature=(PASSING,))
    assert code == 2 and "outside 64 bits" in err


# --- one run, many names; versions; the features a gate expects -----------------------

def test_one_run_under_two_names_is_refused(saved, tmp_path):
    """The same run uploaded as two machines (its label edited) counted as two."""
    def relabel(d):
        d["machines"] = {"m9": {**d["machines"]["m1"], "label": "m9"}}
        d["eps"][0]["machine"] = "m9"
    twin = edit(saved["cpu"], tmp_path / "twin.json", relabel)
    code, _, err = gate(saved, saved["cpu"], twin)
    assert code == 2 and "is also" in err and saved["cpu"] in err


def test_one_run_with_its_id_edited_is_still_one_run(saved, tmp_path):
    def relabel(d):
        d["machines"] = {"m9": {**d["machines"]["m1"], "label": "m9"}}
        d["eps"][0]["machine"] = "m9"
        d["run_id"] = "0" * 32
    twin = edit(saved["cpu"], tmp_path / "twin.json", relabel)
    code, _, err = gate(saved, saved["cpu"], twin)
    assert code == 2 and "every timing of" in err


def test_two_real_runs_are_two_machines(saved):
    code, out, err = gate(saved, saved["cpu"], saved["other"], feature=(PASSING,))
    assert code == 0, out + err
    assert "CPU@m1" in out and "CPU@m2" in out


def test_other_versions_merge_with_one_note(saved, tmp_path):
    older = edit(saved["other"], tmp_path / "old.json",
                 lambda d: (d["versions"].update(epaudit="0.0.9", onnxruntime=["1.27.0"]),
                            d["eps"][0].update(ort_version="1.27.0")))
    code, _, err = gate(saved, saved["cpu"], older, feature=(PASSING,))
    assert code == 0, err
    notes = [line for line in err.splitlines() if "different versions" in line]
    assert len(notes) == 1, err
    assert re.search(r"epaudit 0\.1\.\d+ \(.*\); 0\.0\.9 \(.*old\.json\)", notes[0]), notes[0]
    assert re.search(r"onnxruntime .*; 1\.27\.0 \(.*old\.json\)", notes[0]), notes[0]


def test_a_selected_feature_no_file_has_is_missing_evidence(saved):
    """The merge gated only the features some file held."""
    code, out, _ = gate(saved, saved["cpu"], feature=(PASSING, "gqa.softcap"))
    assert code == 3 and "1 selected feature(s) are in no results file (first: gqa.softcap)" in out


def test_a_declared_cell_deleted_from_a_file_is_missing(saved, tmp_path):
    """Own attack: the failing cell deleted from a column that is not gated, while another
    column holds the feature (so it is not missing everywhere): exit 1 became 0."""
    skip_x = (f'[features."{MISMATCH}"]\nX = {{ status = "skip", issue = "https://example.org/1", '
              'until = 2099-01-01 }\n')
    x_provider = '[providers.X]\nname = "CPUExecutionProvider"\n'
    runner = write(tmp_path / "x.toml", "schema_version = 1\n" + x_provider + skip_x)
    x = tmp_path / "x.json"
    assert cli("probe", "--ep", "X", "--matrix", runner, "--label", "mx", "--json", x,
               "--feature", PASSING, "--feature", MISMATCH)[0] == 0
    m = write(tmp_path / "g.toml", CPU_ONLY + x_provider + f'[features."{PASSING}"]\nCPU = "supported"\n'
              + skip_x.replace(f'[features."{MISMATCH}"]\n', f'[features."{MISMATCH}"]\nCPU = "supported"\n'))
    gone = edit(saved["cpu"], tmp_path / "gone.json",
                lambda d: d.update(results=[r for r in d["results"] if r["feature"] != MISMATCH]))
    code, out, err = cli("check", "--matrix", m, "--results", gone, "--results", x, "--feature", PASSING,
                         "--feature", MISMATCH)
    assert code == 3 and "CPU: 1 feature(s) of this merge were never probed on it" in out, out + err


@pytest.mark.parametrize("outcome", ["SKIPPED", "UNAVAILABLE"])
def test_a_failing_cell_edited_to_not_run_is_not_a_pass(saved, tmp_path, outcome):
    """Own attack: MISMATCH edited to SKIPPED or UNAVAILABLE on a live EP: exit 1 became 0."""
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: cell(d, MISMATCH).update(outcome=outcome))
    code, out, err = gate(saved, forged)
    assert code in (2, 3), out + err


def test_a_refusal_edited_into_a_pass_is_refused(saved, tmp_path):
    """Held (issue 12's check, now the re-derivation): a REJECTED cell never ran."""
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: cell(d, REJECTED).update(outcome="PASS"))
    code, _, err = gate(saved, forged, feature=(REJECTED,))
    assert code == 2 and "says PASS, but its evidence decides REJECTED" in err


def _elsewhere(d: dict) -> None:
    """The probed node moved to another EP, the verdict left saying it ran on the EP."""
    for p in cell(d, PASSING)["evidence"]["placement"]:
        p["ep"] = "CUDAExecutionProvider"


@pytest.mark.parametrize("edit_fn, words", [
    (lambda d: cell(d, MISMATCH).update(outcome="PASS") or cell(d, MISMATCH)["evidence"].pop("comparison"),
     "PASS cannot be re-derived"),
    (lambda d: cell(d, PASSING)["evidence"]["comparison"]["output"].update(match=False, bad=3),
     "says PASS, but its evidence decides MISMATCH"),
    (lambda d: cell(d, PASSING)["evidence"]["comparison"]["output"].update(nonfinite=2, first_nonfinite=[0]),
     "says PASS, but its evidence decides NAN"),
    (lambda d: cell(d, PASSING)["evidence"].update(unwritten=[{"run": 1, "output": "output", "elements": 4,
                                                                "size": 1024}]),
     "says PASS, but its evidence decides UNWRITTEN"),
    (_elsewhere, "says 'on_ep', but its placement gives 'fallback'"),
    (lambda d: cell(d, PASSING)["evidence"].update(comparison={}), "PASS without the comparison"),
])
def test_a_pass_its_evidence_contradicts_is_refused(saved, tmp_path, edit_fn, words):
    """Own attacks: a cell whose evidence was edited (numbers made bad, the node moved, the
    comparison dropped) still reads PASS: its outcome is re-derived from the evidence."""
    forged = edit(saved["cpu"], tmp_path / "f.json", edit_fn)
    # only the edited cell is gated: without the fix, the gate passed
    code, _, err = gate(saved, forged, feature=(MISMATCH,) if "re-derived" in words else (PASSING,))
    assert code == 2 and words in err and err.count("\n") == 1, err


# --- signatures ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def signed(saved, tmp_path_factory):
    d = tmp_path_factory.mktemp("signed")
    path = d / "s.json"
    code, _, err = cli("probe", "--ep", "CPU", "--matrix", write(d / "r.toml", CPU_ONLY), "--label", "s1",
                       "--json", path, "--feature", PASSING, env={"EPAUDIT_RESULTS_KEY": KEY})
    assert code == 0, err
    m = write(d / "g.toml", '''\
        schema_version = 1
        [gate]
        require_signed = true
        [providers.CPU]
        name = "CPUExecutionProvider"
        ''')
    return {"file": str(path), "gate": m, "dir": d}


def test_a_signed_file_passes_a_gate_that_requires_signatures(signed):
    doc = json.loads(Path(signed["file"]).read_text())
    assert doc["signature"]["alg"] == "HMAC-SHA256" and len(doc["signature"]["value"]) == 64
    code, out, err = cli("check", "--matrix", signed["gate"], "--results", signed["file"], "--feature", PASSING,
                         env={"EPAUDIT_RESULTS_KEY": KEY})
    assert code == 0, out + err


def test_a_key_file_verifies_as_the_variable_does(signed, tmp_path):
    key = tmp_path / "key"
    key.write_text(KEY + "\n")
    code, out, err = cli("check", "--matrix", signed["gate"], "--results", signed["file"], "--feature", PASSING,
                         "--results-key-file", key, env={"EPAUDIT_RESULTS_KEY": ""})
    assert code == 0, out + err


@pytest.mark.parametrize("how", ["edited", "unsigned", "other key", "copied signature"])
def test_an_edited_or_unsigned_file_is_refused(saved, signed, tmp_path, how):
    if how == "edited":
        f = edit(signed["file"], tmp_path / "f.json", lambda d: d["results"][0].update(summary="fine"))
    elif how == "unsigned":
        f = edit(signed["file"], tmp_path / "f.json", lambda d: d.pop("signature"))
    elif how == "copied signature":
        sig = json.loads(Path(signed["file"]).read_text())["signature"]
        f = edit(saved["other"], tmp_path / "f.json", lambda d: d.update(signature=sig))
    else:
        f = signed["file"]
    key = "z" * 32 if how == "other key" else KEY
    code, _, err = cli("check", "--matrix", signed["gate"], "--results", f, "--feature", PASSING,
                       env={"EPAUDIT_RESULTS_KEY": key})
    assert code == 2 and err.count("\n") == 1 and f in err, err
    assert ("unsigned" in err) if how == "unsigned" else ("signature does not match" in err)


def test_a_bad_signature_is_refused_even_when_signatures_are_not_required(saved, signed, tmp_path):
    f = edit(signed["file"], tmp_path / "f.json", lambda d: d["results"][0].update(summary="fine"))
    code, _, err = cli("check", "--matrix", saved["gate"], "--results", f, "--feature", PASSING,
                       env={"EPAUDIT_RESULTS_KEY": KEY})
    assert code == 2 and "signature does not match" in err


@pytest.mark.parametrize("key", ["", None])
def test_require_signed_without_a_key_is_refused_before_reading(signed, key):
    """An empty key is what a CI secret store gives a fork's pull request."""
    env = {"EPAUDIT_RESULTS_KEY": key} if key is not None else {}
    code, _, err = cli("check", "--matrix", signed["gate"], "--results", signed["file"], "--feature", PASSING,
                       env=env)
    assert code == 2 and "require_signed = true, but no results key" in err


@pytest.mark.parametrize("value, words", [("short", "5 byte(s); a results key needs at least 16")])
def test_a_weak_key_is_refused(value, words):
    code, _, err = cli("check", "--ep", "CPU", "--feature", PASSING, env={"EPAUDIT_RESULTS_KEY": value})
    assert code == 2 and words in err and err.count("\n") == 1


def test_a_key_file_that_is_a_fifo_or_missing_is_one_line(tmp_path):
    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    for path, words in ((fifo, "not a regular file"), (tmp_path / "none", "No such file")):
        t0 = time.monotonic()
        code, _, err = cli("probe", "--ep", "CPU", "--feature", PASSING, "--results-key-file", path)
        assert code == 2 and words in err and time.monotonic() - t0 < 30


def test_require_signed_must_be_a_boolean(tmp_path):
    m = write(tmp_path / "m.toml", '''\
        schema_version = 1
        [gate]
        require_signed = "yes"
        ''')
    code, _, err = cli("check", "--matrix", m, "--ep", "CPU")
    assert code == 2 and f"{m}:3: gate.require_signed: must be true or false" in err


def _downgrade(d: dict, label: str = "") -> None:
    """The report as schema 2 wrote it (issue 23's evidence, before run ids, versions and
    signatures)."""
    d["schema_version"] = 2
    for k in ("run_id", "versions", "signature"):
        d.pop(k, None)
    if label:
        d["machines"] = {label: {**next(iter(d["machines"].values())), "label": label}}
        d["eps"][0]["machine"] = label


def test_an_old_report_is_read_and_never_passes_for_a_signed_gate(saved, signed, tmp_path):
    """Schema-2 reports (no run id, versions or signature) are read; a gate that requires
    signatures refuses them as unsigned; schema 1 is refused (its cells meant something else)."""
    old = edit(saved["cpu"], tmp_path / "v1.json", _downgrade)
    code, out, _ = gate(saved, old)
    assert code == 1 and "silent" in out
    old = edit(signed["file"], tmp_path / "v1s.json", _downgrade)
    code, _, err = cli("check", "--matrix", signed["gate"], "--results", old, "--feature", PASSING,
                       env={"EPAUDIT_RESULTS_KEY": KEY})
    assert code == 2 and "unsigned" in err
    ancient = edit(saved["cpu"], tmp_path / "v1.json", lambda d: d.update(schema_version=1))
    code, _, err = gate(saved, ancient)
    assert code == 2 and "schema_version: 1: written by an epaudit whose FALLBACK and DECOMPOSED" in err


def test_a_run_downgraded_to_schema_2_is_still_one_run(saved, tmp_path):
    """Own attack: a copy rewritten as schema 2 (no run id to compare) under another label."""
    twin = edit(saved["cpu"], tmp_path / "v1.json", lambda d: _downgrade(d, "m9"))
    code, _, err = gate(saved, saved["cpu"], twin)
    assert code == 2 and "every timing of" in err


# --- strings from files: terminals, logs, GitHub Actions ------------------------------

HOSTILE = "x\n::stop-commands::pwned\nverdict: PASS (exit 0)\x1b[2J ##[add-mask]secret \u202eevil"


def _no_commands(text: str) -> None:
    for line in text.splitlines():
        assert not line.lstrip().startswith("::"), line
        assert "##[" not in line, line
    assert "\x1b" not in text and "\u202e" not in text


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "junit", "html"])
def test_a_summary_from_a_file_never_forges_a_line_or_a_command(saved, tmp_path, fmt):
    """Summaries reached the terminal with newlines and escape codes: a ::stop-commands:: line
    on stdout that GitHub Actions obeys, a forged verdict line."""
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: cell(d, MISMATCH).update(summary=HOSTILE))
    code, out, err = gate(saved, forged, extra=("--format", fmt))
    assert code == 1, err
    _no_commands(out)
    _no_commands(err)
    if fmt == "table":
        assert [line for line in out.splitlines() if line.startswith("verdict:")] == \
            ["verdict: FAIL: 1 failing finding(s) (silent) (exit 1)"]


def test_a_summary_from_a_file_never_forges_a_line_in_diff(saved, tmp_path):
    forged = edit(saved["cpu"], tmp_path / "f.json",
                  lambda d: (cell(d, MISMATCH).update(summary=HOSTILE),
                             d["eps"][0].update(distribution="ort\n::error::x")))
    code, out, err = cli("diff", saved["cpu"], forged)
    _no_commands(out)


@pytest.mark.parametrize("where", ["feature", "alias", "machine"])
def test_an_id_with_a_line_break_or_escape_is_refused(saved, tmp_path, where):
    """Own attacks: ids are printed everywhere (grid, columns, diff): none may hold a control
    character, line separator or invisible format character."""
    def forge(d):
        bad = "CPU\n::error::x" if where != "machine" else "m1\u2028x"
        if where == "feature":
            bad = PASSING + "\x1b[31m"
            d["features"][0] = bad
            d["results"][0]["feature"] = bad
        elif where == "alias":
            d["eps"][0]["alias"] = bad
            for r in d["results"]:
                r["ep"] = bad
        else:
            d["eps"][0]["machine"] = bad
    forged = edit(saved["cpu"], tmp_path / "f.json", forge)
    code, out, err = cli("diff", saved["cpu"], forged)
    assert code == 2 and err.count("\n") == 1, out + err
    _no_commands(err)


def test_an_error_line_quoting_a_file_never_carries_a_command(saved, tmp_path):
    """Own attack: a refusal quotes the file's value; stderr is a CI log too."""
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: d["results"][0].update(ep="##[stop-commands]x"))
    code, _, err = gate(saved, forged)
    assert code == 2 and "is not one of the report's eps" in err
    _no_commands(err)


def test_in_github_actions_only_epaudit_s_annotations_are_commands(saved, tmp_path):
    """Own attack: the same hostile summary with GITHUB_ACTIONS=true (annotations and table on stdout)."""
    forged = edit(saved["cpu"], tmp_path / "f.json", lambda d: cell(d, MISMATCH).update(summary=HOSTILE))
    code, out, err = gate(saved, forged, env={"GITHUB_ACTIONS": "true"})
    commands = [line for line in out.splitlines() if line.lstrip().startswith("::")]
    assert commands and all(line.startswith(("::error ", "::warning ")) for line in commands), commands
    assert "##[" not in out and "\x1b" not in out


# --- regular expressions from the matrix ------------------------------------------------

def test_a_catastrophic_issue_pattern_cannot_hang_check(tmp_path):
    """[gate] issue_pattern = "^(a+)+$" against a long issue that does not match hung check
    (killed at 185 s, deaf to SIGTERM)."""
    m = write(tmp_path / "m.toml", f'''\
        schema_version = 1
        [gate]
        issue_pattern = "^(a+)+$"
        [providers.CPU]
        name = "CPUExecutionProvider"
        [features."{PASSING}"]
        CPU = {{ status = "unsupported", issue = "{'a' * 60}b", until = 2099-01-01 }}
        ''')
    t0 = time.monotonic()
    p = run("check", "--matrix", m, "--feature", PASSING, timeout=120)
    assert time.monotonic() - t0 < 60
    assert p.returncode == 1 and "Traceback" not in p.stderr


@pytest.mark.parametrize("pattern, words", [
    (r"^(PROJ)-\\1$", "invalid escape sequence"),
    (r"^(?=PROJ)PROJ-[0-9]+$", "invalid perl operator"),
    ("a" * 1001, "at most 1000"),
])
def test_an_issue_pattern_needing_backtracking_is_a_matrix_error(tmp_path, pattern, words):
    m = write(tmp_path / "m.toml", f'schema_version = 1\n[gate]\nissue_pattern = "{pattern}"\n')
    code, _, err = cli("check", "--matrix", m, "--ep", "CPU")
    assert code == 2 and f"{m}:3: gate.issue_pattern:" in err and words in err and err.count("\n") == 1


def test_a_catastrophic_skip_list_regex_cannot_hang_the_audit(tmp_path, cache_dir):
    """Own attack: the skip-list is a file of regexes; "(a|aa)+$" searched in case names."""
    f = tmp_path / "filters.jsonc"
    f.write_text('{"current_failing_tests": ["^(\\\\w+)+!$", "^test_attention_3d"]}')
    t0 = time.monotonic()
    p = run("skips", "audit", f, "--op", "Attention", "--cache-dir", cache_dir, timeout=120)
    assert time.monotonic() - t0 < 60 and p.returncode in (0, 1), p.stderr[-300:]


def test_pathological_globs_are_fast(tmp_path):
    """Held: feature globs are fnmatch's translation (no nested repetition)."""
    m = write(tmp_path / "m.toml", CPU_ONLY + '[features."*a*a*a*a*a*a*a*a*a*a*a*a*b"]\nCPU = "supported"\n')
    t0 = time.monotonic()
    cli("check", "--matrix", m, "--feature", "*a*a*a*a*a*a*a*a*a*a*a*z", "--ep", "CPU")
    assert time.monotonic() - t0 < 30


# --- caches trusted like code -----------------------------------------------------------

def _plant(cache: Path, feature: str) -> None:
    """What the attacker does: the cached probe's reference rewritten to what the CPU EP
    really outputs (a valid cache file, SHA-256 recomputed), then left writable by all."""
    import numpy as np
    import onnxruntime as ort

    from epaudit.cache.probecache import ProbeCache, probe_key
    from epaudit.catalog import CATALOG_VERSION
    from epaudit.contract.probes import Case

    pc = ProbeCache(cache, probe_key(CATALOG_VERSION))
    probes = pc.load()
    assert feature in probes, "the first run cached the probe"
    p = probes[feature]
    sess = ort.InferenceSession(p.subject.model, providers=["CPUExecutionProvider"])
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, dict(p.subject.feeds))))
    planted = {n: np.asarray(outs[n], np.float64) for n in p.subject.reference}
    import dataclasses

    probes[feature] = dataclasses.replace(p, subject=Case(p.subject.model, p.subject.feeds, p.subject.outputs,
                                                            planted, p.subject.exact))
    assert pc.store(probes)


@pytest.mark.parametrize("how", ["--cache-dir", "$EPAUDIT_CACHE_DIR", "other owner"])
def test_a_planted_probe_cache_cannot_turn_a_mismatch_into_a_pass(tmp_path, how):
    """A cache file of another user (or mode 666), its reference rewritten to the EP's output:
    a real silent MISMATCH (exit 1) read verdict: PASS (exit 0)."""
    if how == "other owner" and os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    m = write(tmp_path / "m.toml", CPU_ONLY + f'[features."{MISMATCH}"]\nCPU = "supported"\n')
    cache = tmp_path / "cache"
    args = ["check", "--matrix", m, "--feature", MISMATCH]
    opt = ["--cache-dir", str(cache)] if how != "$EPAUDIT_CACHE_DIR" else []
    env = {"EPAUDIT_CACHE_DIR": str(cache)}
    assert run(*args, *opt, env=env).returncode == 1
    _plant(cache, MISMATCH)
    for f in cache.iterdir():
        if how == "other owner":
            os.chown(f, 65534, 65534)
        else:
            f.chmod(0o666)
    if how != "other owner":
        cache.chmod(0o777)
    p = run(*args, *opt, env=env)
    assert p.returncode == 1, p.stdout[-500:]
    warnings = [line for line in p.stderr.splitlines() if "is not trusted" in line]
    # one line per store ignored (the probe cache; the EP registry cache beside it), not per probe
    assert len([w for w in warnings if "probes are built now and not stored" in w]) == 1, p.stderr
    assert len(warnings) == len(set(warnings)) <= 2, p.stderr


def test_a_cache_made_under_a_loose_umask_is_still_trusted(tmp_path):
    """Held by design: epaudit's own directories are 0700 and files 0600 whatever the umask,
    so a umask of 002 never makes every run rebuild (and warn)."""
    cache = tmp_path / "deep" / "cache"
    code = "import os, sys; os.umask(0o002); from epaudit.launch import main; sys.argv=['epaudit'] + sys.argv[1:]; main()"
    p = subprocess.run([sys.executable, "-c", code, "check", "--ep", "CPU", "--feature", PASSING, "--cache-dir",
                        str(cache)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert all(f.stat().st_mode & 0o077 == 0 for f in cache.iterdir() if f.is_file())
    p = run("check", "--ep", "CPU", "--feature", PASSING, "--cache-dir", cache)
    assert p.returncode == 0 and "not trusted" not in p.stderr


def test_a_link_to_someone_elses_cache_file_is_not_trusted(tmp_path):
    """Own attack: the cache file replaced by a link to a file another user can write."""
    if os.geteuid() != 0:
        pytest.skip("a file of another user needs root")
    m = write(tmp_path / "m.toml", CPU_ONLY + f'[features."{MISMATCH}"]\nCPU = "supported"\n')
    cache = tmp_path / "cache"
    assert run("check", "--matrix", m, "--feature", MISMATCH, "--cache-dir", cache).returncode == 1
    _plant(cache, MISMATCH)
    (f,) = [f for f in cache.iterdir() if f.name.startswith("probes-")]
    elsewhere = tmp_path / "theirs.bin"
    f.rename(elsewhere)
    os.chown(elsewhere, 65534, 65534)
    f.symlink_to(elsewhere)
    p = run("check", "--matrix", m, "--feature", MISMATCH, "--cache-dir", cache)
    assert p.returncode == 1 and "owned by uid 65534" in p.stderr


def test_planted_conformance_cases_are_regenerated_privately(tmp_path):
    """The conformance case cache holds the references too: a folder others can write is not
    read; the cases are generated again for the run."""
    cache = tmp_path / "cases"
    args = ["conformance", "--ep", "CPU", "--case", "test_attention_3d", "--cache-dir", cache, "--format", "json"]
    p = run(*args, timeout=600)
    assert p.returncode in (0, 1), p.stderr[-500:]
    (folder,) = [d for d in cache.glob("onnx-*/format-*/Attention")]
    import numpy as np

    index = json.loads((folder / "index.json").read_text())
    entry = next(e for e in index["cases"] if e["name"] == "test_attention_3d")
    npz = folder / f"{entry['file']}.npz"
    with np.load(npz) as data:
        arrays = {k: data[k] for k in data.files}
    arrays = {k: (v + 1.0 if k.startswith("out") else v) for k, v in arrays.items()}  # a wrong reference
    np.savez(npz, **arrays)
    folder.chmod(0o777)
    npz.chmod(0o666)
    p = run(*args, timeout=600)
    doc = json.loads(p.stdout)
    (c,) = [r for r in doc["results"] if r["feature"] == "test_attention_3d"]
    assert c["outcome"] == "PASS", c["summary"]  # judged against a fresh reference, not the planted one
    assert sum("is not trusted" in line for line in p.stderr.splitlines()) == 1


# --- standard streams, reports, signals --------------------------------------------------

def test_closed_stderr_keeps_the_gate_exit_code_and_output():
    """With 2>&- check exited 1 and printed nothing, even when the gate passed."""
    p = subprocess.run(f"{sys.executable} -m epaudit check --ep CPU --feature {PASSING} 2>&-", shell=True,
                       capture_output=False, stdout=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 0
    assert "verdict: PASS" in p.stdout


def test_closed_stderr_still_says_why_it_failed(tmp_path):
    p = subprocess.run(f"{sys.executable} -m epaudit check --matrix {tmp_path}/none.toml 2>&-", shell=True,
                       stdout=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 2 and "epaudit: error:" in p.stdout and "Traceback" not in p.stdout


def test_closed_stdin_and_stdout(tmp_path):
    """Held: stdout closed is one line on stderr, exit 2; stdin closed changes nothing."""
    p = subprocess.run(f"{sys.executable} -m epaudit features >&-", shell=True, capture_output=False,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert p.returncode == 2 and "standard output is closed" in p.stderr
    p = subprocess.run(f"{sys.executable} -m epaudit check --ep CPU --feature {PASSING} <&-", shell=True,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300)
    assert p.returncode == 0, p.stderr


def test_a_report_that_cannot_be_written_prints_no_verdict(tmp_path):
    """The verdict line said (exit 0) and the process exited 2 when a later --report could not
    be written."""
    j = tmp_path / "r.json"
    p = run("check", "--ep", "CPU", "--feature", PASSING, "--report", f"json:{j}", "--report", "junit:/dev/full")
    assert p.returncode == 2 and "/dev/full" in p.stderr
    assert "verdict:" not in p.stdout
    assert not j.exists(), "no report renamed into place when another failed"


def test_every_report_is_in_place_before_the_verdict_line(tmp_path):
    j, x = tmp_path / "r.json", tmp_path / "r.xml"
    p = run("check", "--ep", "CPU", "--feature", PASSING, "--report", f"json:{j}", "--report", f"junit:{x}")
    assert p.returncode == 0 and j.exists() and x.exists()
    verdict = [line for line in p.stdout.splitlines() if line.startswith("verdict:")]
    assert verdict[-1].endswith("(exit 0)")


def _hang_matrix(tmp_path, tag: str) -> str:
    return write(tmp_path / "hang.toml", f'''\
        schema_version = 1
        [providers.HANG]
        name = "CPUExecutionProvider"
        inject_fault = "hang"
        env = {{ EPAUDIT_TEST_TAG = "{tag}" }}
        ''')


def _interrupt(args, sig, ready, tmp_path, timeout=300):
    """Start ``epaudit ARGS``, wait for ``ready()``, send ``sig``; (seconds to exit, process, stderr)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "epaudit", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "TMPDIR": str(tmp)})
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not ready() and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, "still running when the signal is sent"
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        return time.monotonic() - t0, proc, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _hung(tag):
    from procs import tagged

    def ready() -> bool:
        return bool(tagged(tag)) and _slept(tag)
    return ready


def _slept(tag: str) -> bool:
    time.sleep(1.5)  # into the hanging probe (the fault sleeps right after session creation)
    return True


COMMANDS = {
    "check": lambda m: ["check", "--matrix", m, "--feature", PASSING, "--timeout", "600"],
    "probe": lambda m: ["probe", "--matrix", m, "--ep", "HANG", "--feature", PASSING, "--timeout", "600"],
    "selftest": lambda m: ["selftest", "--feature", PASSING, "--hang-timeout", "600"],
    "conformance": lambda m: ["conformance", "--matrix", m, "--case", "test_attention_3d", "--timeout", "600"],
    "bless": lambda m: ["bless", "--matrix", m, "--ep", "HANG", "--feature", PASSING, "--timeout", "600"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGHUP])
def test_ctrl_c_and_sighup_act_within_a_second(tmp_path, command, sig):
    """Ctrl-C took 38 s to act in selftest; SIGHUP ended a run with no line."""
    import uuid

    from procs import tagged

    tag = uuid.uuid4().hex
    m = _hang_matrix(tmp_path, tag)
    # selftest's fault workers carry no tag: wait until its hang column hangs.
    wait = (lambda: time.sleep(8) or True) if command == "selftest" else _hung(tag)  # noqa: E731
    before = Path(m).read_text()
    seconds, proc, err = _interrupt(COMMANDS[command](m), sig, wait, tmp_path)
    assert seconds < 1.0, (seconds, err[-300:])
    assert Path(m).read_text() == before, "an interrupted bless writes nothing"
    assert proc.returncode == 3 and "Traceback" not in err, err[-500:]
    assert f"interrupted by {signal.Signals(sig).name}" in err, err[-300:]
    time.sleep(0.5)
    assert not tagged(tag), "no worker left running"
    assert list((tmp_path / "tmp").iterdir()) == [], "no temp directory left"


@pytest.mark.parametrize("command", ["features", "providers", "oracle", "surface"])
def test_ctrl_c_in_a_short_command_acts_at_once(tmp_path, command):
    """Commands without workers: Ctrl-C is exit 3, one line, no traceback, no child left."""
    sleeper = tmp_path / "sleeper"
    sleeper.write_text("#!/bin/sh\nexec sleep 1017.25\n")
    sleeper.chmod(0o755)
    m = write(tmp_path / "m.toml", f'schema_version = 1\n[providers.S]\nname = "CPUExecutionProvider"\n'
                                   f'python = "{sleeper}"\n')
    args = {"features": ["features"], "providers": ["providers", "--matrix", m], "oracle": ["oracle"],
            "surface": ["surface", "--matrix", m, "--ep", "S"]}[command]
    proc = subprocess.Popen([sys.executable, "-m", "epaudit", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(0.8 if command != "surface" else 3.0)
    if proc.poll() is not None:  # done before the signal: nothing to interrupt
        assert proc.returncode in (0, 1, 3)
        return
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert time.monotonic() - t0 < 1.0 and proc.returncode == 3 and "Traceback" not in err
    time.sleep(0.3)
    left = subprocess.run(["pgrep", "-f", "sleep 1017.25"], capture_output=True, text=True).stdout
    assert not [pid for pid in left.split() if int(pid) != os.getpid()], "the registry child was left running"


def test_a_planted_generated_catalog_manifest_is_not_read(tmp_path, capfd):
    """Own attack: the generated catalog's store (manifest and probes) planted in a folder
    others can write: its features would be what the attacker wrote."""
    from epaudit.catalog.corpus import store

    folder = tmp_path / "generated"
    folder.mkdir()
    k = store.key()
    doc = {"format": store.MANIFEST_FORMAT, "key": k, "features": [], "drops": {}, "examples": {}, "cases": 0,
           "seconds": 0.0}
    (folder / f"manifest-{k}.json").write_text(json.dumps(doc))
    (folder / f"probes-{k}.bin").write_bytes(b"")
    folder.chmod(0o777)
    assert store.read_manifest(tmp_path, k) is None
    err = capfd.readouterr().err
    assert err.count("is not trusted") == 1 and "writable by its group and others" in err
    folder.chmod(0o700)
    assert store.read_manifest(tmp_path, k) == doc, "the same files in a private folder are read"


def test_a_planted_registry_cache_is_not_used(tmp_path, capfd):
    """Own attack: the EP registry cache (what each EP registers: the claims audit) in a
    folder others can write."""
    from epaudit.surface.kernels import cache_dir

    (tmp_path / "surface").mkdir(mode=0o777)
    (tmp_path / "surface").chmod(0o777)
    assert cache_dir(tmp_path) is None
    assert "is not trusted" in capfd.readouterr().err
    (tmp_path / "surface").chmod(0o700)
    assert cache_dir(tmp_path) == str(tmp_path / "surface")
