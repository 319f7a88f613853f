"""Probes for the ``com.microsoft`` sampling operators (version 1): ``GridSample`` (the
contrib schema, not ONNX's GridSample-16/20) and ``CropAndResize``.

GridSample: X (1, 2, 5, 6), a grid (1, 4, 3, 2) drawn uniformly from [−1, 1] (or [−1.7, 1.7]
where the padding mode is the feature, so that samples land outside the image).
CropAndResize: X (2, 3, 6, 7), three boxes on images [0, 1, 1], crops of 4x5.
References from :mod:`epaudit.reference.sampling`.

Controls: the operator itself bakes in a zero grid (every sample reads the image centre)
or a zero image; ``mode``, ``padding_mode``, ``align_corners`` and ``extrapolation_value``
are reset to the schema defaults (bilinear, zeros, 0, 0.0); ``batch_indices`` is baked in
as zeros (every box reads image 0).

Sources: ORT ``docs/ContribOperators.md`` (the schema points GridSample at
``torch.nn.functional.grid_sample``), ``onnxruntime/core/providers/cpu/tensor/grid_sample.cc``
(the kernel the contrib schema is registered with) and ``onnxruntime/contrib_ops/cpu/crop_and_resize.cc``
(TensorFlow's crop_and_resize).
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference import sampling as ref
from . import _xcase as x

_MS = "com.microsoft"
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
GRIDSAMPLE = x.XOp("GridSample", _MS, 1, ("X", "Grid"), ("Y",),
                   lambda v, a: {"Y": ref.grid_sample(v["X"], v["Grid"], a.get("mode", "bilinear"),
                                                      a.get("padding_mode", "zeros"), int(a.get("align_corners", 0)))})
CROPANDRESIZE = x.XOp("CropAndResize", _MS, 1, ("X", "rois", "batch_indices", "crop_size"), ("Y",),
                      lambda v, a: {"Y": ref.crop_and_resize(v["X"], v["rois"], v["batch_indices"], v["crop_size"],
                                                             a.get("mode", "bilinear"),
                                                             float(a.get("extrapolation_value", 0.0)))},
                      input_dtypes={"batch_indices": "int32", "crop_size": "int32"})


def _grid_graph(seed: int, attrs: Mapping[str, object], spread: float = 1.0) -> x.Graph:
    rng = np.random.default_rng(seed)
    grid = x.rounded(rng.uniform(-spread, spread, (1, 4, 3, 2)), "float32")
    return x.Graph("float32", dict(attrs), {"X": x.normal(rng, (1, 2, 5, 6)), "Grid": grid}, ("Y",))


def _grid_zero(fid: str, seed: int) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _grid_graph(seed, {})
        return x.probe(GRIDSAMPLE, fid, g, g.baked(Grid=np.zeros_like(g.feeds["Grid"])))
    return build


def _grid_attr(fid: str, seed: int, attrs: Mapping[str, object], drop: tuple[str, ...], spread: float = 1.0
               ) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _grid_graph(seed, attrs, spread)
        return x.probe(GRIDSAMPLE, fid, g, g.without(attrs=drop))
    return build


_ROIS = [[0.1, 0.05, 0.8, 0.9], [0.0, 0.3, 0.6, 1.0], [0.25, 0.0, 1.0, 0.7]]
_ROIS_OUT = [[-0.3, 0.05, 0.8, 1.2], [0.0, -0.4, 1.3, 1.0], [0.25, 0.0, 1.0, 0.7]]


def _crop_graph(seed: int, attrs: Mapping[str, object], rois=_ROIS) -> x.Graph:
    rng = np.random.default_rng(seed)
    feeds = {"X": x.normal(rng, (2, 3, 6, 7)), "rois": x.rounded(np.array(rois), "float32"),
             "batch_indices": np.array([0, 1, 1]), "crop_size": np.array([4, 5])}
    return x.Graph("float32", dict(attrs), feeds, ("Y",))


def _crop_zero_x() -> Probe:
    g = _crop_graph(9101, {})
    return x.probe(CROPANDRESIZE, "cropandresize.basic", g, g.baked(X=np.zeros_like(g.feeds["X"])))


def _crop_batch() -> Probe:
    g = _crop_graph(9102, {})
    return x.probe(CROPANDRESIZE, "cropandresize.batch_indices", g,
                   g.baked(batch_indices=np.zeros_like(g.feeds["batch_indices"])))


def _crop_attr(fid: str, seed: int, attrs: Mapping[str, object], rois=_ROIS) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _crop_graph(seed, attrs, rois)
        return x.probe(CROPANDRESIZE, fid, g, g.without(attrs=tuple(attrs)))
    return build


_f = x.feature
_GS = f"{_DOC}GridSample; onnxruntime/core/providers/cpu/tensor/grid_sample.cc; torch grid_sample"
_CR = f"{_DOC}CropAndResize; onnxruntime/contrib_ops/cpu/crop_and_resize.cc CropAndResizeForward"

#: GridSample and CropAndResize features.
FEATURES = (
    _f(GRIDSAMPLE, "gridsample.basic", "float32",
       "bilinear, zeros padding, align_corners 0: X (1,2,5,6) at a (1,4,3,2) grid; control bakes in a zero grid",
       _GS, _grid_zero("gridsample.basic", 9001)),
    _f(GRIDSAMPLE, "gridsample.mode.nearest", "float32", "mode=nearest; control bilinear",
       f"{_GS}: attribute 'mode'", _grid_attr("gridsample.mode.nearest", 9002, {"mode": "nearest"}, ("mode",)),
       Use(attributes={"mode": "nearest"})),
    _f(GRIDSAMPLE, "gridsample.mode.bicubic", "float32", "mode=bicubic (4x4 Keys taps, a=-0.75); control bilinear",
       f"{_GS}: attribute 'mode'", _grid_attr("gridsample.mode.bicubic", 9003, {"mode": "bicubic"}, ("mode",)),
       Use(attributes={"mode": "bicubic"})),
    _f(GRIDSAMPLE, "gridsample.padding_mode.border", "float32",
       "padding_mode=border on a grid in [-1.7,1.7] (samples outside the image); control zeros",
       f"{_GS}: attribute 'padding_mode'",
       _grid_attr("gridsample.padding_mode.border", 9004, {"padding_mode": "border"}, ("padding_mode",), 1.7),
       Use(attributes={"padding_mode": "border"})),
    _f(GRIDSAMPLE, "gridsample.padding_mode.reflection", "float32",
       "padding_mode=reflection on a grid in [-1.7,1.7]; control zeros",
       f"{_GS}: attribute 'padding_mode'",
       _grid_attr("gridsample.padding_mode.reflection", 9005, {"padding_mode": "reflection"}, ("padding_mode",), 1.7),
       Use(attributes={"padding_mode": "reflection"})),
    _f(GRIDSAMPLE, "gridsample.align_corners", "float32", "align_corners=1 (extrema on corner centres); control 0",
       f"{_GS}: attribute 'align_corners'",
       _grid_attr("gridsample.align_corners", 9006, {"align_corners": 1}, ("align_corners",)),
       Use(attributes={"align_corners": NON_DEFAULT})),
    _f(GRIDSAMPLE, "gridsample.align_corners.bicubic_border", "float32",
       "bicubic with border padding and align_corners=1 on a grid in [-1.7,1.7]; control align_corners 0",
       f"{_GS}: 'mode' bicubic with 'padding_mode' border",
       _grid_attr("gridsample.align_corners.bicubic_border", 9007,
                  {"mode": "bicubic", "padding_mode": "border", "align_corners": 1}, ("align_corners",), 1.7),
       Use(attributes={"mode": "bicubic", "padding_mode": "border", "align_corners": NON_DEFAULT})),
    _f(CROPANDRESIZE, "cropandresize.basic", "float32",
       "bilinear 4x5 crops of 3 boxes inside X (2,3,6,7); control bakes in X = 0", _CR, _crop_zero_x),
    _f(CROPANDRESIZE, "cropandresize.batch_indices", "float32",
       "boxes on images [0,1,1]; control bakes in batch_indices = 0 (every box on image 0)",
       f"{_CR}: input 'batch_indices'", _crop_batch),
    _f(CROPANDRESIZE, "cropandresize.mode.nearest", "float32", "mode=nearest; control bilinear",
       f"{_CR}: attribute 'mode'", _crop_attr("cropandresize.mode.nearest", 9103, {"mode": "nearest"}),
       Use(attributes={"mode": "nearest"})),
    _f(CROPANDRESIZE, "cropandresize.extrapolation_value", "float32",
       "extrapolation_value=2.5 for samples of boxes reaching outside the image; control 0",
       f"{_CR}: attribute 'extrapolation_value'",
       _crop_attr("cropandresize.extrapolation_value", 9104, {"extrapolation_value": 2.5}, _ROIS_OUT),
       Use(attributes={"extrapolation_value": NON_DEFAULT})),
)
