"""epaudit sweep: configurations, references, shrinking, saved findings (docs/sweep.md).

Seeds are built here (one-node models of the catalog's contract), so the suite needs no
generated catalog; every run is a real ORT session on the CPU EP, faults included.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper

from epaudit import catalog
from epaudit.catalog import found
from epaudit.catalog.models import one_node_model
from epaudit.contract.outcomes import Outcome
from epaudit.contract.probes import TOLERANCES, Case, Feature, Probe, Tolerance
from epaudit.matrix.load import parse
from epaudit.matrix.model import MatrixError, Provider
from epaudit.reference.pool import average_pool, max_pool, pool_geometry
from epaudit.sweep import findings, save, sweep, write_repros
from epaudit.sweep.build import Built, Skip, build
from epaudit.sweep.config import Config, Input, finding_id
from epaudit.sweep.engine import draw_configs
from epaudit.sweep.shrink import candidates
from epaudit.sweep.space import Space
from epaudit.sweep.values import draw

CPU = Provider("CPU", "CPUExecutionProvider")


def seed(fid: str, op: str, opset: int, inputs, outputs, attrs=None) -> Feature:
    """A catalog-shaped feature whose subject is one ``op`` node (a sweep seed)."""
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, _, s in inputs}
    model = one_node_model(op, "", opset, inputs, [(o, "float32") for o in outputs], attrs or {})
    case = Case(model, feeds, tuple(outputs), {o: np.zeros(1) for o in outputs})
    probe = Probe(fid, case, None, TOLERANCES["float32"], "float32")
    return Feature(fid, op, "", opset, "float32", "seed", "test", build=lambda: probe)


CONV = seed("test.conv", "Conv", 11, [("X", "float32", [1, 1, 5, 5]), ("W", "float32", [1, 1, 3, 3])], ["Y"])
POOL = seed("test.avgpool", "AveragePool", 11, [("x", "float32", [1, 1, 4, 4])], ["y"], {"kernel_shape": [2, 2]})
ADD = seed("test.add", "Add", 14, [("A", "float32", [3, 4]), ("B", "float32", [3, 4])], ["C"])


# --------------------------------------------------------------------------- configurations
def test_configurations_are_deterministic_for_a_seed_and_budget():
    space = Space.of([CONV])
    a = [c.key for c in draw_configs(space, 30, 7, "ai.onnx.Conv")]
    b = [c.key for c in draw_configs(space, 30, 7, "ai.onnx.Conv")]
    c = [c.key for c in draw_configs(space, 30, 8, "ai.onnx.Conv")]
    assert a == b and a != c
    # channel counts around the vector and block widths are drawn
    chans = {json.loads(k)["inputs"][0][2][1] for k in a}
    assert len(chans) > 3


def test_a_finding_id_is_the_configuration_s_hash():
    cfg = Config("Conv", "", 11, (Input("X", "float32", (1, 9, 5, 5)), Input("W", "float32", (1, 9, 3, 3))), ("Y",))
    fid = finding_id(cfg)
    assert fid.startswith("sweep.Conv.") and len(fid.split(".")[-1]) == 10
    assert finding_id(cfg) == fid and finding_id(cfg.with_attr("group", 1)) != fid


def test_value_kinds_hit_decision_points():
    rng = np.random.default_rng(1)
    ties = draw("ties", "float32", (200,), rng)
    assert np.all(np.abs((ties / 2.0 ** np.floor(np.log2(np.abs(ties) + 1e-30))) % 0.5) < 1) and \
        np.all(np.mod(ties * 2 ** 2, 1) == 0) and np.any(np.mod(ties, 1) == 0.5)
    special = draw("special", "float32", (50,), rng)
    assert np.isnan(special).any() and np.isinf(special).any()
    ext = draw("extremes", "int8", (100,), rng)
    assert ext.min() == -128 and ext.max() == 127
    assert draw("normal", "float16", (3,), np.random.default_rng(5)).dtype == np.float16


def test_a_config_onnx_refuses_is_skipped_with_its_reason_never_raised():
    cfg = Config("Conv", "", 11, (Input("X", "float32", (1, 2, 4, 4)), Input("W", "float32", (1, 3, 3, 3))), ("Y",),
                 opsets=(("", 11),))  # W's channels are not X's
    made = build(cfg)
    assert isinstance(made, Skip) and made.reason in ("onnx rejects", "reference raised")
    big = Config("Relu", "", 14, (Input("X", "float32", (512, 512)),), ("Y",), opsets=(("", 14),))
    assert build(big) == Skip("too large")


def test_a_built_config_has_a_float64_reference_and_a_control():
    cfg = Config("Conv", "", 11, (Input("X", "float32", (1, 9, 5, 5)), Input("W", "float32", (1, 9, 3, 3))), ("Y",),
                 opsets=(("", 11),), seed=3)
    made = build(cfg)
    assert isinstance(made, Built)
    m = onnx.load_from_string(made.probe.subject.model)
    assert m.ir_version == 6 and m.graph.node[0].name == "probe"  # opset 11 needs IR 6
    assert made.probe.subject.reference["Y"].dtype == np.float64 and made.probe.subject.reference["Y"].shape == (1, 1, 3, 3)
    assert made.probe.control is not None  # X baked in as zeros


def test_shrink_candidates_go_toward_one_default_and_zero():
    cfg = Config("AveragePool", "", 19, (Input("x", "float32", (1, 16, 5, 5)),), ("y",),
                 attributes=(("count_include_pad", 1), ("kernel_shape", (3, 3)), ("pads", (0, 0, 1, 1))),
                 values="normal", seed=5)
    cands = candidates(cfg)
    keys = {c.key for c in cands}
    assert cfg.with_attr("count_include_pad", None).key in keys  # toward the default
    assert any(c.inputs[0].shape == (1, 1, 5, 5) for c in cands)  # a dimension toward 1
    assert any(c.attrs.get("pads") == (0, 0, 0, 1) for c in cands)  # a pad toward 0
    assert any(c.values == "zeros" for c in cands) and any(c.seed == 0 for c in cands)


@pytest.mark.parametrize("dtype", ["uint64", "int64", "uint8", "int8", "uint32"])
def test_integer_extremes_are_drawn_in_every_integer_type(dtype):
    """The ``extremes`` and ``large`` value kinds reach each type's own bounds (uint64's
    maximum does not fit the int64 the pool was built in: the full catalog sweep stopped
    with an OverflowError traceback on a uint64 input)."""
    from epaudit.sweep.values import draw

    info = np.iinfo(dtype)
    got = draw("extremes", dtype, (64,), np.random.default_rng(3))
    assert got.dtype == np.dtype(dtype) and {int(info.min), int(info.max)} <= {int(v) for v in got}
    large = draw("large", dtype, (64,), np.random.default_rng(3))
    assert large.dtype == np.dtype(dtype) and int(info.max - 1) in {int(v) for v in large}


def test_a_type_that_cannot_hold_a_fixed_value_is_not_drawn():
    """Pad's ``constant_value`` shares ``data``'s type: retyped to int8, a constant 128 has
    no counterpart, so the configuration keeps its type (the full catalog sweep stopped with
    an OverflowError traceback on it); one that fits is retyped with it."""
    from epaudit.sweep.config import Config, Input
    from epaudit.sweep.space import retype

    cfg = Config("Pad", "", 19, (Input("data", "float32", (2, 3)), Input("pads", "int64", (4,), "param", (0, 1, 0, 1)),
                                 Input("constant_value", "float32", (), "param", (128.0,))), ("output",))
    assert retype(cfg, "int8") is cfg
    ok = retype(cfg, "int16")
    assert [x.dtype for x in ok.inputs] == ["int16", "int64", "int16"] and ok.inputs[2].value == (128.0,)
    assert retype(_replace_value(cfg, (float("nan"),)), "int32").inputs[0].dtype == "float32"


def _replace_value(cfg, value):
    from dataclasses import replace

    return replace(cfg, inputs=(*cfg.inputs[:2], replace(cfg.inputs[2], value=value)))


# --------------------------------------------------------------------------- references
def test_tolerance_matches_a_propagated_nan_with_nan_only():
    tol = TOLERANCES["float32"]
    e = np.array([np.nan, 1.0, np.inf])
    assert tol.close(np.array([np.nan, 1.0, np.inf]), e).all()
    assert not tol.close(np.array([10.0, 1.0, np.inf]), e)[0]  # Max(NaN, 10) -> 10: wrong
    assert not tol.close(np.array([1.0, np.nan, np.inf]), e)[1]


@given(st.lists(st.sampled_from([0.0, 1.0, -2.5, 1e-3, np.nan, np.inf, -np.inf]), min_size=1, max_size=6),
       st.lists(st.sampled_from([0.0, 1.0, -2.5, 1.0005, np.nan, np.inf, -np.inf]), min_size=6, max_size=6))
@settings(max_examples=200, deadline=None)
def test_the_classifier_compares_as_the_tolerance_does(ref, got):
    """``classify.compare.compare`` (what every cell's outcome is decided from) holds each
    element to ``Tolerance.close``: NaN for NaN and equal infinities are close, NaN for a
    number or a number for NaN is not. A sweep of Max with NaN inputs read MISMATCH on
    every release while each answered NaN, the spec's value, until it did."""
    from epaudit.classify.compare import compare

    tol = TOLERANCES["float32"]
    e, a = np.array(ref), np.array(got[:len(ref)], np.float32)
    want = tol.close(a, e)
    c = compare({"y": a}, {"y": e}, tol)["y"]
    assert c["match"] == bool(want.all()) and c["bad"] == int(np.count_nonzero(~want))
    assert (c["max_ratio"] <= 1.0) == bool(want.all())  # the worst element is the one that fails
    assert not np.isnan(c["max_rel"]) and not np.isnan(c["max_abs"])


def test_pool_reference_keeps_the_window_that_starts_in_the_begin_pad():
    # onnx.reference gives [0, 0.5]; window 0 holds 3 pad rows and the input row
    y = average_pool(np.ones((1, 1, 1, 1)), [4, 1], strides=[3, 1], pads=[3, 0, 1, 0], ceil_mode=1,
                     count_include_pad=1)
    assert y.ravel().tolist() == [0.25, 0.5]


def test_pool_reference_counts_end_pads_and_drops_the_overhang():
    # count_include_pad with end-only pads (ORT #24681 / PR #27375): the last row divides by 4
    y = average_pool(np.ones((1, 1, 2, 2)), [2, 2], pads=[0, 0, 1, 1], count_include_pad=1)
    assert y[0, 0].tolist() == [[1.0, 0.5], [0.5, 0.25]]
    # ceil_mode: the last window ends past the input; only the explicit pad counts (onnx #6650)
    # (the MLAS path of ORT <= 1.28 divided the last one by 3: ORT #16203, PR #29629)
    y = average_pool(np.arange(6.0).reshape(1, 1, 1, 6), [1, 3], strides=[1, 2], ceil_mode=1, count_include_pad=1)
    assert y[0, 0, 0].tolist() == [1.0, 3.0, 4.5]
    # a last window that would start in the end pad is dropped (MaxPool-22, onnx #5741)
    assert pool_geometry([4], [2], [2], [0, 1], ceil_mode=1)[0] == [2]
    assert max_pool(np.arange(4.0).reshape(1, 1, 4), [2], strides=[2], pads=[0, 1], ceil_mode=1).ravel().tolist() == \
        [1.0, 3.0]


def test_lp_normalization_p1_reference_divides_by_the_sum_of_absolute_values():
    """onnx.reference (1.23.2) sums ``x**p`` without ``abs``: p=1 of ``[1, -2, 1]`` reads
    ``[0, 0, 0]``; the definition and ORT's CPU kernel give ``[0.25, -0.5, 0.25]``. The sweep
    builds its reference from epaudit's (six false findings of the full CPU sweep)."""
    from epaudit.reference.norms import lp_normalization_reference

    x = np.array([[1.0, -2.0, 1.0], [0.0, 0.0, 0.0]])
    assert lp_normalization_reference(x, axis=-1, p=1).tolist() == [[0.25, -0.5, 0.25], [0.0, 0.0, 0.0]]
    assert np.allclose(lp_normalization_reference(x, axis=-1, p=2)[0], np.array([1, -2, 1]) / np.sqrt(6))
    cfg = Config("LpNormalization", "", 22, (Input("input", "float32", (1, 3)),), ("output",),
                 attributes=(("axis", -1), ("p", 1)), values="normal", seed=1)
    made = build(cfg)
    assert isinstance(made, Built)
    feed = made.probe.subject.feeds["input"].astype(np.float64)
    want = feed / np.abs(feed).sum(axis=-1, keepdims=True)
    assert np.allclose(made.probe.subject.reference["output"], want.astype(np.float32), rtol=0, atol=0)


def test_a_flag_attribute_is_swept_through_zero_and_one_only():
    """``periodic``, ``sorted`` and the other flags the spec defines as 0 or 1 are never drawn
    as a neighbour (-1, 2): the full CPU sweep read HannWindow ``periodic=-1`` and TopK
    ``sorted=2`` as failures. A plain integer (``axis``) still gets its neighbours."""
    from epaudit.sweep.space import FLAGS

    topk = Config("TopK", "", 11, (Input("X", "float32", (3, 4)), Input("K", "int64", (1,), "param", (2,))),
                  ("Values", "Indices"), attributes=(("axis", 1), ("largest", 1), ("sorted", 1)))
    space = Space([topk], {"axis": [1], "largest": [1], "sorted": [1]})
    rng = np.random.default_rng(11)
    seen: dict[str, set] = {"sorted": set(), "largest": set(), "axis": set()}
    for _ in range(300):
        got = space._attributes(topk, rng).attrs
        for k in seen:
            seen[k].add(got.get(k))
    assert {"sorted", "largest"} <= FLAGS
    assert seen["sorted"] <= {0, 1, None} and seen["largest"] <= {0, 1, None}
    assert {0, 1} <= seen["sorted"]
    assert {0, 2} <= seen["axis"]  # a neighbour of 1 on both sides is still drawn


def test_onnx_reference_fixes_follow_the_spec_where_onnx_reference_does_not():
    """Each value is one the full CPU sweep measured (docs/sweep.md): onnx.reference gives
    -inf, 2.5, -2.0 and 1.414 here; the spec and ORT 1.31.1 give these."""
    from epaudit.reference.onnx_fixes import log_softmax, lrn, nll_loss, softmax_cross_entropy_loss
    from epaudit.reference.pool import lp_pool

    assert log_softmax(np.array([[[0.0], [-2578.35083]]]), axis=1).ravel().tolist() == [0.0, -2578.35083]
    assert log_softmax(np.array([[1.0, 2.0], [3.0, 3.0]]), opset=11).tolist()[1] == [np.log(0.5)] * 2
    y = lrn(np.array([11.0, 2.5]).reshape(1, 2, 1, 1), 3)
    assert y.ravel()[1] == pytest.approx(2.5 / (1 + 1e-4 / 3 * (121 + 6.25)) ** 0.75, rel=1e-12)
    x = np.array([1.0, -3.0, 4.0, 4.0]).reshape(1, 2, 2)
    assert float(nll_loss(x, np.array([[-1, 1]]), ignore_index=-1)) == -4.0  # one sample not ignored
    assert float(nll_loss(x, np.array([[0, 1]]), np.array([1.0, 3.0]))) == pytest.approx((-1 - 12) / 4)
    assert nll_loss(x, np.array([[0, 1]]), reduction="none").tolist() == [[-1.0, -4.0]]
    with pytest.raises(ValueError, match="outside"):
        nll_loss(x, np.array([[-3, 1]]))
    loss, log_prob = softmax_cross_entropy_loss(np.zeros((2, 4)), np.array([1, 3]))
    assert float(loss) == pytest.approx(np.log(4)) and log_prob.shape == (2, 4)
    from epaudit.reference.onnx_fixes import unique

    got = unique(np.array([2, 1, 1, 3, 4, 3]), None, 0)  # the spec's example 1
    assert [got[k].tolist() for k in ("Y", "indices", "inverse_indices", "counts")] == \
        [[2, 1, 3, 4], [0, 1, 3, 4], [0, 1, 1, 2, 3, 2], [1, 2, 2, 1]]
    assert unique(np.zeros((1, 2)), -1, 0)["Y"].shape == (1, 1)  # onnx.reference: (1, 2)
    ones = np.ones((1, 1, 1, 2))
    assert lp_pool(ones, [3, 3], pads=[0, 1, 2, 1], strides=[1, 2], ceil_mode=1).ravel().tolist() == \
        pytest.approx([np.sqrt(2), 1.0])


def test_loss_targets_are_class_indices_and_a_weight_of_another_size_is_outside_the_spec():
    """NLL's ``target`` is drawn in [0, C) with some ``ignore_index`` and its weight positive;
    a weight not of size C is skipped as ``outside the spec`` (the full CPU sweep read 12
    such configurations, negative targets and 5 weights for 4 classes, as failures)."""
    ok = Config("NegativeLogLikelihoodLoss", "", 22, (Input("input", "float32", (3, 4, 5)),
                                                      Input("target", "int64", (3, 5)), Input("weight", "float32", (4,))),
                ("loss",), attributes=(("ignore_index", 2),), values="normal", seed=4)
    made = build(ok)
    assert isinstance(made, Built)
    feeds = made.probe.subject.feeds
    assert feeds["target"].min() >= 0 and feeds["target"].max() <= 3 and (feeds["weight"] > 0).all()
    bad = Config("NegativeLogLikelihoodLoss", "", 22, (Input("input", "float32", (3, 4, 5)),
                                                       Input("target", "int64", (3, 5)), Input("weight", "float32", (5,))),
                 ("loss",), values="normal", seed=4)
    skip = build(bad)
    assert isinstance(skip, Skip) and skip.reason == "outside the spec" and "weight [5] for C = 4" in skip.detail
    zeros = Config("DynamicQuantizeLinear", "", 11, (Input("x", "float32", (3,)),), ("y", "y_scale", "y_zero_point"),
                   values="zeros")
    assert build(zeros).reason == "undefined result"


def test_shapes_and_indices_the_spec_fixes_are_outside_the_spec_when_broken():
    """A WebGPU sweep read these as failures; the spec calls each an error (sweep/rules.py)."""
    from epaudit.sweep.rules import outside

    lstm = Config("LSTM", "", 14, (Input("X", "float32", (1, 1, 1)), Input("W", "float32", (1, 1, 1)),
                                   Input("R", "float32", (1, 1, 2))), ("Y",), attributes=(("hidden_size", 1),))
    assert "the spec: W [1, 4, 1], R [1, 4, 1]" in outside(lstm)
    ok = Config("LSTM", "", 14, (Input("X", "float32", (1, 1, 3)), Input("W", "float32", (1, 8, 3)),
                                 Input("R", "float32", (1, 8, 2))), ("Y",), attributes=(("hidden_size", 2),))
    assert outside(ok) == ""
    gather = Config("GatherElements", "", 13, (Input("data", "float32", (2, 1)),
                                               Input("indices", "int64", (2, 2), "param", (0, 0, 1, 0))), ("y",),
                    attributes=(("axis", 1),))
    assert "outside [-1, 0] along axis 1" in outside(gather)
    assert outside(gather.with_attr("axis", 0)) == ""
    rope = Config("RotaryEmbedding", "", 23, (Input("input", "float32", (2, 1, 1, 4)), Input("cos_cache", "float32", (5, 2)),
                                              Input("sin_cache", "float32", (5, 2)), Input("position_ids", "int64", (1, 1))),
                  ("output",))
    assert "position_ids [1, 1]" in outside(rope)
    assert build(lstm).reason == "outside the spec"


def test_a_float64_norm_with_a_float32_stage_one_is_judged_at_float32s_bound():
    """GroupNormalization-21's default ``stash_type=1`` computes mean and variance in float:
    a float64 node is bounded by float32's tolerance, not float64's (the full CPU sweep read
    a 2.5e-8 difference as MISMATCH)."""
    cfg = Config("GroupNormalization", "", 21, (Input("x", "float64", (1, 2, 2, 2)), Input("scale", "float64", (2,)),
                                                Input("bias", "float64", (2,))), ("y",),
                 attributes=(("num_groups", 2),), values="normal", seed=2)
    made = build(cfg)
    assert isinstance(made, Built)
    assert made.probe.tolerance.atol >= TOLERANCES["float32"].atol
    wide = build(cfg.with_attr("stash_type", 11))
    assert isinstance(wide, Built) and wide.probe.tolerance.atol < TOLERANCES["float32"].atol


# --------------------------------------------------------------------------- the sweep on real sessions
def test_the_clean_cpu_ep_shows_no_failure():
    r = sweep({"ai.onnx.Add": [ADD]}, [CPU], budget=15, seed=2)
    assert r.failures == [] and r.exit_code == 0
    assert sum(r.operators[0].outcomes["CPU"].values()) == r.operators[0].built > 0


def test_a_broken_ep_is_found_and_shrunk_to_a_configuration_that_still_shows_it(tmp_path):
    broken = Provider("BROKEN", "CPUExecutionProvider", inject_fault="perturb")
    r = sweep({"ai.onnx.Conv": [CONV]}, [broken], budget=3, seed=1)
    assert r.exit_code == 1
    f = next(f for f in r.failures if f.outcome is Outcome.MISMATCH)
    assert f.config.elements <= f.original.elements and f.shrink["tried"] > 0
    assert all(d == 1 for x in f.config.inputs if x is not None for d in x.shape[:2])  # N and C shrunk to 1
    write_repros(r, tmp_path)
    assert (tmp_path / f"{f.id}-BROKEN" / "repro.py").is_file()
    # the repro, run without the fault, passes: the EP (not the reference) was wrong
    out = subprocess.run([sys.executable, str(tmp_path / f"{f.id}-BROKEN" / "repro.py")], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_a_crash_is_a_failure_and_a_refusal_is_not():
    kill = Provider("KILL", "CPUExecutionProvider", inject_fault="kill")
    r = sweep({"ai.onnx.Add": [ADD]}, [kill], budget=2, seed=0, shrink=False)
    assert {f.outcome for f in r.failures} == {Outcome.CRASH}
    refuse = Provider("REFUSE", "CPUExecutionProvider", inject_fault="refuse")
    r = sweep({"ai.onnx.Add": [ADD]}, [refuse], budget=4, seed=0)
    assert r.failures == [] and r.operators[0].notes["refused"] > 0


def test_an_interrupted_sweep_is_incomplete():
    import threading

    stop = threading.Event()
    stop.set()
    r = sweep({"ai.onnx.Add": [ADD]}, [CPU], budget=5, stop=stop)
    assert r.incomplete and r.exit_code == 3


def test_the_sweep_selftest_finds_and_shrinks_faults():
    from epaudit.sweep.selftest import run

    rows, clean = run({"ai.onnx.Add": [ADD]}, budget=3, faults=("ignore", "nan", "refuse"))
    assert clean == 0
    assert [(r.fault, r.ok) for r in rows] == [("ignore", True), ("nan", True), ("refuse", True)], rows


# --------------------------------------------------------------------------- saved findings
@pytest.fixture
def saved(tmp_path):
    """A findings file holding one minimal failure of the perturb fault (a right reference:
    the clean CPU EP passes it, as a release with the defect fixed would)."""
    broken = Provider("BROKEN", "CPUExecutionProvider", inject_fault="perturb")
    r = sweep({"ai.onnx.Add": [ADD]}, [broken], budget=2, seed=0)
    path = tmp_path / "found.toml"
    assert save(r, str(path)) >= 1
    ids = [f.id for f in findings(r)]
    yield path, ids
    catalog.forget(ids)


def _matrix(path, cells=""):
    return textwrap.dedent(f"""\
        schema_version = 1
        [catalog]
        findings = ["{path}"]
        [gate]
        reference = []
        gated = []
        [providers.CPU]
        name = "CPUExecutionProvider"
        """) + cells


def test_saved_findings_round_trip_and_join_the_catalog(saved):
    path, ids = saved
    back = found.load(path)
    assert [f.id for f in back] == ids
    m = parse(_matrix(path), "m.toml")
    assert m.findings == (str(path),)
    assert all(i in catalog.BY_ID for i in ids)
    parse(_matrix(path), "m.toml")  # loaded again: the same findings, no error


def test_a_fixed_finding_reads_stale_under_an_unsupported_declaration(saved):
    from epaudit.audit import run as run_audit

    path, ids = saved
    cells = "".join(f'[features."{i}"]\nCPU = {{ status = "unsupported", issue = "https://example.com/1", '
                    f'until = 2099-01-01 }}\n' for i in ids)
    m = parse(_matrix(path, cells), "m.toml")
    result = run_audit(m, features=[catalog.BY_ID[i] for i in ids])
    assert all(result.results[(i, "CPU")].outcome is Outcome.PASS for i in ids)
    kinds = {f.kind.value for f in result.gate.findings}
    assert "stale" in kinds and result.gate.exit_code == 1


@pytest.mark.parametrize("edit, problem", [
    (lambda t: t.replace('format = "epaudit-findings/1"', 'format = "x"'), "format"),
    (lambda t: t.replace('id = "sweep.', 'id = "gqa.', 1), "finding[0].id"),
    (lambda t: t.replace('model = "', 'model = "!!', 1), "finding[0].model"),
    (lambda t: t + "\n[[finding]]\nid = 3\n", "finding[1]"),
])
def test_a_bad_findings_file_is_one_line_naming_file_key_and_line(saved, edit, problem):
    path, ids = saved
    catalog.forget(ids)
    path.write_text(edit(path.read_text()))
    with pytest.raises(MatrixError) as exc:
        parse(_matrix(path), "m.toml")
    msg = str(exc.value)
    assert "\n" not in msg and "m.toml" in msg and "catalog.findings" in msg and str(path) in msg and problem in msg


def test_a_missing_findings_file_is_a_matrix_error(tmp_path):
    with pytest.raises(MatrixError, match="cannot read"):
        parse(_matrix(tmp_path / "nope.toml"), "m.toml")
    with pytest.raises(MatrixError, match="must be a list"):
        parse(_matrix(tmp_path / "x").replace('findings = ["', 'findings = "').replace('x"]', 'x"'), "m.toml")


# --------------------------------------------------------------------------- the command
def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "epaudit", *args], capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, needle", [
    ((), "name what to sweep"),
    (("--op", "NoSuchOp"), "--op NoSuchOp"),
    (("--op", "Add", "--save", "x.txt"), "--save x.txt"),
    (("--op", "Add", "--budget", "0"), "--budget"),
])
def test_usage_errors_are_one_line_exit_2(args, needle, tmp_path):
    out = _cli("sweep", *args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert needle in out.stderr and "Traceback" not in out.stderr
