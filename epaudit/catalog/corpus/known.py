"""Generated probes whose reference is wrong on our side, with the clause that decides.

Each entry is a shell-style pattern over generated probe ids and why the derived
reference cannot be trusted there; matching probes are not made (counted as ``known
reference problem``). Like :data:`epaudit.reference.oracle.KNOWN`, every entry names the spec
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
    # Variations whose value is valid alone but contradicts another attribute or input of
    # the case (found triaging the CPU EP's REJECTED cells: ORT refuses the subject).
    ("onnx.ReverseSequence.*_axis=*",
     "ReverseSequence 'batch_axis ... Must be one of 1 (default), or 0' and 'time_axis ... Must be one "
     "of 0 (default), or 1': the two must differ, so varying one alone makes them equal, an invalid node "
     "(ORT CPU: 'time_axis and batch_axis must have different values')"),
    ("onnx.Resize.axes=[0-9].*",
     "Resize-18 'scales ... If 'axes' is specified, the number of elements must be the same as the "
     "number of elements of 'axes'': a one-element axes against the case's multi-element scales is an "
     "invalid node (ORT CPU: 'Number of elements in scales should be equal to number of axes')"),
    ("onnx.Attention.qk_matmul_output_mode=4.*",
     "Attention 'qk_matmul_output_mode': the spec defines `0`, `1`, `2` and `3` only (the numeric second "
     "value 3 + 1 names no mode; ORT CPU: 'qk_matmul_output_mode must be -1 (absent), 0, 1, 2, or 3')"),
    ("onnx.MaxPool.pads=2_2_2_2.maxpool_2d_precomputed_strides.*",
     "MaxPool 'pads ... can take any value greater than or equal to 0' with kernel_shape [2, 2]: pads of 2 "
     "make output windows that lie wholly in the padding, and the spec does not define the maximum of no "
     "elements (onnx.reference gives 0, OpenVINO the lowest float; ORT CPU refuses pads >= kernel, "
     "issue #23088)"),
    ("onnx.CenterCropPad.axes.*",
     "CenterCropPad 'axes: If not provided, all axes are assumed [0, 1, ..., r-1]': the control without "
     "axes keeps the case's shape input made for its axes (fewer elements than rank(data)), an invalid "
     "node"),
    ("onnx.CenterCropPad.axes=[0-9-].center_crop_pad_*",
     "CenterCropPad 'axes: If provided, it specifies a subset of axes that 'shape' refer to': one axis "
     "against the case's multi-element shape input is an invalid node"),
    ("onnx.CenterCropPad.axes=-[0-9].center_crop_pad_*", "CenterCropPad: as above (one negative axis)"),
    ("onnx.CenterCropPad.axes=?_?.center_crop_pad_crop.*",
     "CenterCropPad: two axes against center_crop_pad_crop's three-element shape (as above)"),
    ("onnx.CenterCropPad.axes=?_?.center_crop_pad_crop_and_pad.*",
     "CenterCropPad: two axes against center_crop_pad_crop_and_pad's three-element shape (as above)"),
    ("onnx.CenterCropPad.axes=?_?.center_crop_pad_pad.*",
     "CenterCropPad: two axes against center_crop_pad_pad's three-element shape (as above)"),
    ("onnx.TfIdfVectorizer.pool_int64s=3_5_4_5_6_7_8_6_7.*",
     "TfIdfVectorizer 'pool_int64s ... starting with the collections of all 1-grams and ending with the "
     "collections of n-grams' as ngram_counts places them: this pool (another case's) splits no whole "
     "2-grams at the case's ngram_counts (ORT CPU: 'Number of items must compose whole 2-grams')"),
    ("onnx.TfIdfVectorizer.pool_int64s=6_7_8_6_7.tfidfvectorizer_tf_onlybigrams_levelempty.*",
     "TfIdfVectorizer: as above, 5 items after ngram_counts [0, 0] are not whole 2-grams"),
    # Type variants (types.py), found by the self-test of the whole catalog.
    ("onnx.Resize.antialias.*cubic*.opset1[89].*int*",
     "Resize cubic on an integer type: ORT CPU refuses the control (cubic without antialias: '[with T = "
     "float] utils::IsPrimitiveDataType<T>(dtype_) was false') and runs the subject, so the ignore fault "
     "cannot be shown on the reference EP (the cubic integer probes whose control runs are kept and "
     "declared); not found upstream"),
)
