"""Float64 references for the fused and layout contrib kernels: ``FusedConv``, ``FusedGemm``,
``FusedMatMul``, ``TransposeMatMul``, ``ConvTransposeWithDynamicPads`` and ``NhwcMaxPool``
(``com.microsoft``, version 1).

Sources:

* ``FusedConv`` = ONNX ``Conv`` (NCHW, ``pads`` [x1_begin, x2_begin, …, x1_end, …],
  ``strides``, ``dilations``, ``group``, ``auto_pad``) whose result ``conv + B + Z`` goes
  through ``activation`` (schema doc: "the same as Conv besides it includes an attribute
  activation"). The CPU kernel (``onnxruntime/contrib_ops/cpu/fused_conv.cc`` →
  ``onnxruntime/core/providers/cpu/nn/conv.cc`` ``Conv<float>::Compute``) copies the ``Z``
  ("sum") input into Y and accumulates the convolution onto it (``Beta = 1``) before MLAS adds
  the bias and applies the activation: ``Y = act(conv(X, W) + B + Z)``.
* ``FusedGemm`` = ONNX ``Gemm`` (``alpha · A' · B' + beta · C``) then ``activation`` with the
  ``activation_alpha/beta/gamma`` parameters (``onnxruntime/contrib_ops/cpu/fused_gemm.cc``).
* ``FusedMatMul`` / ``TransposeMatMul``: ``alpha · op(A) @ op(B)`` with numpy broadcasting of the
  batch dimensions; ``transA``/``transB`` swap the last two axes; ``transBatchA``/``transBatchB``
  move axis 0 behind the batch axes before that (shape inference ``FusedMatMulShapeInference``
  in ``onnxruntime/core/graph/contrib_ops/contrib_defs.cc``: with transBatch the matrix rows are
  axis 0 and the batch axes are 1 … rank−2). Kernel: ``onnxruntime/contrib_ops/cpu/fused_matmul.cc``
  (``MatMul<T>`` with ``MatMulComputeHelper``).
* ``ConvTransposeWithDynamicPads`` = ONNX ``ConvTranspose`` whose pads come from the optional
  int64 input ``Pads`` (input 2; ``B`` is input 3), ``onnxruntime/contrib_ops/cpu/conv_transpose_with_dynamic_pads.h``
  (``DoConvTranspose(context, dynamic_padding=true)``). Output size per axis:
  ``stride · (in − 1) + output_padding + (k − 1) · dilation + 1 − pad_begin − pad_end``.
* ``NhwcMaxPool`` = ONNX ``MaxPool`` (``kernel_shape``, ``pads``, ``strides``, ``dilations``,
  ``ceil_mode``, ``auto_pad``) on an NHWC uint8/int8 tensor; padded positions never win
  (``onnxruntime/contrib_ops/cpu/nhwc_max_pool.cc``, ``MlasMaximumPool``).
"""

from __future__ import annotations

import itertools
import math
from typing import Mapping, Sequence

import numpy as np

from .activations import activate

__all__ = ["conv", "fused_conv", "fused_gemm", "fused_matmul", "conv_transpose", "nhwc_max_pool",
           "same_pads"]


def same_pads(in_size: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
              mode: str) -> list[int]:
    """Begin/end pads of ONNX ``auto_pad`` SAME_UPPER / SAME_LOWER (output = ceil(in / stride)),
    as [b1, b2, …, e1, e2, …]; extra padding goes at the end for SAME_UPPER."""
    begins, ends = [], []
    for n, k, s, d in zip(in_size, kernel, strides, dilations):
        out = math.ceil(n / s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small, big = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else big)
        ends.append(big if mode == "SAME_UPPER" else small)
    return begins + ends


def _spatial(attrs: Mapping[str, object], in_size: Sequence[int], kernel: Sequence[int]):
    r = len(kernel)
    strides = list(attrs.get("strides") or [1] * r)
    dilations = list(attrs.get("dilations") or [1] * r)
    auto = attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(in_size, kernel, strides, dilations, auto)
    elif auto == "VALID":
        pads = [0] * (2 * r)
    else:
        pads = list(attrs.get("pads") or [0] * (2 * r))
    return strides, dilations, pads


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, **attrs) -> np.ndarray:
    """ONNX Conv, float64: ``x`` (N, C, *spatial), ``w`` (M, C/group, *kernel), ``b`` (M,).

    Keyword attributes: ``pads``, ``strides``, ``dilations``, ``group``, ``auto_pad`` (NOTSET,
    SAME_UPPER, SAME_LOWER, VALID); ``kernel_shape`` must equal ``w``'s if given.

    Raises:
        ValueError: channels that do not divide into ``group``, or a kernel_shape unlike W's.
    """
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c = x.shape[:2]
    m, cg = w.shape[:2]
    kernel = w.shape[2:]
    if attrs.get("kernel_shape") is not None and tuple(attrs["kernel_shape"]) != tuple(kernel):
        raise ValueError(f"kernel_shape {attrs['kernel_shape']} differs from W's {kernel}")
    group = int(attrs.get("group", 1))
    if c != cg * group or m % group:
        raise ValueError(f"C={c}, M={m} do not fit group={group} with W {w.shape}")
    strides, dilations, pads = _spatial(attrs, x.shape[2:], kernel)
    r = len(kernel)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + r]) for i in range(r)])
    out = [(xp.shape[2 + i] - (kernel[i] - 1) * dilations[i] - 1) // strides[i] + 1 for i in range(r)]
    y = np.zeros((n, m) + tuple(out))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg:(g + 1) * cg]
        for kpos in itertools.product(*[range(k) for k in kernel]):
            sl = tuple(slice(kpos[i] * dilations[i], kpos[i] * dilations[i] + (out[i] - 1) * strides[i] + 1,
                             strides[i]) for i in range(r))
            patch = xs[(slice(None), slice(None)) + sl]  # (N, Cg, *out)
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kpos]  # (Mg, Cg)
            y[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wk)
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape((1, m) + (1,) * r)
    return y


def fused_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, z: np.ndarray | None = None,
               *, activation: str | None = None, activation_params: Sequence[float] = (), **attrs) -> np.ndarray:
    """FusedConv: ``act(conv(X, W) + B + Z)``; ``Z`` has the output's shape.

    Raises:
        ValueError: Z's shape differs from the output's (the kernel: "output and sum shape
            must match"), or what :func:`conv` / :func:`~epaudit.reference.activations.activate` raise.
    """
    y = conv(x, w, b, **attrs)
    if z is not None:
        z = np.asarray(z, np.float64)
        if z.shape != y.shape:
            raise ValueError(f"Z shape {z.shape} differs from the output's {y.shape}")
        y = y + z
    return activate(y, activation, activation_params)


def fused_gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, alpha: float = 1.0,
               beta: float = 1.0, transA: int = 0, transB: int = 0, activation: str | None = None,  # noqa: N803
               **activation_params: float) -> np.ndarray:
    """FusedGemm: ``act(alpha · A' @ B' + beta · C)``, A (M, K) or (K, M), B (K, N) or (N, K),
    C broadcastable to (M, N); ``activation_params`` are ``activation_alpha`` … by their
    full attribute names."""
    a2 = np.asarray(a, np.float64)
    b2 = np.asarray(b, np.float64)
    y = alpha * ((a2.T if transA else a2) @ (b2.T if transB else b2))
    if c is not None:
        y = y + beta * np.asarray(c, np.float64)
    named = {k[len("activation_"):]: v for k, v in activation_params.items() if k.startswith("activation_")}
    return activate(y, activation, named=named)


def _operand(m: np.ndarray, trans: int, trans_batch: int) -> np.ndarray:
    if m.ndim == 1:
        return m  # numpy: a transpose of a vector changes nothing (the kernel ignores the flags)
    if trans_batch:
        m = np.moveaxis(m, 0, -2)  # (d1, …, d_{r-2}, d0, d_{r-1}): rows are axis 0
    return np.swapaxes(m, -1, -2) if trans else m


def fused_matmul(a: np.ndarray, b: np.ndarray, *, alpha: float = 1.0, transA: int = 0, transB: int = 0,  # noqa: N803
                 transBatchA: int = 0, transBatchB: int = 0) -> np.ndarray:  # noqa: N803
    """FusedMatMul (and TransposeMatMul, without the transBatch attributes): numpy matmul of the
    transformed operands times ``alpha``.

    Raises:
        ValueError: inner dimensions that do not match (numpy's).
    """
    a2 = _operand(np.asarray(a, np.float64), transA, transBatchA)
    b2 = _operand(np.asarray(b, np.float64), transB, transBatchB)
    return alpha * np.matmul(a2, b2)


def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, pads: Sequence[int] | None = None,
                   *, strides: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
                   output_padding: Sequence[int] | None = None, group: int = 1) -> np.ndarray:
    """ONNX ConvTranspose, float64: ``x`` (N, C, *spatial), ``w`` (C, M/group, *kernel),
    ``b`` (M,), ``pads`` [b1, …, e1, …] (default zeros).

    Raises:
        ValueError: C not divisible by ``group``.
    """
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    n, c = x.shape[:2]
    if c % group or w.shape[0] != c:
        raise ValueError(f"W {w.shape} does not fit C={c} with group={group}")
    kernel = w.shape[2:]
    r = len(kernel)
    strides = list(strides or [1] * r)
    dilations = list(dilations or [1] * r)
    output_padding = list(output_padding or [0] * r)
    pads = [int(p) for p in (pads if pads is not None else [0] * (2 * r))]
    cg, mg = c // group, w.shape[1]
    full = [strides[i] * (x.shape[2 + i] - 1) + output_padding[i] + (kernel[i] - 1) * dilations[i] + 1
            for i in range(r)]
    y = np.zeros((n, mg * group) + tuple(full))
    for g in range(group):
        xs = x[:, g * cg:(g + 1) * cg]
        for kpos in itertools.product(*[range(k) for k in kernel]):
            wk = w[(slice(g * cg, (g + 1) * cg), slice(None)) + kpos]  # (Cg, Mg)
            contrib = np.einsum("nc...,cm->nm...", xs, wk)
            sl = tuple(slice(kpos[i] * dilations[i], kpos[i] * dilations[i] + (x.shape[2 + i] - 1) * strides[i] + 1,
                             strides[i]) for i in range(r))
            y[(slice(None), slice(g * mg, (g + 1) * mg)) + sl] += contrib
    crop = tuple(slice(pads[i], full[i] - pads[i + r]) for i in range(r))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y = y + np.asarray(b, np.float64).reshape((1, -1) + (1,) * r)
    return y


def nhwc_max_pool(x: np.ndarray, *, kernel_shape: Sequence[int], pads: Sequence[int] | None = None,
                  strides: Sequence[int] | None = None, dilations: Sequence[int] | None = None,
                  ceil_mode: int = 0, auto_pad: str = "NOTSET") -> np.ndarray:
    """ONNX MaxPool on an NHWC tensor ``x`` (N, *spatial, C); padded positions are skipped.

    Returns the pooled (N, *out, C) values in ``x``'s dtype promoted to float64.
    """
    x = np.asarray(x)
    r = len(kernel_shape)
    attrs = {"pads": pads, "strides": strides, "dilations": dilations, "auto_pad": auto_pad}
    strides_, dilations_, pads_ = _spatial(attrs, x.shape[1:1 + r], kernel_shape)
    out = []
    for i in range(r):
        span = x.shape[1 + i] + pads_[i] + pads_[i + r] - ((kernel_shape[i] - 1) * dilations_[i] + 1)
        o = (math.ceil(span / strides_[i]) if ceil_mode else span // strides_[i]) + 1
        if ceil_mode and (o - 1) * strides_[i] >= x.shape[1 + i] + pads_[i]:
            o -= 1  # the last window must start inside the input or its begin padding (ONNX MaxPool)
        out.append(o)
    xf = x.astype(np.float64)
    y = np.full((x.shape[0],) + tuple(out) + (x.shape[-1],), -np.inf)
    for opos in itertools.product(*[range(o) for o in out]):
        for kpos in itertools.product(*[range(k) for k in kernel_shape]):
            ipos = [opos[i] * strides_[i] - pads_[i] + kpos[i] * dilations_[i] for i in range(r)]
            if all(0 <= ipos[i] < x.shape[1 + i] for i in range(r)):
                idx = (slice(None),) + tuple(ipos) + (slice(None),)
                o_idx = (slice(None),) + tuple(opos) + (slice(None),)
                y[o_idx] = np.maximum(y[o_idx], xf[idx])
    return y
