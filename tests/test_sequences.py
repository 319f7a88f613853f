"""The ONNX sequence and optional operator probes (epaudit/catalog/sequences.py) and their
references (epaudit/reference/sequences.py): values worked out by hand, every probe against
``onnx.reference`` on its subject and control graphs, the real CPU EP through epaudit's own
runner, and the self-test's faults on every probe.

``onnx.reference`` (onnx 1.23.2) wraps an ``Optional``'s value in a list (``return ([x],)``,
``onnx/reference/ops/op_optional.py``), while its own ``OptionalHasElement`` and
``OptionalGetElement`` take an optional as the value itself or ``None`` (the convention of
onnx PR #4835): an ``OptionalGetElement`` of it reads back ``[x]`` (one more axis) and an
empty ``Optional`` reads as holding an element. The comparison runs it with ``Optional``
returning its input itself (``None`` when empty), and one test records the stock behaviour.
"""

from __future__ import annotations


import numpy as np
import onnx
import pytest
from conftest import cpu_matrix
from onnx.reference import ReferenceEvaluator
from onnx.reference.op_run import OpRun
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import sequences
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, PROBE_NODE_NAME
from epaudit.reference import sequences as ref

FEATURES = sequences.FEATURES
BY_ID = {f.id: f for f in FEATURES}
OPS = {"SequenceConstruct", "SequenceAt", "SequenceLength", "SequenceInsert", "SequenceErase", "SequenceEmpty",
       "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalHasElement"}
_ONNX_TYPE = {"float32": "float", "float16": "float16", "int64": "int64", "int32": "int32"}


@pytest.fixture(scope="module")
def probes():
    return {f.id: f.build() for f in FEATURES}


class Optional(OpRun):
    """``Optional`` as the rest of onnx.reference reads optionals: the value itself, ``None``
    when empty (module docstring). The evaluator finds a replacement by its class name."""

    op_domain = ""

    def _run(self, x=None, type=None):  # noqa: A002 - the attribute's name
        return (x,)

    def _check_and_fix_outputs(self, res):
        return res if len(res) == 1 and res[0] is None else super()._check_and_fix_outputs(res)


def _onnx_reference(case, fixed: bool = True) -> list[np.ndarray]:
    model = onnx.load_from_string(case.model)
    evaluator = ReferenceEvaluator(model, new_ops=[Optional] if fixed else None)
    return [np.asarray(v) for v in evaluator.run(list(case.outputs), dict(case.feeds))]


# --------------------------------------------------------------------------- by hand
def _abc():
    a, b, c = (np.full((2, 3), v, dtype=np.float32) for v in (1.0, 2.0, 3.0))
    return a, b, c, ref.sequence_construct(a, b, c)


def test_length_position_insert_and_erase_by_hand():
    a, b, c, s = _abc()
    assert ref.sequence_length(s) == 3 and ref.sequence_length(s).dtype == np.int64
    assert ref.sequence_length(s).shape == ()
    np.testing.assert_array_equal(ref.sequence_at(s, np.array(-1)), c)  # the last tensor
    np.testing.assert_array_equal(ref.sequence_at(s, np.array(1, dtype=np.int32)), b)
    firsts = [float(t[0, 0]) for t in ref.sequence_insert(s, a * 9, np.array(0)).tensors]
    assert firsts == [9.0, 1.0, 2.0, 3.0]
    assert [float(t[0, 0]) for t in ref.sequence_insert(s, a * 9).tensors] == [1.0, 2.0, 3.0, 9.0]
    assert [float(t[0, 0]) for t in ref.sequence_insert(s, a * 9, np.array(-1)).tensors] == [1.0, 2.0, 9.0, 3.0]
    assert [float(t[0, 0]) for t in ref.sequence_erase(s).tensors] == [1.0, 2.0]
    assert [float(t[0, 0]) for t in ref.sequence_erase(s, np.array(-3)).tensors] == [2.0, 3.0]
    with pytest.raises(ValueError, match="outside"):
        ref.sequence_at(s, np.array(3))
    with pytest.raises(ValueError, match="same data type|into a sequence"):
        ref.sequence_insert(s, np.zeros((2, 3), dtype=np.int64))
    assert ref.sequence_length(ref.sequence_empty()) == 0 and ref.sequence_empty(7).dtype == np.int64


def test_split_and_concat_by_hand():
    x = np.arange(15, dtype=np.float32).reshape(5, 3)
    parts = ref.split_to_sequence(x, np.array(2)).tensors
    assert [p.shape for p in parts] == [(2, 3), (2, 3), (1, 3)]  # "The last chunk alone may be smaller"
    assert [p.shape for p in ref.split_to_sequence(x).tensors] == [(1, 3)] * 5
    assert [p.shape for p in ref.split_to_sequence(x, keepdims=0).tensors] == [(3,)] * 5
    kept = ref.split_to_sequence(x, np.array([1, 4]), keepdims=0).tensors  # keepdims ignored with split
    assert [p.shape for p in kept] == [(1, 3), (4, 3)]
    with pytest.raises(ValueError, match="split"):
        ref.split_to_sequence(x, np.array([1, 3]))
    _, _, _, s = _abc()
    assert ref.concat_from_sequence(s, axis=1).shape == (2, 9)
    stacked = ref.concat_from_sequence(s, axis=-1, new_axis=1)
    assert stacked.shape == (2, 3, 3) and stacked[0, 0].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="outside"):
        ref.concat_from_sequence(s, axis=2)


def test_optional_by_hand():
    x = np.ones(2, dtype=np.float32)
    assert bool(ref.optional_has_element(ref.optional(x))) and not ref.optional_has_element(ref.optional())
    assert bool(ref.optional_has_element(x)) and not ref.optional_has_element(None)
    np.testing.assert_array_equal(ref.optional_get_element(ref.optional(x)), x)
    with pytest.raises(ValueError, match="empty"):
        ref.optional_get_element(ref.optional())


def test_probe_references_hold_the_values_worked_out_by_hand(probes):
    p = probes["sequence.length.three_tensors"]
    assert p.subject.reference["n"] == 3.0 and p.control.reference["n"] == 2.0
    p = probes["sequence.at.negative_position"]
    np.testing.assert_array_equal(p.subject.reference["y"], p.subject.feeds["c"].astype(np.float64))
    np.testing.assert_array_equal(p.control.reference["y"], p.subject.feeds["a"].astype(np.float64))
    p = probes["sequence.insert.position"]
    assert p.subject.reference["y"].shape == (3, 2, 3)
    np.testing.assert_array_equal(p.subject.reference["y"][0], p.subject.feeds["t"])
    np.testing.assert_array_equal(p.control.reference["y"][2], p.subject.feeds["t"])
    p = probes["sequence.split.scalar_split"]
    assert (p.subject.reference["n"], p.subject.reference["first"].shape, p.subject.reference["last"].shape) \
        == (3.0, (2, 3), (1, 3))
    assert p.control.reference["n"] == 5.0
    assert probes["sequence.empty.default_dtype"].subject.reference["n"] == 0.0
    assert probes["optional.construct.empty"].subject.reference["h"] == 0.0
    assert probes["optional.has_element.tensor"].subject.reference["h"] == 1.0
    assert probes["optional.has_element.tensor"].control.reference["h"] == 0.0
    has = probes["optional.has_element.optional"]  # y = Where(h, a, b): a when true, b when false
    np.testing.assert_array_equal(has.subject.reference["y"], has.subject.feeds["a"].astype(np.float64))
    np.testing.assert_array_equal(has.control.reference["y"], has.subject.feeds["b"].astype(np.float64))


# --------------------------------------------------------------------------- the catalog
def test_catalog_metadata():
    from onnxruntime.capi.onnxruntime_pybind11_state import get_registered_ep_kernel_defs

    ids = [f.id for f in FEATURES]
    assert len(ids) == len(set(ids)) == 40
    assert {f.op_type for f in FEATURES} == OPS
    kernels: dict[str, set[str]] = {}
    for k in get_registered_ep_kernel_defs("CPUExecutionProvider"):
        if k.domain in ("", "ai.onnx") and k.op_name in OPS:
            kernels.setdefault(k.op_name, set()).update(t for ts in k.type_constraints.values() for t in ts)
    for op in OPS:
        types = {f.dtype for f in FEATURES if f.op_type == op}
        assert "float32" in types and len(types) >= 2, (op, types)
    for f in FEATURES:
        assert f.id.split(".")[0] in ("sequence", "optional") and f.domain == "" and f.opset == 21, f.id
        assert f.changes and "\n" not in f.changes and "spec; reference epaudit/reference/sequences.py" in f.source
        schema = onnx.defs.get_schema(f.op_type, 21)
        assert f"ONNX {f.op_type}-{schema.since_version} spec" in f.source
        names = {i.name for i in schema.inputs}
        assert set(f.uses.inputs + f.uses.absent) <= names, f.id
        assert set(f.uses.attributes) <= set(schema.attributes), f.id
        t = _ONNX_TYPE[f.dtype]
        assert {f"tensor({t})", f"seq(tensor({t}))"} & kernels[f.op_type], (f.id, "not registered on CPU")


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_probe_is_well_formed_and_decisive(fid, probes):
    p, f = probes[fid], BY_ID[fid]
    assert p.feature_id == fid and p.dtype == f.dtype and p.node_name == PROBE_NODE_NAME
    for case in (p.subject, p.control):
        model = onnx.load_from_string(case.model)
        onnx.checker.check_model(model, full_check=True)
        probed = [n for n in model.graph.node if n.name == PROBE_NODE_NAME]
        assert len(probed) == 1 and probed[0].op_type == f.op_type and probed[0].domain == ""
        assert all(n.name == "" for n in model.graph.node if n is not probed[0])  # helpers unnamed (module docstring)
        assert tuple(o.name for o in model.graph.output) == case.outputs
        assert all(o.type.HasField("tensor_type") for o in list(model.graph.input) + list(model.graph.output))
        assert set(case.feeds) <= {i.name for i in model.graph.input}
        assert case.exact == frozenset(case.outputs)  # copies, counts and bools: exact
    assert p.subject.outputs == p.control.outputs
    assert_control_runs_on_subject_arrays(p)
    assert separation(p) >= MIN_SEPARATION


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_references_equal_onnx_reference(fid, probes):
    p = probes[fid]
    for role, case in (("subject", p.subject), ("control", p.control)):
        for name, got in zip(case.outputs, _onnx_reference(case)):
            want = case.reference[name]
            assert got.shape == want.shape, (role, name, got.shape, want.shape)
            np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=f"{role} {name}")


def test_stock_onnx_reference_wraps_optionals_in_a_list(probes):
    """What the module docstring says of onnx 1.23.2's Optional: measured, so a fixed onnx shows here."""
    tensor = probes["optional.construct.tensor"].subject
    got = _onnx_reference(tensor, fixed=False)
    assert got[0].shape == (1, 2, 3) and tensor.reference["y"].shape == (2, 3)
    empty = probes["optional.construct.empty"].subject
    assert bool(_onnx_reference(empty, fixed=False)[1]) is True and empty.reference["h"] == 0.0


# --------------------------------------------------------------------------- real CPU sessions

def test_cpu_ep_passes_every_probe_through_the_runner():
    from epaudit.audit import run
    from epaudit.contract.outcomes import Outcome

    m = cpu_matrix("sequence.*", "optional.*", feature_ids=BY_ID)
    result = run(m, features=list(FEATURES))
    got = {f.id: result.results[(f.id, "CPU")] for f in FEATURES}
    assert {fid: c.outcome for fid, c in got.items() if c.outcome is not Outcome.PASS} == {}
    for fid, c in got.items():
        assert all(x["match"] and x.get("exact") for x in c.evidence["comparison"].values()), fid
        assert c.evidence["placement_verdict"]["kind"] == "on_ep", fid
    assert result.gate.exit_code == 0


def test_selftest_catches_every_fault_on_every_probe():
    """Every fault, on every probe; ``nan`` is not applicable where every output is an integer
    or a bool, and ``decompose`` reads DECOMPOSED because the helper nodes are unnamed."""
    from epaudit.run.faults import not_applicable
    from epaudit.run.selftest import FAULTS, run_selftest

    result = run_selftest(list(FEATURES), faults=FAULTS)
    assert result.misses == (), [(m.feature_id, m.fault, m.summary) for m in result.misses]
    for f in FEATURES:
        assert result.clean[f.id].got is not None and result.clean[f.id].detected, f.id
        for fault in FAULTS:
            d = result.cells[(f.id, fault)]
            if fault == "nan" and not_applicable("nan", f.build()):
                continue
            assert d.applies and d.detected, (f.id, fault, d.summary)
    named = ("ignore", "refuse", "fallback", "perturb", "unwritten")
    assert sum(1 for (_, fault), d in result.cells.items() if fault in named and d.applies) == 5 * len(FEATURES)
