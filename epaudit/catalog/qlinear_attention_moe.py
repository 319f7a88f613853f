"""The com.microsoft quantized, attention-family and mixture-of-experts catalogs as one source.

Each module holds one operator family's features next to its builders; this module only
concatenates them in catalog order (``docs/contrib-qlinear-attention-moe.md`` lists them,
their references and what the real EPs did with them).
"""

from __future__ import annotations

from .bert_attention import FEATURES as _BERT
from .dmmha import FEATURES as _DMMHA
from .embed_layer_norm import FEATURES as _EMB
from .linear_attention import FEATURES as _LINATT
from .lstm import FEATURES as _LSTM
from .moe import FEATURES as _MOE
from .mrope import FEATURES as _MROPE
from .paged_attention import FEATURES as _PAGED
from .qlinear_nn import FEATURES as _NN
from .qlinear_ops import FEATURES as _OPS
from .qlinear_qdq import FEATURES as _QDQ
from .quant_matmul import FEATURES as _QMM
from .sparse_attention import FEATURES as _SPARSE

#: Every feature of this source, in catalog order: the quantized operators, then the
#: attention family, mixture of experts and the recurrent and paged operators.
FEATURES = (tuple(_QDQ) + tuple(_OPS) + tuple(_NN) + tuple(_QMM) + tuple(_BERT) + tuple(_EMB) + tuple(_DMMHA)
            + tuple(_MROPE) + tuple(_SPARSE) + tuple(_LINATT) + tuple(_MOE) + tuple(_LSTM) + tuple(_PAGED))
