"""Probes for ``com.microsoft.LinearAttention`` (version 1): B = 2, T = 5 tokens (a prefill;
``.decode`` has T = 1), H_q = H_kv = 2 heads of d_k = d_v = 16 (``.gqa``: 4 query heads over 2),
L2-normalized keys, decay g ~ −U(0.05, 0.5) (log space), beta ~ U(0.2, 0.9). Everything is fed.
Reference: :mod:`epaudit.reference.linear_attention`; tolerance ``tolerance_for("float32", 16)``.

Controls: the operator itself (and each update rule) bakes in a zero query (output 0, the
state still updated); ``past_state`` is baked in as zeros; ``decay`` per key dimension and
``beta`` broadcast are baked in at their neutral values (g = 0: no decay; beta = 0: no
update); attributes are reset. Each probe lists ``present_state`` first.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use, tolerance_for
from ..reference.linear_attention import linear_attention_reference
from . import _contrib as c
from ._qgraph import QGraph, QOp, probe

B, T, HD = 2, 5, 16
_DOC = "ORT docs/ContribOperators.md#com.microsoft.LinearAttention"
_KERNEL = "onnxruntime/contrib_ops/cpu/bert/linear_attention.cc"
_ATTRS = ("q_num_heads", "kv_num_heads", "update_rule", "scale", "state_window", "chunk_size")


def _ref(v, attrs):
    return linear_attention_reference(v["query"], v["key"], v["value"], v.get("past_state"), v.get("decay"),
                                      v.get("beta"), **{k: attrs[k] for k in _ATTRS if k in attrs})


OP = QOp("LinearAttention", "com.microsoft", 1, ("query", "key", "value", "past_state", "decay", "beta"),
         ("output", "present_state"), _ref,
         # T, and S with it: S is a parameter of its own, but without a past_state ORT's type inference
         # gives present_state T (a float32 one under float16 T fails: "Type (tensor(float)) of output
         # arg (present_state) ... does not match expected type"), so a float16 model has float16 state
         float_t=frozenset({"query", "key", "value", "decay", "beta", "past_state", "output", "present_state"}))


def _f32(a) -> np.ndarray:
    return np.asarray(a, np.float32)


def _graph(seed: int, rule: str = "gated_delta", *, steps: int = T, hq: int = 2, hkv: int = 2, past: bool = False,
           per_key: bool = False, beta_shared: bool = False, attrs=None) -> QGraph:
    rng = np.random.default_rng(seed)
    k = rng.standard_normal((B, steps, hkv, HD))
    k /= np.linalg.norm(k, axis=-1, keepdims=True)
    feeds = {"query": _f32(rng.standard_normal((B, steps, hq * HD))), "key": _f32(k.reshape(B, steps, hkv * HD)),
             "value": _f32(rng.standard_normal((B, steps, hkv * HD)))}
    if past:
        feeds["past_state"] = _f32(0.5 * rng.standard_normal((B, hkv, HD, HD)))
    if rule in ("gated", "gated_delta"):
        shape = (B, steps, hkv * HD) if per_key else (B, steps, hkv)
        feeds["decay"] = _f32(-rng.uniform(0.05, 0.5, size=shape))
    if rule in ("delta", "gated_delta"):
        feeds["beta"] = _f32(rng.uniform(0.2, 0.9, size=(B, steps, 1) if beta_shared else (B, steps, hkv)))
    a = {"q_num_heads": hq, "kv_num_heads": hkv, **({} if rule == "gated_delta" else {"update_rule": rule}),
         **(attrs or {})}
    return QGraph(a, feeds, {"present_state": "float32", "output": "float32"})


def _build(fid: str, seed: int, rule: str = "gated_delta", *, control="query", reset=(), **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _graph(seed, rule, **kw)
        if control == "query":
            ctl = g.baked(query=np.zeros_like(g.feeds["query"]))
        elif control == "past":
            ctl = g.baked(past_state=np.zeros_like(g.feeds["past_state"]))
        elif control == "decay":
            ctl = g.baked(decay=np.zeros_like(g.feeds["decay"]))
        elif control == "beta":
            ctl = g.baked(beta=np.zeros_like(g.feeds["beta"]))
        else:
            ctl = g.without(attrs=reset)
        return probe(OP, fid, g, ctl, tolerance_for("float32", HD), "float32")
    return build


_f = c.feature

#: The LinearAttention features, in catalog order.
FEATURES = (
    _f(OP, "linearattention.gated_delta", "float32", "update_rule gated_delta (the default) over 5 tokens with "
       "per-head decay and beta; control bakes in a zero query", f"{_DOC}; {_KERNEL}",
       _build("linearattention.gated_delta", 7501)),
    *(_f(OP, f"linearattention.update_rule.{r}", "float32", f"update_rule={r}; control bakes in a zero query",
         f"{_DOC}: attribute 'update_rule' ({r})", _build(f"linearattention.update_rule.{r}", 7502 + i, r),
         Use(attributes={"update_rule": r})) for i, r in enumerate(("linear", "gated", "delta"))),
    _f(OP, "linearattention.past_state", "float32", "past_state (B,2,16,16) carried in; control bakes in a zero state",
       f"{_DOC}: input 'past_state'", _build("linearattention.past_state", 7505, past=True, control="past"),
       Use(inputs=("past_state",))),
    _f(OP, "linearattention.decode", "float32", "one token (T=1) after a past_state; control bakes in a zero state",
       f"{_DOC}: autoregressive decoding (T=1)", _build("linearattention.decode", 7506, steps=1, past=True,
                                                        control="past"),
       Use(inputs=("past_state",), facts={"sequence_length": 1})),
    _f(OP, "linearattention.decay.per_key", "float32", "decay (B,T,H_kv*d_k): one gate per key dimension; control bakes "
       "in g = 0 (no decay)", f"{_DOC}: input 'decay' (B, T, H_kv * d_k)",
       _build("linearattention.decay.per_key", 7507, per_key=True, control="decay"),
       Use(inputs=("decay",), facts={"decay_per_key": True})),
    _f(OP, "linearattention.beta.broadcast", "float32", "beta (B,T,1) shared by the heads; control bakes in beta = 0",
       f"{_DOC}: input 'beta' (B, T, 1)", _build("linearattention.beta.broadcast", 7508, beta_shared=True,
                                                 control="beta"), Use(inputs=("beta",), facts={"beta_rank_last": 1})),
    _f(OP, "linearattention.gqa", "float32", "4 query heads over 2 key/value heads (output per query head); control "
       "bakes in a zero query", f"{_DOC}: q_num_heads > kv_num_heads", _build("linearattention.gqa", 7509, hq=4),
       Use(facts={"grouped": True})),
    _f(OP, "linearattention.scale", "float32", "scale=1.0 (default 1/sqrt(16)); control leaves it unset",
       f"{_DOC}: attribute 'scale'", _build("linearattention.scale", 7510, attrs={"scale": 1.0}, control="attrs",
                                            reset=("scale",)), Use(attributes={"scale": NON_DEFAULT})),
    _f(OP, "linearattention.state_window", "float32", "state_window=3: present_state (3,B,2,16,16) holds the states "
       "after tokens 2, 3, 4; control state_window=0 (4-D)", f"{_DOC}: attribute 'state_window'",
       _build("linearattention.state_window", 7511, attrs={"state_window": 3}, control="attrs",
              reset=("state_window",)), Use(attributes={"state_window": NON_DEFAULT})),
)
