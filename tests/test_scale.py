"""Memory that does not grow with the catalog (issue 29): the indexed probe file read one
record at a time, the probe set's bounded window, the cell store's evidence on disk,
reports written as they are made, saved results read one cell at a time; and a store or a
saved result cut short is a miss or one line, never a partial catalog served as whole."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import TODAY, make_matrix

from epaudit.audit import run
from epaudit.cache import index
from epaudit.cache.probecache import ProbeCache, encode_record, probe_key, read_probe
from epaudit.catalog import BY_ID, CATALOG_VERSION, FEATURES
from epaudit.cli import main
from epaudit.contract.cellstore import RECENT, CellStore, Evidence
from epaudit.contract.outcomes import Outcome
from epaudit.contract.results import Classified
from epaudit.run import probeset
from epaudit.run.probeset import ProbeSet
from epaudit.saved import stream
from epaudit.saved.read import SavedError
from epaudit.saved.read import load as load_whole

SMALL = [BY_ID[f] for f in ("gqa.softcap", "attention.scale", "attention.mask.bool")]


# --------------------------------------------------------------------------- the indexed file
def test_records_come_back_one_at_a_time_bit_for_bit(tmp_path):
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    built = {f.id: f.build() for f in FEATURES[:40]}
    assert c.store(built)
    reader = c.open()
    try:
        assert len(reader) == 40 and list(reader.ids()) == list(built)
        for fid, p in built.items():
            q = read_probe(reader, fid)
            assert q.feature_id == fid and q.subject.model == p.subject.model
            for k, v in p.subject.reference.items():
                assert q.subject.reference[k].tobytes() == v.tobytes()
        assert read_probe(reader, "no.such.feature") is None
    finally:
        reader.close()


def test_a_damaged_record_is_a_miss_of_that_probe_alone(tmp_path):
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    assert c.store({f.id: f.build() for f in SMALL})
    reader = c.open()
    offset, length, _ = reader._table[SMALL[1].id]
    reader.close()
    data = bytearray(c.path.read_bytes())
    data[offset + length // 2] ^= 0x01  # one bit of the middle record
    c.path.write_bytes(bytes(data))
    loaded = c.load()
    assert set(loaded) == {SMALL[0].id, SMALL[2].id}  # the damaged record is not served
    result = run(make_matrix("", gate='reference = ["CPU"]'), features=SMALL, today=TODAY, cache=c)
    assert [result.results[(f.id, "CPU")].outcome for f in SMALL] == [Outcome.PASS] * 3  # rebuilt
    assert set(c.load()) == {f.id for f in SMALL}  # and written again whole


@pytest.mark.parametrize("cut", [1, 81, 82, 1000, -1, -8, -57])
def test_a_file_cut_short_anywhere_is_absent_never_a_smaller_store(tmp_path, cut):
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    assert c.store({f.id: f.build() for f in SMALL})
    data = c.path.read_bytes()
    c.path.write_bytes(data[:cut] if cut > 0 else data[:len(data) + cut])
    assert c.open() is None and c.load() == {}


def test_a_writer_killed_before_commit_leaves_nothing_in_place(tmp_path):
    w = index.IndexWriter(tmp_path / "probes-x.bin", "a" * 64)
    w.add("one", encode_record(SMALL[0].build()))
    w.abort()
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the probe set
def test_the_probe_set_holds_a_bounded_window_however_many_probes(tmp_path, monkeypatch):
    monkeypatch.setattr(probeset, "KEEP", 4)
    monkeypatch.setattr(probeset, "AHEAD", 3)
    feats = list(FEATURES[:30])
    ps = ProbeSet(feats)
    try:
        first = ps[feats[0].id]
        assert not isinstance(first, str)
        ps._done.wait(0.5)
        assert not ps._done.is_set()  # it waits: at most AHEAD past the furthest probe asked for
        for f in feats:
            got = ps[f.id]
            assert not isinstance(got, str) and got.feature_id == f.id
            assert len(ps._kept) <= 4
        again = ps[feats[0].id]  # long evicted: read back from the spill file, the same bytes
        assert again is not first and again.subject.model == first.subject.model
    finally:
        ps.close()


def test_close_stops_building_at_once():
    ps = ProbeSet(list(FEATURES))
    ps[FEATURES[0].id]
    ps.close()
    assert ps._done.is_set()
    assert isinstance(ps[FEATURES[-1].id], str)  # never built: reads as an error, never a probe


# --------------------------------------------------------------------------- the cell store
def _cell(i: int) -> Classified:
    return Classified(f"f{i}", "CPU", Outcome.PASS, f"summary {i}",
                      {"i": i, "worst": [float("inf"), -0.0], "nested": {"x": None, "y": (1, 2)},
                       "np": np.float32(0.5)}, Outcome.PASS, 0.25)


def test_evidence_reads_back_as_written_and_as_a_dict():
    store = CellStore.of(_cell(i) for i in range(3))
    c = store[("f1", "CPU")]
    assert isinstance(c.evidence, Evidence) and isinstance(c.evidence, dict)
    want = {"i": 1, "worst": [float("inf"), -0.0], "nested": {"x": None, "y": [1, 2]}, "np": 0.5}
    assert c.evidence == want and dict(c.evidence) == want and {**c.evidence} == want
    assert json.loads(json.dumps(c.evidence)) == json.loads(json.dumps(want))  # the C encoder too
    assert c.evidence.get("nope") is None and "i" in c.evidence and len(c.evidence) == 4
    with pytest.raises(TypeError):
        c.evidence["i"] = 2
    assert (c.outcome, c.summary, c.control, c.seconds) == (Outcome.PASS, "summary 1", Outcome.PASS, 0.25)


def test_reading_every_cell_keeps_only_the_recent_ones_loaded():
    store = CellStore.of(_cell(i) for i in range(RECENT * 4))
    for key in store:
        assert store[key].evidence["i"] == int(key[0][1:])
    loaded = sum(1 for key in store if store[key].evidence._loaded)
    assert loaded <= RECENT
    assert store[("f0", "CPU")].evidence["i"] == 0  # unloaded long ago, loads again


def test_evidence_reads_back_from_the_write_buffer_and_the_file_alike(monkeypatch):
    """Cells are written in batches (``cellstore.WRITE_BATCH``): read back while still
    buffered, after their batch reached the file, and across many batch boundaries, each
    is the evidence written."""
    from epaudit.contract import cellstore

    monkeypatch.setattr(cellstore, "WRITE_BATCH", 300)  # a few records per batch
    store = CellStore.of(_cell(i) for i in range(50))
    f = store[("f0", "CPU")].evidence._file
    n = 50
    while not f._pending:  # the last batch just went out: one more cell stays buffered
        store.put(_cell(n))
        n += 1
    assert f._pending_at > 0 and f._pending  # some of it in the file, the rest still buffered
    for i in range(n):
        assert store[(f"f{i}", "CPU")].evidence["i"] == i
        assert store[(f"f{i}", "CPU")].evidence["nested"] == {"x": None, "y": [1, 2]}


def test_computed_evidence_keys_need_no_file_read():
    store = CellStore.of(_cell(i) for i in range(3))
    view = store.with_extra("layers", lambda key, c, facts: {"of": key[0]} if key[0] != "f2" else None)
    ev = view[("f0", "CPU")].evidence
    assert ev["layers"] == {"of": "f0"} and not ev._loaded
    assert dict(ev)["layers"] == {"of": "f0"}
    assert "layers" not in view[("f2", "CPU")].evidence  # None: left out


# --------------------------------------------------------------------------- reports and saved results
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("saved")
    r = CliRunner().invoke(main, ["probe", "--ep", "CPU", "--feature", "gqa.*", "--json", str(tmp / "gqa.json"),
                                  "--cache-dir", str(tmp / "cache")])
    assert r.exit_code == 0, r.output
    return tmp / "gqa.json"


def test_the_streamed_reader_reads_what_the_whole_file_reader_reads(saved):
    a, b = load_whole(saved), stream.load(saved)
    assert (a.features, a.eps, a.gate, a.declared, a.environment, a.machines) == \
           (b.features, b.eps, b.gate, b.declared, b.environment, b.machines)
    assert list(a.results) == list(b.results)
    for k in a.results:
        x, y = a.results[k], b.results[k]
        assert (x.outcome, x.summary, x.control, x.seconds) == (y.outcome, y.summary, y.control, y.seconds)
        assert dict(x.evidence) == dict(y.evidence)


def test_a_saved_result_cut_anywhere_is_refused_with_a_line(saved, tmp_path):
    data = saved.read_bytes()
    for i, cut in enumerate([1, 100, len(data) // 3, len(data) // 2, len(data) - 40, len(data) - 3]):
        bad = tmp_path / f"cut{i}.json"
        bad.write_bytes(data[:cut])
        with pytest.raises(SavedError) as exc:
            stream.load(bad)
        assert str(exc.value).startswith(str(bad)) and "\n" not in str(exc.value)
        r = CliRunner().invoke(main, ["check", "--results", str(bad)])
        assert r.exit_code == 2 and len(r.output.strip().splitlines()) == 1, r.output


def test_key_order_does_not_matter_to_the_streamed_reader(saved, tmp_path):
    doc = json.loads(saved.read_text())
    results = doc.pop("results")
    moved = tmp_path / "results-first.json"
    moved.write_text(json.dumps({"results": results, **doc}))  # cells before eps and features
    b = stream.load(moved)
    assert len(b.results) == len(results)
    doc["results"] = [dict(results[0], feature="no.such.feature")] + results[1:]
    moved.write_text(json.dumps({"results": doc.pop("results"), **doc}))
    with pytest.raises(SavedError, match=r"results\[0\]\.feature"):
        stream.load(moved)


def test_streamed_json_and_junit_reports_are_the_formatters_text(saved, tmp_path):
    import io

    from epaudit.report import FORMATS, WRITERS

    result = stream.load(saved)
    for fmt in ("json", "junit", "markdown", "html"):
        out = io.StringIO()
        WRITERS[fmt](result, out)
        assert out.getvalue() == FORMATS[fmt](result), fmt


def test_a_report_is_renamed_into_place_only_when_whole(tmp_path):
    from epaudit.cli.output import write_atomic_stream

    target = tmp_path / "r.json"
    target.write_text("old")

    def half(fh):
        fh.write("{\"half\": ")
        raise RuntimeError("stopped")

    with pytest.raises(RuntimeError):
        write_atomic_stream(str(target), half)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_a_spill_file_leaves_nothing_behind(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    ps = ProbeSet(SMALL)
    assert not isinstance(ps[SMALL[0].id], str)
    store = CellStore.of([_cell(0)])
    assert store[("f0", "CPU")].evidence["i"] == 0
    assert os.listdir(tmp_path) == []  # both files unlinked as soon as they were opened
    ps.close()


# --------------------------------------------------------------------------- what issue 24 keeps true
KEY = b"k" * 32


def test_a_streamed_signed_report_is_the_whole_documents_text_and_verifies(saved, tmp_path):
    """The streamed JSON writer signs what ``signing.sign`` of the whole document signs (the
    same run_id, versions and signature, the same bytes), and both readers verify it."""
    import io

    from epaudit.contract import signing
    from epaudit.report import json as json_report
    from epaudit.textenc import defang

    result = load_whole(saved)
    out = io.StringIO()
    json_report.write(result, out, key=KEY)
    whole = defang(json.dumps(signing.sign(json_report.to_dict(result), KEY), indent=2, allow_nan=False),
                   "json") + "\n"
    assert out.getvalue() == whole == json_report.format(result, key=KEY)
    doc = json.loads(whole)
    assert doc["run_id"] == json_report.run_id(result) and doc["versions"] == json_report.versions(result)
    assert signing.verify(doc, KEY) == ""
    path = tmp_path / "signed.json"
    path.write_text(whole)
    results_first = tmp_path / "signed-results-first.json"  # cells before keys that sort before them
    results_first.write_text(json.dumps({"results": doc["results"], **{k: v for k, v in doc.items() if k != "results"}}))
    for f in (path, results_first):
        for load in (load_whole, stream.load):
            assert load(f, key=KEY, require_signed=True).environment["signed"] is True
    doc["results"][-1]["summary"] += " (edited)"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    for load in (load_whole, stream.load):
        with pytest.raises(SavedError, match="signature does not match"):
            load(edited, key=KEY)
        with pytest.raises(SavedError, match="unsigned"):
            load(saved, key=KEY, require_signed=True)


@pytest.mark.parametrize("text, words", [
    ('{"schema_version": 3, "schema_version": 3}', "given twice"),
    ('{"results": [{"feature": "a", "feature": "b"}]}', "given twice"),
    ('{"schema_version": 1e999}', "beyond what a double holds"),
    ('{"schema_version": NaN}', "not strict JSON"),
    ('{"schema_version": 123456789012345678901}', "outside 64 bits"),
])
def test_the_streamed_reader_is_as_strict_as_the_whole_file_reader(tmp_path, text, words):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    for load in (load_whole, stream.load):
        with pytest.raises(SavedError, match=words):
            load(bad)


def test_an_indexed_cache_file_others_can_write_is_not_opened(tmp_path, capfd):
    """The trust rule (epaudit/cache/trust.py) holds for the indexed file: judged on the open file."""
    c = ProbeCache(tmp_path / "cache", probe_key(CATALOG_VERSION))
    assert c.store({f.id: f.build() for f in SMALL})
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o700 and c.path.stat().st_mode & 0o777 == 0o600
    assert c.open() is not None
    c.path.chmod(0o666)
    assert c.open() is None and c.load() == {}
    assert "is not trusted" in capfd.readouterr().err
    c.path.chmod(0o600)
    (tmp_path / "cache").chmod(0o777)
    assert c.open() is None and c.writer() is None
    (tmp_path / "cache").chmod(0o700)


def test_the_matrix_document_cache_is_trusted_like_the_probe_cache(tmp_path, monkeypatch, capfd):
    from epaudit.matrix import doccache

    monkeypatch.setenv("EPAUDIT_CACHE_DIR", str(tmp_path / "cache"))
    text = "x = 1\n" + "# padding\n" * (doccache.MIN_BYTES // 10)
    calls = []

    def parse(t):
        calls.append(1)
        return {"x": 1}

    assert doccache.loads(text, parse) == {"x": 1} and doccache.loads(text, parse) == {"x": 1}
    assert len(calls) == 1  # the second read came from the cache
    (written,) = (tmp_path / "cache" / "matrix").glob("toml-*.json")
    assert written.stat().st_mode & 0o777 == 0o600 and written.parent.stat().st_mode & 0o777 == 0o700
    written.write_text('{"x": 2}')  # planted: what the matrix declares
    written.chmod(0o666)
    assert doccache.loads(text, parse) == {"x": 1} and len(calls) == 2
    assert "is not trusted" in capfd.readouterr().err


def test_a_report_streamed_to_stdout_is_defanged_as_the_whole_text_would_be(capsys):
    """However the writer cuts its text, stdout gets ``defang`` of all of it; ``github``'s own
    annotations are workflow commands by design and pass as they are (docs/reliability.md)."""
    from epaudit.cli.output import stream_report
    from epaudit.textenc import defang

    text = "ok\n::error x\n  ##[group] y\nz ::w #\n#[ ::\n:" + ":tail"
    for style, what in (("text", "table"), ("json", "json"), ("markdown", "markdown"), ("xml", "junit")):
        for step in (1, 2, 3, 7, len(text)):
            stream_report(lambda fh: [fh.write(text[i:i + step]) for i in range(0, len(text), step)], None, what)
            assert capsys.readouterr().out == defang(text, style), (what, step)
    stream_report(lambda fh: fh.write("::error file=m.toml::x\n"), None, "github")
    assert capsys.readouterr().out == "::error file=m.toml::x\n"


def test_a_stored_cell_costs_a_few_hundred_bytes_whatever_its_evidence():
    """Issue 29: a run of 57,472 cells held ~1.5 KB each in memory (a Classified, an Evidence
    with its own dicts, a facts dict per cell); a stored cell is now one tuple, and equal
    facts are one dict."""
    import tracemalloc

    cells = [_cell(i) for i in range(4000)]
    store = CellStore()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for c in cells:
            store.put(c, facts={"claimed": True})
        per_cell = (tracemalloc.get_traced_memory()[0] - before) / len(cells)
    finally:
        tracemalloc.stop()
    assert per_cell < 400, f"{per_cell:.0f} bytes a cell"
    a, b = store.facts(("f1", "CPU")), store.facts(("f2", "CPU"))
    assert a == {"claimed": True} and a is b
    assert store[("f3999", "CPU")].evidence["i"] == 3999 and store[("f3999", "CPU")].summary == "summary 3999"


@pytest.mark.parametrize("pattern", ["onnx.*.r2", "onnx.Resize.*", "a*b]c", "x[ab]y.*.z", "*.opset1?",
                                     "gqa.*", "[!g]*.r1[0-9]", "*", "ab[cd", "attention.*.bool"])
def test_a_glob_matches_exactly_what_fnmatch_matches(pattern):
    """The literal-tail test a glob runs before its regex (issue 29: 3.25 million regex
    matches at 16x) never changes what it matches."""
    import fnmatch

    from epaudit.matrix.globs import Glob, GlobTable, resolve

    ids = ["onnx.Resize.a.r2", "onnx.Resize.b", "onnx.Add.x.r2", "a_b]c", "ab]c", "xay.q.z", "xcy.q.z",
           "gqa.softcap", "h.opset13", "h.opset1", "g.r10", "k.r11", "abc", "ab[cd", "attention.mask.bool",
           "attention.mask.bool.r2", "onnx.r2"]
    want = tuple(sorted(i for i in ids if fnmatch.fnmatchcase(i, pattern)))
    if not want:
        pytest.skip("matches nothing here")
    _, _, tables = resolve({}, {}, [GlobTable(Glob.compile(pattern), 1, {"CPU": "supported"})], ids)
    assert tuple(sorted(tables[0].matched)) == want
