"""Generated probes whose reference is wrong on our side, with the clause that decides.

Each entry is a shell-style pattern over generated probe ids and why the derived
reference cannot be trusted there; matching probes are not made (counted as ``known
reference problem``). Like :data:`epaudit.oracle.KNOWN`, every entry names the spec
text that decides; an entry is removed when the derivation learns to get it right.
"""

from __future__ import annotations

#: (id pattern, the deciding clause).
KNOWN: tuple[tuple[str, str], ...] = (
    ("onnx.Split.num_outputs=*",
     "Split-18 'num_outputs: Number of outputs to split parts of the tensor into' must equal the node's "
     "output count; a variation of it on a case with another count is an invalid node the checker "
     "does not catch (ORT splits by its outputs, the evaluator by the attribute)"),
    ("onnx.Resize.nearest_mode=floor.resize_downsample_scales_nearest.*",
     "Resize 'half_pixel: x_original = (x_resized + 0.5) / scale - 0.5' with scale = float32(0.6) = "
     "0.6000000238: at x_resized = 1 the exact value is 1.99999990 (floor 1, onnx.reference in float64) and "
     "float32 arithmetic gives 2.0 (floor 2, equal to round_prefer_floor); the probe's only difference from "
     "its control sits on that knife edge, which the spec's float arithmetic does not decide"),
    ("onnx.LpNormalization.p=*",
     "LpNormalization 'p: The order of the normalization, only 1 or 2 are supported': any other value is "
     "an invalid node the checker does not catch (onnx.reference computes it; ORT CPU refuses it, "
     "onnxruntime-webgpu 1.27 silently computes p = 2, read as IGNORED)"),
    # Found by the selftest's `ignore` fault (the control graph run on the subject's
    # feeds must read IGNORED): these controls are nodes ORT refuses, or ORT and
    # onnx.reference disagree on the control itself, so the probe cannot prove "ignored".
    ("onnx.Resize.mode.resize_*cubic_A_n0p5_exclude_outside.*",
     "Resize 'exclude_outside ... only applies to cubic': the control (mode back to nearest) keeps "
     "exclude_outside = 1, which ORT CPU refuses; onnx.reference ignores it"),
    ("onnx.Resize.mode.resize_tf_crop_and_resize*",
     "Resize tf_crop_and_resize with mode nearest (the control): ORT CPU and onnx.reference disagree on "
     "the control's values (2.4 apart); undecided, not found upstream"),
    ("onnx.ReverseSequence.*_axis.reversesequence_batch.*",
     "ReverseSequence 'batch_axis ... time_axis' must differ: the control with one of them back to its "
     "default makes them equal, which ORT CPU refuses"),
    ("onnx.STFT.frame_length.*", "STFT without frame_length and without window: ORT CPU refuses the "
     "control (the frame length cannot be known), onnx.reference infers it"),
    ("onnx.STFT.window.*", "STFT without window and without frame_length: as above"),
    ("onnx.Split.axis.split_*", "Split back to axis 0 with a `split` input or num_outputs made for axis 1 "
     "is an invalid node (sizes do not sum to the dimension): ORT CPU refuses the control"),
    ("onnx.MaxPool.*.maxpool_with_argmax_2d_precomputed_*",
     "MaxPool with Indices and storage_order = 1: ORT CPU and onnx.reference give the control another "
     "shape; undecided, not found upstream"),
    ("onnx.MaxUnpool.strides=*.maxunpool_export_with_output_shape.*",
     "MaxUnpool with output_shape: ORT unpools into output_shape whatever the strides (PR #2193, "
     "onnx#2726 'Definition of MaxUnpool is ambiguous'), onnx.reference pads by them"),
    ("onnx.OptionalHasElement.*", "OptionalHasElement with its optional input left out: ORT folds the "
     "control into a constant, no node reaches a kernel (placement unknown)"),
    # The operator itself (itself.py): a constant that is degenerate for the operator,
    # found by the selftest's `ignore` fault (ORT and onnx.reference disagree on the control).
    ("onnx.DynamicQuantizeLinear.input:x=zeros.*",
     "DynamicQuantizeLinear 'y_scale = (maximum(0, max(x)) - minimum(0, min(x))) / (qmax - qmin)' is 0 for "
     "an all-zero x, and 'y = saturate (round (x / y_scale) + y_zero_point)' divides 0 by 0: undefined "
     "(ORT CPU gives 0 scale and another y than onnx.reference)"),
    ("onnx.MeanVarianceNormalization.input:X=[zo][en]*",
     "MeanVarianceNormalization 'formula: (X-EX)/sqrt(E(X-EX)^2)': a constant X (zeros, ones) makes it 0/0, "
     "undefined; the function body adds epsilon 1e-9 (onnx.reference: 0), ORT CPU's kernel gives NaN"),
    ("onnx.MaxPool.strides=*.maxpool_with_argmax_2d_precomputed_strides.*",
     "MaxPool Indices with storage_order=1 ('column major'): ORT and onnx.reference disagree once strides "
     "make windows overlap; the spec text does not say which flattening of the overlapped window wins; "
     "undecided, not found upstream"),
)
