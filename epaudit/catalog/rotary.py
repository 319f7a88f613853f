"""Probes for ``com.microsoft.RotaryEmbedding``, version 1 (the contrib operator, not ONNX's
``RotaryEmbedding``-23).

Every probe is one node (float32 unless the feature is a dtype): B = 2, S = 4 tokens,
N = 4 heads, H = 16, caches of 16 positions built like real RoPE caches (angle
p · 10000^(−2i/R)). Positions are chosen away from 0 so that the rotation is decisive.
The reference is :func:`epaudit.reference.rotary.rotary_reference`.

Controls: the operator itself bakes in identity caches (cos = 1, sin = 0: an EP that
does not rotate); ``interleaved`` is reset; ``position_ids`` is baked in at its neutral
value (offset 0, or positions 0..S−1); partial rotation drops ``rotary_embedding_dim`` and
``num_heads``, which makes the kernel take the head size from the cache width and rotate
every feature (an EP ignoring the partial dimension).

Sources: ORT ``docs/ContribOperators.md#com.microsoft.RotaryEmbedding``,
``onnxruntime/contrib_ops/cpu/bert/rotary_embedding.cc`` and ``rotary_embedding_helper.h``.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference.rotary import rotary23_reference, rotary_reference
from . import _contrib as c

B, S, N, H = 2, 4, 4, 16
MAX_POS = 16
_DOC = "ORT docs/ContribOperators.md#com.microsoft.RotaryEmbedding"
_KERNEL = "onnxruntime/contrib_ops/cpu/bert/rotary_embedding.cc RunRotaryEmbedding"
_HELPER = "onnxruntime/contrib_ops/cpu/bert/rotary_embedding_helper.h CheckInputs"


def _reference(values: Mapping[str, np.ndarray], attrs: Mapping[str, object]) -> Mapping[str, np.ndarray]:
    return rotary_reference(values["input"], values["position_ids"], values["cos_cache"], values["sin_cache"],
                            **attrs)


OP = c.Op("RotaryEmbedding", "com.microsoft", 1, ("input", "position_ids", "cos_cache", "sin_cache"),
          ("output",), {"position_ids": "int64"}, {}, _reference)


def _caches(rot: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    inv_freq = 10000.0 ** (-np.arange(0, rot, 2) / rot)
    angles = np.arange(MAX_POS)[:, None] * inv_freq[None, :]
    return c.rounded(np.cos(angles), dtype), c.rounded(np.sin(angles), dtype)


def _graph(seed: int, dtype: str = "float32", *, layout: str = "bnsh", rot: int = H,
           position_ids: np.ndarray | None = None, attrs: Mapping[str, object] | None = None) -> c.Graph:
    rng = np.random.default_rng(seed)
    shape = (B, N, S, H) if layout == "bnsh" else (B, S, N * H)
    cos, sin = _caches(rot, dtype)
    pos = np.array([5], dtype=np.int64) if position_ids is None else position_ids
    feeds = {"input": c.rounded(rng.standard_normal(shape), dtype), "position_ids": pos,
             "cos_cache": cos, "sin_cache": sin}
    return c.Graph(dtype, dict(attrs or {}), feeds, ("output",))


def _identity(g: c.Graph) -> c.Graph:
    """Caches baked in as cos = 1, sin = 0: no rotation at all."""
    return g.baked(cos_cache=np.ones_like(g.feeds["cos_cache"]), sin_cache=np.zeros_like(g.feeds["sin_cache"]))


def _probe(fid: str, subject: c.Graph, control: c.Graph) -> Probe:
    # Rotation is elementwise with two products: the attention tolerance at H = 16 fits.
    return c.probe(OP, fid, subject, control)


def _build_base(fid: str, dtype: str, seed: int, layout: str = "bnsh") -> Callable[[], Probe]:
    def build() -> Probe:
        attrs = {"num_heads": N} if layout == "bsd" else {}
        g = _graph(seed, dtype, layout=layout, attrs=attrs)
        return _probe(fid, g, _identity(g))
    return build


def _build_interleaved(fid: str, seed: int, partial: bool) -> Callable[[], Probe]:
    def build() -> Probe:
        attrs = {"interleaved": 1, **({"num_heads": N, "rotary_embedding_dim": H // 2} if partial else {})}
        g = _graph(seed, layout="bsd" if partial else "bnsh", rot=H // 2 if partial else H, attrs=attrs)
        return _probe(fid, g, g.without(attrs=("interleaved",)))
    return build


def _build_partial(fid: str, seed: int, interleaved: bool) -> Callable[[], Probe]:
    """R = 8 of H = 16 on a 3-D input with num_heads; the control drops both attributes, so
    the kernel reads the head size 8 off the cache and rotates all 16 features per head."""
    def build() -> Probe:
        extra = {"interleaved": 1} if interleaved else {}
        g = _graph(seed, layout="bsd", rot=H // 2, attrs={"num_heads": N, "rotary_embedding_dim": H // 2, **extra})
        return _probe(fid, g, g.without(attrs=("num_heads", "rotary_embedding_dim")))
    return build


def _build_offset() -> Probe:
    g = _graph(4006, position_ids=np.array([7], dtype=np.int64))
    return _probe("rotary.position_ids.offset", g, g.baked(position_ids=np.array([0], dtype=np.int64)))


def _build_position_tensor() -> Probe:
    pos = np.array([[9, 2, 14, 5], [3, 11, 0, 8]], dtype=np.int64)
    g = _graph(4007, position_ids=pos)
    default = np.broadcast_to(np.arange(S, dtype=np.int64), (B, S)).copy()
    return _probe("rotary.position_ids.tensor", g, g.baked(position_ids=default))


def _build_decode() -> Probe:
    # One new token per row at its own position (token generation).
    g = _graph(4008, layout="bsd", attrs={"num_heads": N})
    feeds = dict(g.feeds)
    feeds["input"] = feeds["input"][:, :1]
    feeds["position_ids"] = np.array([[12], [6]], dtype=np.int64)
    g = c.Graph(g.dtype, g.attrs, feeds, g.outputs)
    return _probe("rotary.position_ids.decode", g, g.baked(position_ids=np.zeros((B, 1), dtype=np.int64)))


def _build_attr(fid: str, seed: int, attrs: Mapping[str, object]) -> Callable[[], Probe]:
    """``attrs`` on a 3-D input (num_heads=4) against identity caches (an EP that does not rotate)."""
    def build() -> Probe:
        g = _graph(seed, layout="bsd", attrs={"num_heads": N, **attrs})
        return _probe(fid, g, _identity(g))
    return build


# --- ONNX RotaryEmbedding-23 (ai.onnx): inputs X, cos_cache, sin_cache, position_ids ----

def _reference23(values: Mapping[str, np.ndarray], attrs: Mapping[str, object]) -> Mapping[str, np.ndarray]:
    return rotary23_reference(values["X"], values["cos_cache"], values["sin_cache"], values.get("position_ids"),
                              **attrs)


OP23 = c.Op("RotaryEmbedding", "", 23, ("X", "cos_cache", "sin_cache", "position_ids"), ("Y",),
            {"position_ids": "int64"}, {}, _reference23)

_DOC23 = "ONNX docs/Operators.md#RotaryEmbedding (opset 23; the schema's reference function)"


def _graph23(seed: int, dtype: str = "float32", *, layout: str = "bnsh", rot: int = H,
             attrs: Mapping[str, object] | None = None) -> c.Graph:
    """X (B,N,S,H) or (B,S,N*H), caches of 16 positions, position_ids (B,S) out of order."""
    rng = np.random.default_rng(seed)
    shape = (B, N, S, H) if layout == "bnsh" else (B, S, N * H)
    cos, sin = _caches(rot, dtype)
    pos = np.array([[9, 2, 14, 5], [3, 11, 1, 8]], dtype=np.int64)
    feeds = {"X": c.rounded(rng.standard_normal(shape), dtype), "cos_cache": cos, "sin_cache": sin,
             "position_ids": pos}
    return c.Graph(dtype, dict(attrs or {}), feeds, ("Y",))


def _build23(fid: str, seed: int, dtype: str = "float32", *, layout: str = "bnsh", rot: int = H,
             attrs: Mapping[str, object] | None = None, control: str = "identity") -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph23(seed, dtype, layout=layout, rot=rot, attrs=attrs)
        if control == "positions":  # positions 0..S-1 baked in: an EP that ignores position_ids
            ctrl = g.baked(position_ids=np.broadcast_to(np.arange(S, dtype=np.int64), (B, S)).copy())
        else:
            ctrl = g.baked(cos_cache=np.ones_like(g.feeds["cos_cache"]), sin_cache=np.zeros_like(g.feeds["sin_cache"]))
        return c.probe(OP23, fid, g, ctrl)
    return build


_f = c.feature

#: The RotaryEmbedding features, in catalog order.
FEATURES = (
    _f(OP, "rotary.basic", "float32",
       "4-D (B,N,S,H) input, offset position_ids [5], RoPE caches (halves); control bakes in cos=1, sin=0",
       f"{_DOC}; {_KERNEL}", _build_base("rotary.basic", "float32", 4001)),
    _f(OP, "rotary.input_3d", "float32",
       "3-D (B,S,N*H) input with num_heads=4; control bakes in cos=1, sin=0",
       f"{_DOC}: input (batch_size, sequence_length, hidden_size), attribute 'num_heads'; {_HELPER}",
       _build_base("rotary.input_3d", "float32", 4002, layout="bsd"), Use(attributes={"num_heads": NON_DEFAULT})),
    _f(OP, "rotary.interleaved", "float32", "interleaved=1 (pairs 2i, 2i+1); control resets it (halves)",
       f"{_DOC}: attribute 'interleaved'; {_KERNEL} (MlasRotaryEmbedOneRow)",
       _build_interleaved("rotary.interleaved", 4003, partial=False), Use(attributes={"interleaved": 1})),
    _f(OP, "rotary.rotary_embedding_dim", "float32",
       "partial rotation rotary_embedding_dim=8 of H=16 (3-D input, num_heads=4), features 8..15 copied; "
       "control drops both attributes (every feature rotated)",
       f"{_DOC}: attributes 'rotary_embedding_dim', 'num_heads'; {_KERNEL} (memcpy of [R, H)); {_HELPER}",
       _build_partial("rotary.rotary_embedding_dim", 4004, interleaved=False),
       Use(attributes={"rotary_embedding_dim": NON_DEFAULT, "num_heads": NON_DEFAULT})),
    _f(OP, "rotary.rotary_embedding_dim.interleaved", "float32",
       "partial rotation R=8 of H=16 with interleaved=1; control drops rotary_embedding_dim and num_heads",
       f"{_DOC}: 'rotary_embedding_dim' with 'interleaved'; {_KERNEL}",
       _build_partial("rotary.rotary_embedding_dim.interleaved", 4005, interleaved=True),
       Use(attributes={"rotary_embedding_dim": NON_DEFAULT, "interleaved": 1})),
    _f(OP, "rotary.interleaved.partial", "float32",
       "interleaved=1 on a partial rotation R=8 of H=16; control resets interleaved",
       f"{_DOC}: 'interleaved' with 'rotary_embedding_dim'; {_KERNEL}",
       _build_interleaved("rotary.interleaved.partial", 4009, partial=True),
       Use(attributes={"interleaved": 1, "rotary_embedding_dim": NON_DEFAULT})),
    _f(OP, "rotary.position_ids.offset", "float32",
       "position_ids (1) = [7]: token s at position 7+s; control bakes in offset [0]",
       f"{_DOC}: input 'position_ids' shape (1); {_HELPER} (format 0); {_KERNEL}",
       _build_offset, Use(facts={"position_ids_rank": 1})),
    _f(OP, "rotary.position_ids.tensor", "float32",
       "position_ids (B,S) per token, out of order; control bakes in positions 0..S-1",
       f"{_DOC}: input 'position_ids' shape (batch_size, sequence_length); {_HELPER} (format 1)",
       _build_position_tensor, Use(facts={"position_ids_rank": 2})),
    _f(OP, "rotary.position_ids.decode", "float32",
       "S=1 token per row at positions [[12],[6]] (3-D input); control bakes in position 0",
       f"{_DOC}: position_ids (batch_size, 1); {_KERNEL}",
       _build_decode, Use(facts={"position_ids_rank": 2})),
    _f(OP, "rotary.dtype.float16", "float16", "rotary.basic in float16; control bakes in cos=1, sin=0",
       f"{_DOC}: type constraint T includes tensor(float16)", _build_base("rotary.dtype.float16", "float16", 4010)),
    _f(OP, "rotary.is_packed_batching", "float32",
       "is_packed_batching=1 on a 3-D input whose every batch row is full length (a packed batch is then the "
       "batch itself: every reading of 'ragged batch' agrees); control bakes in cos=1, sin=0",
       f"{_DOC}: attribute 'is_packed_batching' ('ragged batch inputs or not'; no ragged layout documented); "
       f"{_KERNEL}", _build_attr("rotary.is_packed_batching", 4011, {"is_packed_batching": 1}),
       Use(attributes={"is_packed_batching": 1})),
    _f(OP, "rotary.scale", "float32",
       "scale=3 with caches given: it scales only caches the kernel would generate (not implemented), so the "
       "rotation is unchanged; control bakes in cos=1, sin=0",
       f"{_DOC}: attribute 'scale'; {_KERNEL} (read, used only where caches are regenerated: NOT_IMPLEMENTED); "
       "contrib_ops/cuda/bert/rotary_embedding.cc (read, never passed to the kernel)",
       _build_attr("rotary.scale", 4012, {"scale": 3.0}), Use(attributes={"scale": NON_DEFAULT})),
    _f(OP23, "rotary23.position_ids", "float32",
       "ONNX RotaryEmbedding-23, 4-D X (B,N,S,H) with position_ids (B,S) out of order; control bakes in "
       "positions 0..S-1", f"{_DOC23}: optional input position_ids, caches (max_position, H/2)",
       _build23("rotary23.position_ids", 4020, control="positions"), Use(inputs=("position_ids",))),
    _f(OP23, "rotary23.num_heads", "float32",
       "ONNX RotaryEmbedding-23, 3-D X (B,S,N*H) with num_heads=4; control bakes in cos=1, sin=0",
       f"{_DOC23}: attribute num_heads ('must be provided when input is a 3D tensor')",
       _build23("rotary23.num_heads", 4021, layout="bsd", attrs={"num_heads": N}),
       Use(inputs=("position_ids",), attributes={"num_heads": NON_DEFAULT})),
    _f(OP23, "rotary23.rotary_embedding_dim", "float32",
       "ONNX RotaryEmbedding-23, partial rotation rotary_embedding_dim=8 of H=16 (3-D X, num_heads=4), features "
       "8..15 copied; control bakes in cos=1, sin=0",
       f"{_DOC23}: attribute rotary_embedding_dim (x_rotate = input[..., :dim], the rest concatenated back)",
       _build23("rotary23.rotary_embedding_dim", 4022, layout="bsd", rot=H // 2,
                attrs={"num_heads": N, "rotary_embedding_dim": H // 2}),
       Use(inputs=("position_ids",), attributes={"rotary_embedding_dim": NON_DEFAULT, "num_heads": NON_DEFAULT})),
    _f(OP23, "rotary23.dtype.float16", "float16",
       "ONNX RotaryEmbedding-23 in float16 (4-D X, position_ids); control bakes in cos=1, sin=0",
       f"{_DOC23}: type constraint T includes tensor(float16)",
       _build23("rotary23.dtype.float16", 4023, "float16"), Use(inputs=("position_ids",))),
)
