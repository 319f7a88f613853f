"""The activation, fused, math and miscellaneous contrib catalog (docs/contrib-activations-math.md):
one source for :mod:`epaudit.catalog`, the concatenation of its six modules in catalog order.

* :mod:`.activations` — Gelu, BiasGelu, FastGelu, QuickGelu, ScaledSiLU, GatedAdd;
* :mod:`.fused` — FusedConv, FusedGemm, FusedMatMul, TransposeMatMul,
  ConvTransposeWithDynamicPads, NhwcMaxPool;
* :mod:`.tensor_math` — Pad, GatherND, ExpandDims, Range, Trilu, Inverse, CDist, Unique,
  UnfoldTensor, SampleOp;
* :mod:`.sampling` — GridSample, CropAndResize;
* :mod:`.tokens` — MurmurHash3, NGramRepeatBlock, BifurcationDetector, DynamicTimeWarping,
  NGramHashMapping, VarlenNGramHashMapping;
* :mod:`.llm_blocks` — EngramGate, CausalConvWithState, HyperConnectionPreMix,
  HyperConnectionPostMix, BranchwiseRMSNorm, GatedRMSNorm, LinearAttentionGate.

Every probe model is built by :mod:`._xcase` (any tensor dtype per input and output; a
control whose every input is baked in keeps them declared, so constant folding leaves the
node to its kernel).
"""

from __future__ import annotations

from . import activations, fused, llm_blocks, sampling, tensor_math, tokens

#: The modules, in catalog order.
MODULES = (activations, fused, tensor_math, sampling, tokens, llm_blocks)

#: Every feature of this source, in catalog order.
FEATURES = tuple(f for m in MODULES for f in m.FEATURES)
