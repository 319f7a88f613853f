"""Shards (``--shard K/N``, epaudit/run/shard.py, epaudit/saved/shards.py): a stable split of
the selection; N shards merged by ``check --results`` give the unsharded run's cells and
verdict; a set with a shard missing or twice is refused, naming it. Real ORT sessions on
the CPU EP over a real catalog slice."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from epaudit.catalog import select
from epaudit.cli import main
from epaudit.run.shard import Shard, cost_ms, parse, partition
from epaudit.run.shard import select as shard_select

#: A real slice of the catalog with passes, refusals (REJECTED), a declared skip and
#: declared gaps on CPU, so cells, findings and the verdict all have something to agree on.
SLICE = ["--feature", "gqa.*", "--feature", "attention.dtype.*", "--feature", "sparseattention.*"]


@pytest.mark.parametrize("spec, words", [
    ("0/4", "K must be from 1 to N (4)"), ("5/4", "K must be from 1 to N (4)"),
    ("1/0", "N must be from 1"), ("a/b", "is not K/N"), ("3", "is not K/N"), ("-1/4", "is not K/N"),
    ("1/4/2", "is not K/N"), ("", "is not K/N"), ("1.5/4", "is not K/N"),
])
def test_a_bad_shard_spec_is_one_line_exit_2(spec, words):
    with pytest.raises(ValueError, match="K|N"):
        parse(spec)
    for command in (["check", "--ep", "CPU"], ["probe", "--ep", "CPU"], ["selftest"], ["conformance", "--ep", "CPU"]):
        r = CliRunner().invoke(main, [*command, "--shard", spec])
        assert r.exit_code == 2, (command, spec, r.output)
        lines = r.output.strip().splitlines()
        assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.output, (command, r.output)


def test_good_specs_parse():
    assert parse("1/1") == Shard(1, 1) and parse(" 3/8 ") == Shard(3, 8) and str(parse("2/4")) == "2/4"


def test_the_partition_covers_every_item_once_stably_and_balanced():
    costs = [cost_ms(f.operator) for f in select(None)]
    for n in (1, 2, 3, 7):
        parts = partition(costs, n)
        assert parts == partition(costs, n)  # a pure function of its input
        flat = sorted(i for p in parts for i in p)
        assert flat == list(range(len(costs)))
        loads = [sum(costs[i] for i in p) for p in parts]
        # LPT: no shard is more than the costliest item above the lightest one.
        assert max(loads) - min(loads) <= max(costs) + 1e-9, (n, loads)
        assert all(p == sorted(p) for p in parts)  # each shard runs in catalog order


def test_a_shard_is_chosen_by_feature_id_not_by_position_in_a_list():
    feats = list(select(None))
    chosen, info = shard_select(feats, Shard(2, 3), ident=lambda f: f.id, operator=lambda f: f.operator)
    again, info2 = shard_select(list(feats), Shard(2, 3), ident=lambda f: f.id, operator=lambda f: f.operator)
    assert [f.id for f in chosen] == [f.id for f in again] and info == info2
    assert info["selected"] == len(feats) and info["items"] == len(chosen) and len(info["digest"]) == 64
    other, info3 = shard_select(feats[:-1], Shard(2, 3), ident=lambda f: f.id, operator=lambda f: f.operator)
    assert info3["digest"] != info["digest"]  # another selection: shards of it never merge with these


def _run(args, tmp_path):
    r = CliRunner().invoke(main, [*args, "--cache-dir", str(tmp_path / "cache")])
    return r


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """The slice on CPU unsharded (check --format json) and as 3 shards (probe --json)."""
    tmp = tmp_path_factory.mktemp("shards")
    whole = _run(["check", "--ep", "CPU", *SLICE, "--format", "json", "--output", str(tmp / "whole.json")], tmp)
    assert whole.exit_code in (0, 1), whole.output
    for k in (1, 2, 3):
        r = _run(["probe", "--ep", "CPU", *SLICE, "--shard", f"{k}/3", "--json", str(tmp / f"shard-{k}.json")], tmp)
        assert r.exit_code == 0, r.output
        assert f"shard {k}/3:" in r.output
    return tmp, whole.exit_code


def _cells(doc) -> dict:
    return {(r["feature"], r["ep"]): (r["outcome"], r["declared"]) for r in doc["results"]}


def test_merged_shards_give_the_unsharded_cells_and_verdict(sharded):
    tmp, whole_exit = sharded
    whole = json.loads((tmp / "whole.json").read_text())
    docs = [json.loads((tmp / f"shard-{k}.json").read_text()) for k in (1, 2, 3)]
    # Each shard is a normal saved result holding its part and saying which part it is.
    ids = [set(d["features"]) for d in docs]
    assert all(ids) and not (ids[0] & ids[1] or ids[0] & ids[2] or ids[1] & ids[2])
    assert set().union(*ids) == set(whole["features"])
    assert [d["shard"]["index"] for d in docs] == [1, 2, 3] and {d["shard"]["count"] for d in docs} == {3}
    assert len({d["shard"]["digest"] for d in docs}) == 1
    outcomes = {r["outcome"] for r in whole["results"]}
    assert {"PASS", "REJECTED", "SKIPPED"} <= outcomes, outcomes  # a slice with something to disagree on
    # The gate expects every feature it selects (issue 24): the merge selects the slice too.
    r = CliRunner().invoke(main, ["check", "--results", str(tmp / "shard-*.json"), *SLICE, "--format", "json",
                                  "--output", str(tmp / "merged.json")])
    assert r.exit_code == whole_exit, r.output
    merged = json.loads((tmp / "merged.json").read_text())
    assert merged["features"] == whole["features"]  # catalog order, as the unsharded run
    assert _cells(merged) == _cells(whole)
    assert merged["verdict"] == whole["verdict"] and merged["exit_code"] == whole["exit_code"]
    key = lambda f: (f["kind"], f["feature_id"], f["ep"], f["failing"], f["message"])  # noqa: E731
    assert sorted(map(key, merged["findings"])) == sorted(map(key, whole["findings"]))
    # And the unsharded result itself through the same merge: the same verdict.
    again = CliRunner().invoke(main, ["check", "--results", str(tmp / "whole.json"), *SLICE])
    assert again.exit_code == whole_exit and whole["verdict"] in again.output


def test_a_missing_shard_is_refused_naming_it(sharded):
    tmp, _ = sharded
    r = CliRunner().invoke(main, ["check", "--results", str(tmp / "shard-1.json"), "--results",
                                  str(tmp / "shard-3.json")])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert len(line.splitlines()) == 1 and "shard(s) 2/3" in line and "missing" in line, line


def test_a_shard_given_twice_is_refused_naming_both_files(sharded, tmp_path):
    tmp, _ = sharded
    for k in (1, 2, 3):
        shutil.copy(tmp / f"shard-{k}.json", tmp_path / f"a-{k}.json")
    shutil.copy(tmp / "shard-2.json", tmp_path / "b-2.json")
    r = CliRunner().invoke(main, ["check", "--results", str(tmp_path / "*.json")])
    assert r.exit_code == 2, r.output
    line = r.output.strip()
    assert len(line.splitlines()) == 1 and "shard 2/3" in line and "a-2.json" in line and "b-2.json" in line, line


def test_shards_of_another_selection_do_not_merge_with_these(sharded, tmp_path):
    tmp, _ = sharded
    r = _run(["probe", "--ep", "CPU", "--feature", "gqa.*", "--shard", "1/3", "--json", str(tmp_path / "other.json")],
             tmp_path)
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["check", "--results", str(tmp / "shard-2.json"), "--results",
                                  str(tmp / "shard-3.json"), "--results", str(tmp_path / "other.json")])
    assert r.exit_code == 2 and "missing" in r.output, r.output


def test_an_empty_shard_and_shard_with_results_are_usage_errors(tmp_path):
    r = _run(["check", "--ep", "CPU", "--feature", "gqa.softcap", "--shard", "2/2"], tmp_path)
    assert r.exit_code == 2 and "would run none" in r.output, r.output
    r = CliRunner().invoke(main, ["check", "--results", "x.json", "--shard", "1/2"])
    assert r.exit_code == 2 and "--shard cannot be used with --results" in r.output, r.output


def test_selftest_runs_only_its_shard(tmp_path):
    r = CliRunner().invoke(main, ["selftest", "--feature", "gqa.softcap*", "--shard", "1/2"])
    assert r.exit_code == 0, r.output
    assert "shard 1/2: 1 of 2 feature(s)" in r.output and "1 feature(s) x" in r.output, r.output
