"""Input values that hit decision points, drawn per value kind from a seed.

Kinds (:data:`epaudit.sweep.config.VALUE_KINDS`, simplest first):

* ``zeros``, ``ones``;
* ``ints``: small integers (-4 ... 4; 0 ... 8 unsigned), exact in every dtype;
* ``ties``: ``(k + 0.5) * 2**e`` (k in -8 ... 7, e in -1 ... 2): exact halves, and halves of
  a power-of-two scale, where a rounding mode decides (Round, QuantizeLinear, a Resize
  coordinate, Cast to an integer);
* ``normal``: N(0, 1) (integers: -100 ... 100);
* ``large`` / ``tiny``: N(0, 1) times 1e4 / 1e-6 (float16: 1e2 / 1e-5, the latter
  subnormal), with a few subnormals among the tiny ones;
* ``extremes``: the dtype's largest and smallest finite values, its smallest normal, 0 and
  +-1 (integers: its min and max);
* ``special``: normal values with about a quarter replaced by NaN, +inf and -inf (at least
  one NaN). Only drawn for operators that propagate them (``space.PROPAGATES``).

Every value is rounded to the input's dtype before any reference sees it.
"""

from __future__ import annotations

import numpy as np

_SCALE = {"float16": (1e2, 1e-5), "float32": (1e4, 1e-6), "float64": (1e4, 1e-6)}


def draw(kind: str, dtype: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    """An array of ``shape`` and ``dtype`` (numpy name) of value kind ``kind``.

    Raises:
        ValueError: an unknown kind.
    """
    dt = np.dtype(dtype)
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if dt.kind == "b":
        if kind == "zeros":
            return np.zeros(shape, dt)
        if kind == "ones":
            return np.ones(shape, dt)
        return rng.integers(0, 2, size=shape).astype(dt)
    if kind == "zeros":
        return np.zeros(shape, dt)
    if kind == "ones":
        return np.ones(shape, dt)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = 0 if dt.kind == "u" else -4
        if kind in ("ints", "ties"):
            out = rng.integers(lo, lo + 9, size=n)
        elif kind in ("normal", "tiny", "special"):
            out = rng.integers(max(info.min, -100), min(info.max, 100) + 1, size=n)
        elif kind in ("large", "extremes"):
            # In the dtype itself: uint64's maximum does not fit an int64.
            pool = np.array([info.min, info.max, 0, 1] + ([-1] if dt.kind == "i" else []), dtype=dt)
            if kind == "large":
                pool = np.array([info.max // 2, info.min // 2, info.max - 1, 1], dtype=dt)
            return pool[rng.integers(0, len(pool), size=n)].reshape(shape)
        else:
            raise ValueError(f"unknown value kind {kind!r}")
        return np.asarray(out, dtype=np.int64).astype(dt).reshape(shape)
    if dt.kind != "f":
        raise ValueError(f"no values of dtype {dtype}")
    big, small = _SCALE.get(dt.name, (1e4, 1e-6))
    if kind == "ints":
        out = rng.integers(-4, 5, size=n).astype(np.float64)
    elif kind == "ties":
        out = (rng.integers(-8, 8, size=n) + 0.5) * 2.0 ** rng.integers(-1, 3, size=n)
    elif kind == "normal":
        out = rng.standard_normal(n)
    elif kind == "large":
        out = rng.standard_normal(n) * big
    elif kind == "tiny":
        out = rng.standard_normal(n) * small
        if n:
            sub = float(np.finfo(dt).smallest_subnormal) if hasattr(np.finfo(dt), "smallest_subnormal") else 0.0
            idx = rng.integers(0, n, size=max(1, n // 8))
            out[idx] = sub * rng.integers(1, 8, size=idx.size) * rng.choice([-1.0, 1.0], size=idx.size)
    elif kind == "extremes":
        fi = np.finfo(dt)
        pool = np.array([float(fi.max), -float(fi.max), float(fi.tiny), -float(fi.tiny), 0.0, 1.0, -1.0])
        out = pool[rng.integers(0, len(pool), size=n)]
    elif kind == "special":
        out = rng.standard_normal(n)
        if n:
            hit = rng.random(n) < 0.25
            hit[rng.integers(0, n)] = True
            which = rng.integers(0, 3, size=n)
            out = np.where(hit & (which == 0), np.nan, out)
            out = np.where(hit & (which == 1), np.inf, out)
            out = np.where(hit & (which == 2), -np.inf, out)
            if not np.isnan(out).any():
                out[int(np.flatnonzero(hit)[0])] = np.nan
    else:
        raise ValueError(f"unknown value kind {kind!r}")
    with np.errstate(over="ignore"):
        return np.asarray(out, dtype=np.float64).astype(dt).reshape(shape)
