"""The experimental ai.onnx operator probes (epaudit/catalog/experimental.py) and their
references (epaudit/reference/experimental.py): values worked out by hand, every probe well
formed and decisive, the real CPU EP through epaudit's own runner, and the self-test's faults.

The seven operators onnx dropped (Affine, Crop, ImageScaler, ParametricSoftplus, ScaledTanh,
Scale, DynamicSlice) have no schema in onnx 1.23.2, so ``onnx.checker`` is run only on the
GlobalLpPool and MaxRoiPool models.
"""

from __future__ import annotations


import numpy as np
import onnx
import pytest
from conftest import cpu_matrix
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import experimental
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, PROBE_NODE_NAME
from epaudit.reference import experimental as ref

FEATURES = experimental.FEATURES
BY_ID = {f.id: f for f in FEATURES}
OPS = {"Affine", "Crop", "ImageScaler", "ParametricSoftplus", "ScaledTanh", "Scale", "DynamicSlice",
       "GlobalLpPool", "MaxRoiPool"}
_ORT_TYPE = {"float32": "tensor(float)", "float16": "tensor(float16)", "float64": "tensor(double)"}


@pytest.fixture(scope="module")
def probes():
    return {f.id: f.build() for f in FEATURES}


# --------------------------------------------------------------------------- by hand
def test_elementwise_references_by_hand():
    np.testing.assert_array_equal(ref.affine(np.array([1.0, -2.0]), 2.0, 0.5), [2.5, -3.5])
    np.testing.assert_array_equal(ref.affine(np.array([1.0, -2.0])), [1.0, -2.0])  # defaults 1, 0
    np.testing.assert_array_equal(ref.scale(np.array([1.5, -2.0]), 3.0), [4.5, -6.0])
    np.testing.assert_allclose(ref.scaled_tanh(np.array([0.0, 2.0]), 2.0, 0.5), [0.0, 2.0 * np.tanh(1.0)])
    np.testing.assert_allclose(ref.parametric_softplus(np.array([0.0, 4.0]), 2.0, 0.5),
                               [2.0 * np.log(2.0), 2.0 * np.log(np.exp(2.0) + 1.0)])
    assert np.isfinite(ref.parametric_softplus(np.array([1000.0]), 1.0, 1.0)).all()  # no overflow
    x = np.ones((1, 2, 1, 2))
    np.testing.assert_array_equal(ref.image_scaler(x, [1.0, -1.0], 3.0), [[[[4.0, 4.0]], [[2.0, 2.0]]]])
    with pytest.raises(ValueError, match="C biases"):
        ref.image_scaler(x, [1.0, 2.0, 3.0])


def test_crop_and_slice_by_hand():
    x = np.arange(20.0).reshape(1, 1, 4, 5)
    np.testing.assert_array_equal(ref.crop(x, [1, 2, 0, 1])[0, 0], [[11, 12, 13, 14]])  # rows 2..3, cols 1..5
    np.testing.assert_array_equal(ref.crop(x, [1, 1, 0, 0], [2, 2])[0, 0], [[6, 7], [11, 12]])
    with pytest.raises(ValueError, match="past"):
        ref.crop(x, [0, 3, 0, 2])
    data = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    np.testing.assert_array_equal(ref.dynamic_slice(data, [1, 0], [2, 3], [0, 1]), [[5, 6, 7]])  # schema example 1
    np.testing.assert_array_equal(ref.dynamic_slice(data, [0, 1], [-1, 1000]), [[2, 3, 4]])  # schema example 2
    np.testing.assert_array_equal(ref.dynamic_slice(data, [-3], [-1], [-1]), [[2, 3], [6, 7]])


def test_pool_references_by_hand():
    x = np.array([3.0, -4.0, 0.0, 0.0]).reshape(1, 1, 2, 2)
    np.testing.assert_array_equal(ref.global_lp_pool(x), [[[[5.0]]]])  # sqrt(9 + 16)
    assert ref.global_lp_pool(np.full((1, 1, 2, 2), 2.0), 3)[0, 0, 0, 0] == pytest.approx(32.0 ** (1 / 3))
    img = np.arange(16.0).reshape(1, 1, 4, 4)
    # ROI x 0..3, y 0..1: a 2x4 region in 2x2 bins (bin 1 row, 2 columns): the max of each bin
    got = ref.max_roi_pool(img, [[0, 0, 0, 3, 1]], [2, 2])
    np.testing.assert_array_equal(got[0, 0], [[1.0, 3.0], [5.0, 7.0]])
    # spatial_scale 0.5 halves [0, 0, 0, 6, 2] (rounded half away from zero) to the same ROI
    np.testing.assert_array_equal(ref.max_roi_pool(img, [[0, 0, 0, 6, 2]], [2, 2], 0.5), got)
    with pytest.raises(ValueError, match="num_rois, 5"):
        ref.max_roi_pool(img, [[0, 0, 0, 3]], [2, 2])


def test_probe_references_hold_the_values_worked_out_by_hand(probes):
    p = probes["experimental.affine.alpha_beta"]
    x = p.subject.feeds["X"].astype(np.float64)
    np.testing.assert_allclose(p.subject.reference["Y"], 2.0 * x + 0.5, rtol=0, atol=0)
    np.testing.assert_array_equal(p.control.reference["Y"], x)
    p = probes["experimental.crop.border"]
    assert p.subject.reference["output"].shape == (2, 3, 3, 6) and p.control.reference["output"].shape == (2, 3, 6, 7)
    p = probes["experimental.dynamicslice.starts"]
    np.testing.assert_array_equal(p.subject.reference["output"], p.subject.feeds["data"][1:3, 2:5])
    p = probes["experimental.maxroipool.rois"]  # all-zero ROIs: every bin is pixel (0, 0) of image 0
    corner = p.subject.feeds["X"][0, :, 0, 0].astype(np.float64)
    np.testing.assert_array_equal(p.control.reference["Y"], np.broadcast_to(corner[None, :, None, None], (3, 3, 2, 2)))


# --------------------------------------------------------------------------- the catalog
def test_catalog_metadata():
    from onnxruntime.capi.onnxruntime_pybind11_state import get_all_operator_schema, get_registered_ep_kernel_defs

    ids = [f.id for f in FEATURES]
    assert len(ids) == len(set(ids)) and {f.op_type for f in FEATURES} == OPS
    kernels: dict[str, set[str]] = {}
    for k in get_registered_ep_kernel_defs("CPUExecutionProvider"):
        if k.domain in ("", "ai.onnx") and k.op_name in OPS:
            assert k.version_range[0] <= experimental.OPSET, k.op_name
            kernels.setdefault(k.op_name, set()).update(k.type_constraints.get("T", ()))
    schemas = {}
    for s in get_all_operator_schema():
        if s.domain == "" and s.name in OPS and s.since_version <= experimental.OPSET:
            if s.since_version > schemas.get(s.name, (0, None))[0]:
                schemas[s.name] = (s.since_version, s)
    assert set(schemas) == OPS
    for f in FEATURES:
        assert f.id.startswith("experimental." + f.op_type.lower() + ".") and f.domain == "" and f.opset == 9, f.id
        assert f.changes and "\n" not in f.changes and "epaudit/reference/experimental.py" in f.source
        schema = schemas[f.op_type][1]
        assert set(f.uses.inputs) <= {i.name for i in schema.inputs}, f.id
        assert set(f.uses.attributes) <= set(schema.attributes), f.id
        assert _ORT_TYPE[f.dtype] in kernels[f.op_type], (f.id, "not registered on CPU")
    for op in OPS:  # a float16 or float64 feature wherever the CPU kernel registers one
        types = {f.dtype for f in FEATURES if f.op_type == op}
        assert "float32" in types
        assert {"float16", "float64"} <= types or not {"tensor(float16)", "tensor(double)"} & kernels[op], op


def _check(model, case) -> None:
    """``onnx.checker`` (full) on a copy whose outputs carry the reference's shapes: the probe
    outputs leave theirs to inference, which the checker of an ai.onnx-9 model refuses
    ("Field 'shape' of 'type' is required but missing", onnx 1.23.2)."""
    checked = onnx.ModelProto()
    checked.CopyFrom(model)
    for out in checked.graph.output:
        dims = out.type.tensor_type.shape.dim
        for n in case.reference[out.name].shape:
            dims.add().dim_value = n
    onnx.checker.check_model(checked, full_check=True)


@pytest.mark.parametrize("fid", sorted(BY_ID))
def test_probe_is_well_formed_and_decisive(fid, probes):
    p, f = probes[fid], BY_ID[fid]
    assert p.feature_id == fid and p.dtype == f.dtype and p.node_name == PROBE_NODE_NAME
    for case in (p.subject, p.control):
        model = onnx.load_from_string(case.model)
        assert [(o.domain, o.version) for o in model.opset_import] == [("", 9)]
        if f.op_type in ("GlobalLpPool", "MaxRoiPool"):  # the others have no onnx schema (module docstring)
            _check(model, case)
        (node,) = model.graph.node
        assert node.name == PROBE_NODE_NAME and node.op_type == f.op_type and node.domain == ""
        assert tuple(o.name for o in model.graph.output) == case.outputs
        assert set(case.feeds) <= {i.name for i in model.graph.input}
    assert p.subject.outputs == p.control.outputs
    assert_control_runs_on_subject_arrays(p)
    assert separation(p) >= MIN_SEPARATION


# --------------------------------------------------------------------------- real CPU sessions

def test_cpu_ep_passes_every_probe_through_the_runner():
    from epaudit.audit import run
    from epaudit.contract.outcomes import Outcome

    m = cpu_matrix("experimental.*", feature_ids=BY_ID)
    result = run(m, features=list(FEATURES))
    got = {f.id: result.results[(f.id, "CPU")] for f in FEATURES}
    assert {fid: c.outcome for fid, c in got.items() if c.outcome is not Outcome.PASS} == {}
    for fid, c in got.items():
        assert all(x["match"] for x in c.evidence["comparison"].values()), fid
        assert c.evidence["placement_verdict"]["kind"] == "on_ep", fid
    assert result.gate.exit_code == 0


def test_selftest_catches_every_fault_on_every_probe():
    from epaudit.run.selftest import run_selftest

    named = ("ignore", "refuse", "fallback", "perturb", "unwritten")
    result = run_selftest(list(FEATURES), faults=named)
    assert result.misses == (), [(m.feature_id, m.fault, m.summary) for m in result.misses]
    for f in FEATURES:
        assert result.clean[f.id].got is not None and result.clean[f.id].detected, f.id
        for fault in named:
            d = result.cells[(f.id, fault)]
            assert d.applies and d.detected, (f.id, fault, d.summary)
