"""Probes for the ``com.microsoft`` token and hashing operators (version 1): ``MurmurHash3``,
``NGramRepeatBlock``, ``BifurcationDetector``, ``DynamicTimeWarping``, ``NGramHashMapping`` and
``VarlenNGramHashMapping``.

Every output but NGramRepeatBlock's scores is an integer compared exactly. References from
:mod:`epaudit.reference.tokens` (MurmurHash3_x86_32 written from the public-domain algorithm;
the rest from the schema text and the CPU kernels it cites).

Controls: the operator itself bakes in its data as zeros (MurmurHash3 keys; BifurcationDetector
``cur_tokens``; NGramHashMapping ``input_ids``: every hash 0), NGramRepeatBlock bakes in zero
``scores`` (the bans stay: an EP that drops the scores returns the control), DynamicTimeWarping
bakes in the cost matrix flipped upside down (another lowest-cost path; zeros would be all
ties); optional inputs are dropped; attributes are reset to their defaults.

NGramRepeatBlock has one feature: its only attribute, ``ngram_size``, changes nothing but which
scores become ``-inf``, and the separation check (``epaudit.classify.separation``) reads only
finite differences, so a probe of it would be refused as blind.
"""

from __future__ import annotations

from typing import Callable, Mapping

import numpy as np

from ..contract.probes import NON_DEFAULT, Probe, Use
from ..reference import tokens as ref
from . import _xcase as x

_MS = "com.microsoft"
_DOC = "ORT docs/ContribOperators.md#com.microsoft."
_K = "onnxruntime/contrib_ops/cpu/"


def _murmur(in_dtype: str, positive: bool = True) -> x.XOp:
    return x.XOp("MurmurHash3", _MS, 1, ("X",), ("Y",),
                 lambda v, a: {"Y": ref.murmurhash3(np.asarray(v["X"]).astype(in_dtype), int(a.get("seed", 0)),
                                                    int(a.get("positive", 1)))},
                 {"X": in_dtype}, {"Y": "uint32" if positive else "int32"}, frozenset({"Y"}))


MURMUR = _murmur("int32")
MURMUR_SIGNED = _murmur("int32", positive=False)
MURMUR_U32, MURMUR_I64, MURMUR_F32 = _murmur("uint32"), _murmur("int64"), _murmur("float32")
NGRB = x.XOp("NGramRepeatBlock", _MS, 1, ("input_ids", "scores"), ("scores_out",),
             lambda v, a: {"scores_out": ref.ngram_repeat_block(v["input_ids"], v["scores"], int(a["ngram_size"]))},
             {"input_ids": "int64"})
_BIF_IN = ("src_tokens", "cur_tokens", "prev_suffix_match_idx", "pred_tokens")
BIF = x.XOp("BifurcationDetector", _MS, 1, _BIF_IN, ("tokens", "suffix_match_idx"),
            lambda v, a: ref.bifurcation_detector(v["src_tokens"], v["cur_tokens"], v["prev_suffix_match_idx"],
                                                  v.get("pred_tokens"), **{k: int(a[k]) for k in a}),
            {k: "int64" for k in _BIF_IN}, {"tokens": "int64", "suffix_match_idx": "int64"},
            frozenset({"tokens", "suffix_match_idx"}))
DTW = x.XOp("DynamicTimeWarping", _MS, 1, ("input",), ("output",),
            lambda v, a: {"output": ref.dynamic_time_warping(v["input"])}, {}, {"output": "int32"},
            frozenset({"output"}))
_NGH_IN = ("input_ids", "multipliers", "vocab_sizes", "past_ids", "head_offsets", "eos_token_id", "segment_ids")


def _ngh(dtype: str) -> x.XOp:
    bits = 64 if dtype == "int64" else 32

    def reference(v, a):
        kw = {k: int(a[k]) for k in ("max_ngram_size", "n_head_per_ngram", "pad_id", "reset_on_eos") if k in a}
        return ref.ngram_hash_mapping(*(v.get(n) for n in _NGH_IN), bits=bits, **kw)
    dtypes = {n: dtype for n in _NGH_IN}
    dtypes["segment_ids"] = "int32"
    return x.XOp("NGramHashMapping", _MS, 1, _NGH_IN, ("hash_ids", "present_ids"), reference, dtypes,
                 {"hash_ids": dtype, "present_ids": dtype}, frozenset({"hash_ids", "present_ids"}))


NGH, NGH_I32 = _ngh("int64"), _ngh("int32")
_VL_IN = ("input_ids", "multipliers", "vocab_sizes", "cumulative_sequence_length", "past_ids", "head_offsets",
          "eos_token_id", "segment_ids", "past_segment_ids", "capture_count")
_VL_OUT = ("hash_ids", "present_ids", "present_segment_ids", "state_update")
_S_TYPED = ("cumulative_sequence_length", "segment_ids", "past_segment_ids", "capture_count")


def _varlen(dtype: str) -> x.XOp:
    bits = 64 if dtype == "int64" else 32

    def reference(v, a):
        kw = {k: int(a[k]) for k in ("max_ngram_size", "n_head_per_ngram", "pad_id", "reset_on_eos",
                                      "state_update_capacity") if k in a}
        return ref.varlen_ngram_hash_mapping(*(v.get(n) for n in _VL_IN), bits=bits, **kw)
    ins = {n: ("int32" if n in _S_TYPED else dtype) for n in _VL_IN}
    outs = {"hash_ids": dtype, "present_ids": dtype, "present_segment_ids": "int32", "state_update": dtype}
    return x.XOp("VarlenNGramHashMapping", _MS, 1, _VL_IN, _VL_OUT, reference, ins, outs, frozenset(_VL_OUT))


VARLEN, VARLEN_I32 = _varlen("int64"), _varlen("int32")


# --------------------------------------------------------------------------- MurmurHash3
def _mm_keys(seed: int, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return x.normal(rng, (3, 4), scale=100.0)
    if dtype == "uint32":
        return rng.integers(0, 2 ** 32, (3, 4)).astype(np.float64)
    hi = 2 ** 40 if dtype == "int64" else 2 ** 31
    return rng.integers(-hi, hi, (3, 4)).astype(np.float64)


def _mm(fid: str, seed: int, op: x.XOp, dtype: str, attrs: Mapping[str, object] | None = None,
        control_op: x.XOp | None = None) -> Callable[[], Probe]:
    def build() -> Probe:
        keys = np.asarray(_mm_keys(seed, dtype)).astype(dtype)
        g = x.Graph("float32", dict(attrs or {}), {"X": keys}, ("Y",))
        control = g.without(attrs=tuple(attrs)) if attrs else g.baked(X=np.zeros_like(keys))
        return x.probe(op, fid, g, control, control_op=control_op)
    return build


# --------------------------------------------------------------------------- NGramRepeatBlock
def _ngrb() -> Probe:
    ids = np.array([[4, 7, 2, 9, 4, 7, 5, 1], [3, 3, 6, 8, 3, 6, 2, 3]])
    g = x.Graph("float32", {"ngram_size": 2}, {"input_ids": ids, "scores": x.normal(np.random.default_rng(9301),
                                                                                     (2, 10))}, ("scores_out",))
    return x.probe(NGRB, "ngramrepeatblock.basic", g, g.baked(scores=np.zeros_like(g.feeds["scores"])))


# --------------------------------------------------------------------------- BifurcationDetector
_SRC = [5, 3, 8, 1, 9, 3, 8, 2, 7, 4]


def _bif(fid: str, src, cur, attrs: Mapping[str, object] | None = None, pred=None, prev: int = 0,
         drop: str | None = None) -> Callable[[], Probe]:
    def build() -> Probe:
        feeds = {"src_tokens": np.array(src), "cur_tokens": np.array(cur), "prev_suffix_match_idx": np.array(prev)}
        if pred is not None:
            feeds["pred_tokens"] = np.array(pred)
        g = x.Graph("float32", dict(attrs or {}), feeds, ("tokens", "suffix_match_idx"))
        if drop == "pred_tokens":
            control = g.without("pred_tokens")
        elif drop:
            control = g.without(attrs=(drop,))
        else:
            control = g.baked(cur_tokens=np.zeros(len(cur)))
        return x.probe(BIF, fid, g, control)
    return build


# --------------------------------------------------------------------------- DTW / NGramHashMapping
def _dtw(fid: str, seed: int, shape) -> Callable[[], Probe]:
    def build() -> Probe:
        cost = x.rounded(np.random.default_rng(seed).uniform(0.0, 1.0, shape), "float32")
        g = x.Graph("float32", {}, {"input": cost}, ("output",))
        return x.probe(DTW, fid, g, g.baked(input=np.ascontiguousarray(np.flip(cost, -2))))
    return build


_MULT = {"int64": [1, -7046029254386353131, 6364136223846793005], "int32": [1, -1640531527, 1103515245]}
_VOCAB = [1009, 1013, 1019, 1021]
_NGH_ATTRS = {"max_ngram_size": 3, "n_head_per_ngram": 2, "pad_id": 0}


def _ngh_graph(seed: int, dtype: str = "int64", attrs: Mapping[str, object] | None = None,
               extra: Mapping[str, object] | None = None, outputs=("hash_ids",), ids=None) -> x.Graph:
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": np.asarray(ids) if ids is not None else rng.integers(1, 50000, (2, 6)),
             "multipliers": np.array(_MULT[dtype]), "vocab_sizes": np.array(_VOCAB)}
    feeds.update({k: np.asarray(v) for k, v in (extra or {}).items()})
    return x.Graph("float32", {**_NGH_ATTRS, **(attrs or {})}, feeds, tuple(outputs))


def _ngh_probe(fid: str, seed: int, *, op: x.XOp = NGH, drop: tuple[str, ...] = (), reset: tuple[str, ...] = (),
               **kw) -> Callable[[], Probe]:
    def build() -> Probe:
        g = _ngh_graph(seed, "int32" if op is NGH_I32 else "int64", **kw)
        if drop or reset:
            # A required attribute (pad_id) is reset to its base value, not removed.
            control = g.without(*drop, attrs=tuple(r for r in reset if r not in _NGH_ATTRS)).with_attrs(
                **{r: _NGH_ATTRS[r] for r in reset if r in _NGH_ATTRS})
        else:
            control = g.baked(input_ids=np.zeros_like(g.feeds["input_ids"]))
        return x.probe(op, fid, g, control)
    return build


_PAST = np.array([[41, 17], [29, 33]])
#: Three packed requests of 4, 1 and 3 tokens.
_CU = [0, 4, 5, 8]
_VL_PAST = np.array([[41, 17], [29, 33], [3, 12]])


def _vl_probe(fid: str, seed: int, *, op: x.XOp = VARLEN, attrs: Mapping[str, object] | None = None,
              extra: Mapping[str, object] | None = None, outputs=("hash_ids",), ids=None,
              drop: tuple[str, ...] = (), reset: tuple[str, ...] = ()) -> Callable[[], Probe]:
    def build() -> Probe:
        rng = np.random.default_rng(seed)
        dtype = "int32" if op is VARLEN_I32 else "int64"
        feeds = {"input_ids": np.asarray(ids) if ids is not None else rng.integers(1, 50000, 8),
                 "multipliers": np.array(_MULT[dtype]), "vocab_sizes": np.array(_VOCAB),
                 "cumulative_sequence_length": np.array(_CU)}
        feeds.update({k: np.asarray(v) for k, v in (extra or {}).items()})
        g = x.Graph("float32", {**_NGH_ATTRS, **(attrs or {})}, feeds, tuple(outputs))
        if drop or reset:
            control = g.without(*drop, attrs=reset)
        else:
            control = g.baked(input_ids=np.zeros_like(g.feeds["input_ids"]))
        return x.probe(op, fid, g, control)
    return build

_EOS_IDS = [[11, 3, 27, 40, 3, 12], [5, 6, 3, 8, 9, 10]]
_f = x.feature
_MM = f"{_DOC}MurmurHash3; {_K}murmur_hash3.cc MurmurHash3_x86_32"
_BIFS = f"{_DOC}BifurcationDetector; {_K}bert/bifurcation_detector.h"
_NGHS = f"{_DOC}NGramHashMapping (schema text of onnxruntime 1.31.1); {_K}bert/ngram_hash_mapping.cc, engram_helper.h"
_VLS = f"{_DOC}VarlenNGramHashMapping (schema text of onnxruntime 1.31.1); {_K}bert/varlen_ngram_hash_mapping.cc"
_VL_SEGS = [0, 0, 1, 1, 5, 2, 2, 3]
_VL_PSEGS = np.array([[0, 0], [4, 5], [1, 2]])

#: MurmurHash3, NGramRepeatBlock, BifurcationDetector, DynamicTimeWarping, (Varlen)NGramHashMapping features.
FEATURES = (
    _f(MURMUR, "murmurhash3.basic", "int32", "uint32 hashes (positive=1, seed 0) of int32 keys (3,4); control keys 0",
       _MM, _mm("murmurhash3.basic", 9201, MURMUR, "int32")),
    _f(MURMUR, "murmurhash3.seed", "int32", "seed=42; control seed 0", f"{_MM}: attribute 'seed'",
       _mm("murmurhash3.seed", 9202, MURMUR, "int32", {"seed": 42}), Use(attributes={"seed": NON_DEFAULT})),
    _f(MURMUR_SIGNED, "murmurhash3.positive", "int32", "positive=0: int32 output; control positive=1 (uint32)",
       f"{_MM}: attribute 'positive'",
       _mm("murmurhash3.positive", 9203, MURMUR_SIGNED, "int32", {"positive": 0}, control_op=MURMUR),
       Use(attributes={"positive": NON_DEFAULT})),
    _f(MURMUR_U32, "murmurhash3.uint32", "uint32", "uint32 keys; control keys 0",
       f"{_MM}: type constraint T1 includes tensor(uint32)", _mm("murmurhash3.uint32", 9204, MURMUR_U32, "uint32")),
    _f(MURMUR_I64, "murmurhash3.int64", "int64", "int64 keys (8 bytes each); control keys 0",
       f"{_MM}: type constraint T1 includes tensor(int64)", _mm("murmurhash3.int64", 9205, MURMUR_I64, "int64")),
    _f(MURMUR_F32, "murmurhash3.float", "float32", "float32 keys (their 4 bytes); control keys 0",
       f"{_MM}: type constraint T1 includes tensor(float)", _mm("murmurhash3.float", 9206, MURMUR_F32, "float32")),
    _f(NGRB, "ngramrepeatblock.basic", "float32",
       "ngram_size=2 bans (-inf) the tokens that would repeat a bigram of input_ids (2,8); control scores 0",
       f"{_DOC}NGramRepeatBlock; {_K}bert/ngram_repeat_block.h", _ngrb),
    _f(BIF, "bifurcationdetector.basic", "int64",
       "no pred_tokens: tokens = cur_tokens, unique suffix match in src (idx 5); control cur_tokens 0 (-1)",
       _BIFS, _bif("bifurcationdetector.basic", _SRC, [11, 1, 9])),
    _f(BIF, "bifurcationdetector.pred_tokens", "int64",
       "pred_tokens from prev idx 2 diverge at 6: tokens = cur ++ pred[:7]; control drops pred_tokens",
       f"{_BIFS}: input 'pred_tokens'",
       _bif("bifurcationdetector.pred_tokens", _SRC, [11, 1, 9], pred=[8, 1, 9, 3, 8, 2, 6, 0, 0], prev=2,
            drop="pred_tokens"), Use(inputs=("pred_tokens",))),
    _f(BIF, "bifurcationdetector.min_ngram_size", "int64",
       "min_ngram_size=2: the unique 1-gram match no longer counts (-1); control min 1 (idx 5)",
       f"{_BIFS}: attribute 'min_ngram_size'",
       _bif("bifurcationdetector.min_ngram_size", _SRC, [12, 9], {"min_ngram_size": 2}, drop="min_ngram_size"),
       Use(attributes={"min_ngram_size": NON_DEFAULT})),
    _f(BIF, "bifurcationdetector.max_ngram_size", "int64",
       "max_ngram_size=2: only ambiguous 1-/2-gram matches (-1); control max 3 finds the unique 3-gram (idx 6)",
       f"{_BIFS}: attribute 'max_ngram_size'",
       _bif("bifurcationdetector.max_ngram_size", [1, 2, 3, 7, 1, 2, 4, 9, 5, 6], [8, 7, 1, 2],
            {"max_ngram_size": 2}, drop="max_ngram_size"), Use(attributes={"max_ngram_size": NON_DEFAULT})),
    _f(DTW, "dynamictimewarping.basic", "float32",
       "lowest-cost path through a (6,8) cost matrix; control the matrix flipped upside down",
       f"{_DOC}DynamicTimeWarping; {_K}tensor/dynamic_time_warping.cc", _dtw("dynamictimewarping.basic", 9401, (6, 8))),
    _f(DTW, "dynamictimewarping.rank3", "float32", "cost matrix (1,7,5); control flipped",
       f"{_DOC}DynamicTimeWarping: input '1 x M x N'", _dtw("dynamictimewarping.rank3", 9402, (1, 7, 5)),
       Use(facts={"input_rank": 3})),
    _f(NGH, "ngramhashmapping.basic", "int64",
       "2- and 3-gram hashes (2 heads each) of int64 ids (2,6), wrapping multipliers; control ids 0",
       _NGHS, _ngh_probe("ngramhashmapping.basic", 9501)),
    _f(NGH, "ngramhashmapping.past_ids", "int64", "past_ids (2,2) as the history before the chunk; control drops it",
       f"{_NGHS}: input 'past_ids'", _ngh_probe("ngramhashmapping.past_ids", 9502, extra={"past_ids": _PAST},
                                                drop=("past_ids",)), Use(inputs=("past_ids",))),
    _f(NGH, "ngramhashmapping.output.present_ids", "int64",
       "optional output present_ids (listed first) with past_ids fed, S=1 decode; control drops past_ids",
       f"{_NGHS}: output 'present_ids'",
       _ngh_probe("ngramhashmapping.output.present_ids", 9503, extra={"past_ids": _PAST},
                  outputs=("present_ids", "hash_ids"), ids=[[101], [202]], drop=("past_ids",)),
       Use(inputs=("past_ids",), facts={"outputs": ("hash_ids", "present_ids")})),
    _f(NGH, "ngramhashmapping.head_offsets", "int64", "head_offsets [0,1009,2022,3041] added after the modulo; control drops",
       f"{_NGHS}: input 'head_offsets'",
       _ngh_probe("ngramhashmapping.head_offsets", 9504, extra={"head_offsets": [0, 1009, 2022, 3041]},
                  drop=("head_offsets",)), Use(inputs=("head_offsets",))),
    _f(NGH, "ngramhashmapping.eos_token_id", "int64",
       "eos_token_id=3 (reset off) fills the missing history instead of pad_id; control drops it",
       f"{_NGHS}: input 'eos_token_id'",
       _ngh_probe("ngramhashmapping.eos_token_id", 9505, extra={"eos_token_id": 3}, drop=("eos_token_id",)),
       Use(inputs=("eos_token_id",))),
    _f(NGH, "ngramhashmapping.reset_on_eos", "int64",
       "reset_on_eos=1: history at or before the latest EOS reads eos_token_id; control reset_on_eos 0",
       f"{_NGHS}: attribute 'reset_on_eos'",
       _ngh_probe("ngramhashmapping.reset_on_eos", 9506, attrs={"reset_on_eos": 1}, extra={"eos_token_id": 3},
                  ids=_EOS_IDS, reset=("reset_on_eos",)),
       Use(inputs=("eos_token_id",), attributes={"reset_on_eos": NON_DEFAULT})),
    _f(NGH, "ngramhashmapping.segment_ids", "int64",
       "segment_ids [[0,0,0,1,1,1],[0,1,1,1,2,2]] reset the history at each boundary; control drops them",
       f"{_NGHS}: input 'segment_ids'",
       _ngh_probe("ngramhashmapping.segment_ids", 9507,
                  extra={"segment_ids": [[0, 0, 0, 1, 1, 1], [0, 1, 1, 1, 2, 2]]}, drop=("segment_ids",)),
       Use(inputs=("segment_ids",))),
    _f(NGH, "ngramhashmapping.pad_id", "int64", "pad_id=5 for the missing history; control pad_id 0",
       f"{_NGHS}: attribute 'pad_id'",
       _ngh_probe("ngramhashmapping.pad_id", 9508, attrs={"pad_id": 5}, reset=("pad_id",)),
       Use(attributes={"pad_id": NON_DEFAULT})),
    _f(NGH_I32, "ngramhashmapping.dtype.int32", "int32", "ngramhashmapping.basic with int32 ids (wrapping); control ids 0",
       f"{_NGHS}: type constraint M includes tensor(int32)", _ngh_probe("ngramhashmapping.dtype.int32", 9509,
                                                                          op=NGH_I32)),
    _f(VARLEN, "varlenngramhashmapping.basic", "int64",
       "hashes of 3 packed requests (4, 1, 3 tokens), each with its own history; control ids 0",
       _VLS, _vl_probe("varlenngramhashmapping.basic", 9601)),
    _f(VARLEN, "varlenngramhashmapping.past_ids", "int64", "past_ids (3,2) per request; control drops it",
       f"{_VLS}: input 'past_ids'", _vl_probe("varlenngramhashmapping.past_ids", 9602, extra={"past_ids": _VL_PAST},
                                              drop=("past_ids",)), Use(inputs=("past_ids",))),
    _f(VARLEN, "varlenngramhashmapping.head_offsets", "int64", "head_offsets added after the modulo; control drops it",
       f"{_VLS}: input 'head_offsets'",
       _vl_probe("varlenngramhashmapping.head_offsets", 9603, extra={"head_offsets": [0, 1009, 2022, 3041]},
                 drop=("head_offsets",)), Use(inputs=("head_offsets",))),
    _f(VARLEN, "varlenngramhashmapping.eos_token_id", "int64",
       "eos_token_id=3 fills the missing history; control drops it", f"{_VLS}: input 'eos_token_id'",
       _vl_probe("varlenngramhashmapping.eos_token_id", 9604, extra={"eos_token_id": 3}, drop=("eos_token_id",)),
       Use(inputs=("eos_token_id",))),
    _f(VARLEN, "varlenngramhashmapping.reset_on_eos", "int64",
       "reset_on_eos=1 with EOS tokens inside the requests; control reset_on_eos 0", f"{_VLS}: attribute 'reset_on_eos'",
       _vl_probe("varlenngramhashmapping.reset_on_eos", 9605, attrs={"reset_on_eos": 1}, extra={"eos_token_id": 3},
                 ids=[11, 3, 27, 40, 3, 5, 3, 8], reset=("reset_on_eos",)),
       Use(inputs=("eos_token_id",), attributes={"reset_on_eos": NON_DEFAULT})),
    _f(VARLEN, "varlenngramhashmapping.segment_ids", "int64", "segment_ids reset the history inside a request; control drops them",
       f"{_VLS}: input 'segment_ids'",
       _vl_probe("varlenngramhashmapping.segment_ids", 9606, extra={"segment_ids": _VL_SEGS}, drop=("segment_ids",)),
       Use(inputs=("segment_ids",))),
    _f(VARLEN, "varlenngramhashmapping.past_segment_ids", "int64",
       "past_segment_ids (3,2) with past_ids: boundaries inside and against the history; control drops them",
       f"{_VLS}: input 'past_segment_ids'",
       _vl_probe("varlenngramhashmapping.past_segment_ids", 9607,
                 extra={"past_ids": _VL_PAST, "segment_ids": _VL_SEGS, "past_segment_ids": _VL_PSEGS},
                 drop=("past_segment_ids",)), Use(inputs=("segment_ids", "past_segment_ids"))),
    _f(VARLEN, "varlenngramhashmapping.output.present_ids", "int64",
       "optional output present_ids (listed first) with past_ids (a 1-token request keeps one past id); control drops past_ids",
       f"{_VLS}: output 'present_ids'",
       _vl_probe("varlenngramhashmapping.output.present_ids", 9608, extra={"past_ids": _VL_PAST},
                 outputs=("present_ids", "hash_ids"), drop=("past_ids",)),
       Use(inputs=("past_ids",), facts={"outputs": ("hash_ids", "present_ids")})),
    _f(VARLEN, "varlenngramhashmapping.output.present_segment_ids", "int64",
       "optional output present_segment_ids (listed first) with past_segment_ids; control drops past_segment_ids",
       f"{_VLS}: output 'present_segment_ids'",
       _vl_probe("varlenngramhashmapping.output.present_segment_ids", 9609,
                 extra={"past_ids": _VL_PAST, "segment_ids": _VL_SEGS, "past_segment_ids": _VL_PSEGS},
                 outputs=("present_segment_ids", "hash_ids"), drop=("past_segment_ids",)),
       Use(inputs=("segment_ids", "past_segment_ids"), facts={"outputs": ("hash_ids", "present_segment_ids")})),
    _f(VARLEN, "varlenngramhashmapping.output.state_update", "int64",
       "state_update_capacity=3 with capture_count [2,1,3]: per-prefix states (listed first); control ids 0",
       f"{_VLS}: output 'state_update', input 'capture_count', attribute 'state_update_capacity'",
       _vl_probe("varlenngramhashmapping.output.state_update", 9610, attrs={"state_update_capacity": 3},
                 extra={"capture_count": [2, 1, 3]}, outputs=("state_update", "hash_ids")),
       Use(inputs=("capture_count",), attributes={"state_update_capacity": NON_DEFAULT},
           facts={"outputs": ("hash_ids", "state_update")})),
    _f(VARLEN_I32, "varlenngramhashmapping.dtype.int32", "int32", "varlenngramhashmapping.basic with int32 ids; control ids 0",
       f"{_VLS}: type constraint M includes tensor(int32)", _vl_probe("varlenngramhashmapping.dtype.int32", 9611,
                                                                       op=VARLEN_I32)),
)
