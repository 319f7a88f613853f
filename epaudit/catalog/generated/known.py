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
    ("onnx.MaxPool.strides=*.maxpool_with_argmax_2d_precomputed_strides.*",
     "MaxPool Indices with storage_order=1 ('column major'): ORT and onnx.reference disagree once strides "
     "make windows overlap; the spec text does not say which flattening of the overlapped window wins; "
     "undecided, not found upstream"),
)
