"""Type variants of generated probes (epaudit/catalog/corpus/types.py) and the matrix rule
that gives a variant its base's cell: values, references, tolerances, drops, real CPU
sessions and the self-test's faults on variants."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from conftest import CPU_ONLY
from epaudit.cache.probecache import decode_probe
from epaudit.catalog.corpus import build as gbuild
from epaudit.catalog.corpus import types as vtypes
from epaudit.contract.probes import MIN_SEPARATION, TOLERANCES, type_variant_of
from epaudit.matrix.load import parse

OPS = {"Add", "Pow", "Clip"}


@pytest.fixture(scope="module")
def built(cache_dir):
    return gbuild.build(cache_dir, ops=OPS, jobs=2, say=lambda line: None)


@pytest.fixture(scope="module")
def by_id(built):
    return {r["id"]: r for r in built["probes"]}


def _p(rec):
    return decode_probe(rec["probe"])


def _features(built, fids):
    """The catalog features of ``fids`` from this module's build (their probes in memory)."""
    from dataclasses import replace

    from epaudit.catalog.corpus import feature

    recs = {r["id"]: r for r in built["probes"]}
    return [replace(feature(recs[f]), build=lambda p=_p(recs[f]): p) for f in fids]


BASE = "onnx.Add.input:A=zeros.add.opset14"
HEAD = CPU_ONLY



def test_float16_variant_feeds_rounded_values_and_its_reference_is_their_float64_sum(by_id):
    base, v = _p(by_id[BASE]), _p(by_id[BASE + ".float16"])
    rec = by_id[BASE + ".float16"]
    assert rec["dtype"] == "float16" and rec["base"] == BASE and rec["opset"] == 14
    x, y = v.subject.feeds["x"], v.subject.feeds["y"]
    assert x.dtype == np.float16 and y.dtype == np.float16
    np.testing.assert_array_equal(x, base.subject.feeds["x"].astype(np.float16))
    # the reference is computed from the rounded values, in float64: exact for a sum of two
    np.testing.assert_array_equal(v.subject.reference["sum"], x.astype(np.float64) + y.astype(np.float64))
    np.testing.assert_array_equal(v.control.reference["sum"], y.astype(np.float64))  # A baked in as zeros
    assert v.tolerance.rtol == TOLERANCES["float16"].rtol and v.dtype == "float16"
    assert rec["separation"] >= MIN_SEPARATION
    import onnx

    m = onnx.load_from_string(v.subject.model)
    assert {vi.elem_type if False else vi.type.tensor_type.elem_type for vi in m.graph.input} == {
        onnx.TensorProto.FLOAT16}
    c = onnx.load_from_string(v.control.model)
    assert c.graph.initializer[0].data_type == onnx.TensorProto.FLOAT16


def test_integer_variant_scales_float_values_into_range_and_is_exact(by_id):
    base, v = _p(by_id[BASE]), _p(by_id[BASE + ".int8"])
    x = base.subject.feeds["x"]
    np.testing.assert_array_equal(v.subject.feeds["x"], np.clip(np.rint(x * vtypes.INT_SCALE), -128, 127).astype(np.int8))
    s = v.subject.feeds["x"].astype(np.int64) + v.subject.feeds["y"]
    np.testing.assert_array_equal(v.subject.reference["sum"], s.astype(np.float64))
    assert v.subject.exact == frozenset({"sum"}) and v.tolerance.rtol == 0.0


def test_unsigned_variant_takes_magnitudes():
    got = vtypes.convert(np.array([-1.2, 0.4, 3.0], np.float32), "uint8")
    np.testing.assert_array_equal(got, np.array([5, 2, 12], np.uint8))
    assert vtypes.convert(np.array(2.0, np.float32), "int32").shape == ()  # 0-d stays an array
    assert vtypes.convert(np.array([1e5], np.float32), "float16") is None  # float16 infinity


def test_integer_overflow_is_dropped_not_made(built, by_id):
    # Pow's case: 12 ** 24 in int64 (the spec leaves overflow undefined)
    assert "onnx.Pow.input:X=zeros.pow_example.opset15.int64" not in by_id
    assert "onnx.Pow.input:X=zeros.pow_example.opset15" in by_id
    assert built["drops"]["out of range for the type"] > 0


def test_types_follow_the_schema_and_the_cpu_registry(by_id):
    import onnx.defs

    made = {fid.rsplit(".", 1)[1] for fid in by_id if fid.startswith(BASE + ".")}
    _, allowed = vtypes.first_param(onnx.defs.get_schema("Add", 14, ""))
    assert made <= set(allowed) and "float16" in made and "float64" in made
    assert "bfloat16" not in made  # no numpy dtype: counted, not made
    assert type_variant_of(BASE + ".float16") == BASE and type_variant_of(BASE) is None


def test_selftest_catches_every_fault_on_type_variants(built, cache_dir, monkeypatch):
    """Real CPU sessions: each broken EP reads as its fault on float16, float64 and int32 variants."""
    from epaudit.run.selftest import run_selftest

    feats = _features(built, [BASE + ".float16", BASE + ".float64", BASE + ".int32"])
    result = run_selftest(feats, faults=("ignore", "refuse", "fallback", "perturb", "unwritten"))
    assert result.misses == (), [(m.feature_id, m.fault, m.summary) for m in result.misses]
    assert sum(1 for d in result.cells.values() if d.got is not None and d.detected) == 15


def test_cpu_runs_the_variants_and_notes_a_type_it_does_not_register(built):
    """float16 Add: the CPU EP registers no float16 Add kernel (onnxruntime 1.31) yet runs the
    node (ORT inserts casts to float): PASS by its numbers, and an ``unregistered`` note."""
    from epaudit.audit import run
    from epaudit.contract.outcomes import FindingKind, Outcome
    from epaudit.matrix.load import parse as mparse

    fids = [BASE + ".float16", BASE + ".float64", BASE + ".int64"]
    feats = _features(built, fids)
    m = mparse(HEAD + '[features."onnx.*"]\nCPU = "supported"\n', "m.toml", feature_ids=fids)
    result = run(m, features=feats)
    assert {f: result.results[(f, "CPU")].outcome for f in fids} == {f: Outcome.PASS for f in fids}
    layers = {f: result.results[(f, "CPU")].evidence.get("layers") for f in fids}
    assert layers[BASE + ".float64"]["registered"] is True
    notes = {x.feature_id for x in result.gate.findings if x.kind is FindingKind.UNREGISTERED}
    assert (BASE + ".float16" in notes) == (layers[BASE + ".float16"]["registered"] is False)
    # a large run's terminal report collapses those notes into one line per EP
    from epaudit.report.summary import grouped_warnings

    listed, counted = grouped_warnings(result.gate.findings)
    assert counted.get("unregistered CPU", 0) == len(notes)
    assert not any(f.kind is FindingKind.UNREGISTERED for f in listed)


# ------------------------------------------------------------------ the matrix's rule
IDS = ["onnx.Add.x.add.opset7", "onnx.Add.x.add.opset7.float16", "onnx.Add.x.add.opset7.int8",
       "onnx.Add.x.add.opset14", "onnx.Add.x.add.opset14.float16"]
GAP = '{ status = "unsupported", issue = "https://example.org/1", until = 2027-01-01 }'


def _decl(cells: str, fid: str):
    m = parse(HEAD + textwrap.dedent(cells), "m.toml", feature_ids=IDS)
    d = m.declaration(fid, "CPU")
    return None if d is None else (d.status, d.key)


def test_a_variant_takes_the_cell_of_its_base_when_nothing_more_specific_names_it():
    cells = f'''\
        [features."onnx.*"]
        CPU = "supported"
        [features."onnx.*.opset7"]
        CPU = {GAP}
        '''
    assert _decl(cells, "onnx.Add.x.add.opset7.float16") == ("unsupported", "onnx.*.opset7")
    assert _decl(cells, "onnx.Add.x.add.opset14.float16") == ("supported", "onnx.*")


def test_a_type_glob_beats_a_less_specific_base_key_but_not_an_exact_one():
    cells = f'''\
        [features."onnx.*"]
        CPU = "supported"
        [features."onnx.Add.*.float16"]
        CPU = {GAP}
        [features."onnx.Add.x.add.opset14"]
        CPU = "supported"
        '''
    assert _decl(cells, "onnx.Add.x.add.opset7.float16") == ("unsupported", "onnx.Add.*.float16")
    assert _decl(cells, "onnx.Add.x.add.opset7.int8") == ("supported", "onnx.*")
    # an exact base key decides its variants; only a key naming the variant itself beats it
    assert _decl(cells, "onnx.Add.x.add.opset14.float16") == ("supported", "onnx.Add.x.add.opset14")


def test_observed_page_gives_the_per_type_picture():
    """PyTorch OpInfo's claimed-vs-working dtypes: from per-cell layers to the four lists."""
    from epaudit.contract.outcomes import Outcome
    from epaudit.surface.coverage import _count_type, type_picture

    by_type: dict = {}
    cells = [("float32", True, Outcome.PASS), ("float64", True, Outcome.REJECTED),
             ("float64", True, Outcome.REJECTED), ("float16", False, Outcome.PASS),
             ("int8", False, Outcome.REJECTED), ("float32", True, Outcome.MISMATCH)]
    for dtype, registered, outcome in cells:
        _count_type(by_type, {"dtype": dtype, "registered": registered}, outcome)
    assert by_type["float64"] == {"registered": True, "probed": 2, "passed": 0, "outcomes": {"REJECTED": 2}}
    assert type_picture(by_type) == {"working": ["float16", "float32"], "registered_not_working": ["float64"],
                                     "working_not_registered": ["float16"], "not_working": ["float64", "int8"]}
