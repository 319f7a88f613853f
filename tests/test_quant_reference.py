"""The MatMulNBits and GatherBlockQuantized references and catalogs.

onnx.reference has no evaluator for ``com.microsoft`` operators, so each reference is checked
two other ways: against small cases computed by hand here (packing layout, zero points,
g_idx, out-of-range indices), and against the CPU EP through real ORT sessions on every
shipped probe the matrix declares supported on CPU. Where the CPU EP deviates from the
documented rule the matrix declares it (``skip`` or ``unsupported``), and a test pins what
the CPU EP does instead, so the declaration goes stale loudly when ORT changes.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from probe_contract import assert_control_runs_on_subject_arrays

from epaudit.catalog import BY_ID, FEATURES
from epaudit.classify.compare import separation
from epaudit.contract.probes import MIN_SEPARATION, Use
from epaudit.matrix.load import load as load_matrix
from epaudit.reference.gatherblockquantized import gather_block_quantized_reference
from epaudit.reference.matmulnbits import (
    matmulnbits_reference,
    pack_codes,
    pack_zero_points,
    unpack_codes,
)

QUANT = tuple(f for f in FEATURES if f.op_type in ("MatMulNBits", "GatherBlockQuantized"))
MATRIX = load_matrix(None)


def _cpu(case) -> np.ndarray:
    sess = ort.InferenceSession(case.model, providers=["CPUExecutionProvider"])
    return sess.run(None, dict(case.feeds))


# --- hand-computed cases ---------------------------------------------------------------

def test_packing_is_lowest_bits_first():
    assert pack_codes(np.array([1, 2, 3, 4]), 4).tolist() == [0x21, 0x43]
    assert pack_codes(np.array([1, 2, 3, 0]), 2).tolist() == [0b00111001]
    assert pack_codes(np.array([7, 200]), 8).tolist() == [7, 200]
    # Zero points pad each row to whole bytes: 3 blocks of 4 bits take 2 bytes per row.
    assert pack_zero_points(np.array([[5, 9, 12], [1, 2, 3]]), 4).tolist() == [[0x95, 0x0C], [0x21, 0x03]]
    codes = np.arange(16) % 4
    assert unpack_codes(pack_codes(codes, 2), 2).tolist() == codes.tolist()
    with pytest.raises(ValueError):
        pack_codes(np.array([16, 0]), 4)


def _one_block(codes: list[int]) -> np.ndarray:
    return pack_codes(np.array(codes).reshape(1, 1, 16), 4)


def test_matmulnbits_hand_cases():
    a = np.arange(16, dtype=np.float64)[None, :]           # A = [0 .. 15]
    b = _one_block([8] * 15 + [10])                         # codes: 8 x15, then 10
    s = np.array([[0.5]])
    kw = dict(k=16, n=1, bits=4, block_size=16)
    # Implicit zero point 8: W = [0]*15 + [1] -> Y = 15.
    assert matmulnbits_reference(a, b, s, **kw).tolist() == [[15.0]]
    # Packed uint8 zero point 10: W = [-1]*15 + [0] -> Y = -(0 + ... + 14) = -105.
    assert matmulnbits_reference(a, b, s, zero_points=np.array([[10]], np.uint8), **kw).tolist() == [[-105.0]]
    # Float zero point 9.5: W = [-0.75]*15 + [0.25] -> Y = -0.75*105 + 0.25*15 = -75.
    assert matmulnbits_reference(a, b, s, zero_points=np.array([[9.5]]), **kw).tolist() == [[-75.0]]
    # Bias adds per output feature.
    assert matmulnbits_reference(a, b, s, bias=np.array([2.5]), **kw).tolist() == [[17.5]]


def test_matmulnbits_g_idx_hand_case():
    a = np.arange(32, dtype=np.float64)[None, :]
    b = pack_codes(np.full((1, 2, 16), 9), 4)               # every code 9: W = scale of its block
    s = np.array([[1.0, 2.0]])
    kw = dict(k=32, n=1, bits=4, block_size=16)
    assert matmulnbits_reference(a, b, s, **kw).tolist() == [[120.0 + 2 * 376.0]]
    swapped = np.array([1] * 16 + [0] * 16, np.int32)       # first half reads block 1's scale
    assert matmulnbits_reference(a, b, s, g_idx=swapped, **kw).tolist() == [[2 * 120.0 + 376.0]]


def test_matmulnbits_k_not_multiple_ignores_padding():
    codes = np.full((1, 2, 16), 8)
    codes[0, 1, 4:] = 15                                     # padding codes beyond K = 20
    codes[0, 1, 0] = 9
    y = matmulnbits_reference(np.ones((1, 20)), pack_codes(codes, 4), np.array([[1.0, 1.0]]),
                              k=20, n=1, bits=4, block_size=16)
    assert y.tolist() == [[1.0]]


def test_gather_block_quantized_hand_cases():
    codes = np.array([[0, 8, 15, 9] * 4, [1] * 16])          # (2, 16): one block of 16 per row
    scales = np.array([[0.5], [2.0]])
    idx = np.array([1, -2, 2, -3])                           # row 1, row 0, out of range twice
    out = gather_block_quantized_reference(codes, idx, scales, block_size=16, default_zp=8)
    assert out[0].tolist() == [-14.0] * 16                   # (1 - 8) * 2
    assert out[1, :4].tolist() == [-4.0, 0.0, 3.5, 0.5]      # (c - 8) * 0.5
    assert not out[2:].any()                                 # zeros, not an error
    zp = np.array([[1], [0]])
    out = gather_block_quantized_reference(codes, np.array([[0]]), scales, block_size=16,
                                           zero_points=zp, default_zp=8)
    assert out.shape == (1, 1, 16) and out[0, 0, :4].tolist() == [-0.5, 3.5, 7.0, 4.0]
    # gather_axis 1, quantize_axis 0: columns picked, blocks down the rows.
    cols = gather_block_quantized_reference(codes, np.array([2]), np.array([[0.25] * 16]),
                                            gather_axis=1, quantize_axis=0, block_size=16)
    assert cols.tolist() == [[15 * 0.25], [0.25]]


# --- the catalog against the CPU EP ------------------------------------------------------

def _declared(fid: str, ep: str = "CPU") -> str | None:
    d = MATRIX.declaration(fid, ep)
    return None if d is None else d.status


@pytest.mark.parametrize("fid", [f.id for f in QUANT])
def test_reference_matches_ort_cpu(fid):
    """Subject and control both match the CPU EP wherever the matrix says CPU supports the
    feature; the probe is never blind; every feature says what it uses."""
    feature = BY_ID[fid]
    probe = feature.build()
    assert separation(probe) >= MIN_SEPARATION
    assert isinstance(feature.uses, Use) and feature.source and feature.changes
    assert_control_runs_on_subject_arrays(probe)
    status = _declared(fid)
    assert status is not None, f"{fid} is not declared for CPU"
    if status != "supported":
        pytest.skip(f"declared {status} on CPU")
    for case in (probe.subject, probe.control):
        (y,) = _cpu(case)
        ref = case.reference[case.outputs[0]]
        assert y.shape == ref.shape
        assert probe.tolerance.close(y, ref).all(), fid


def test_cpu_ignores_uint8_zero_points_with_g_idx():
    """The deviation the matrix declares ``skip`` on CPU: with g_idx, the CPU EP dequantizes
    with the implicit zero point 8 and drops the packed uint8 zero points
    (matmul_nbits_impl.cc ``Dequantize4BitsKernelReOrder`` never assigns ``zp_f`` for uint8)."""
    fid = "matmulnbits.g_idx.with_zero_points"
    assert _declared(fid) == "skip"
    case = BY_ID[fid].build().subject
    (y,) = _cpu(case)
    from epaudit.catalog.matmulnbits import _data, _Spec
    d = _data(_Spec(g_idx=True, zp="uint8"), 3071)
    implicit = matmulnbits_reference(d["A"], d["B"], d["scales"], k=64, n=8, bits=4, block_size=32,
                                     g_idx=d["g_idx"])
    assert np.allclose(y, implicit, atol=1e-4) and not np.allclose(y, case.reference["Y"], atol=1.0)


@pytest.mark.parametrize("fid", ["matmulnbits.block_size.512", "matmulnbits.zero_points.float.bits.8"])
def test_cpu_refusals_are_declared_and_loud(fid):
    assert _declared(fid) == "unsupported"
    with pytest.raises(Exception, match="block sizes 16, 32, 64, 128, and 256|Only 2b and 4b"):
        _cpu(BY_ID[fid].build().subject)
