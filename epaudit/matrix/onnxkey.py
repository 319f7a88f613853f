"""The matrix's ``onnx`` key: the onnx version its ``onnx.*`` keys were written against.

The generated catalog's ids (``onnx.RoiAlign.mode=max.roialign_aligned_false.opset22``,
:mod:`epaudit.catalog.corpus`) come from the ONNX backend node test corpus *of the
installed onnx*, so a matrix written against onnx 1.23.2 names ids (opset 28, new
attributes) that onnx 1.22.0 never generates. With ``onnx = "1.23.2"`` at the top of the
matrix and another onnx installed, an ``onnx.*`` exact key the catalog lacks and an
``onnx.*`` glob matching no feature are not errors: they are skipped and recorded
(``Matrix.stale_generated``), and the CLI prints one note (:func:`note`). Without the key,
or with the installed version, they stay errors (docs/matrix.md, "The onnx key").

Only the shape of a skipped key is checked here (``onnx.<Op>.…`` with ``<Op>`` written
like an ai.onnx operator name, an exact id ending in ``.opset<N>`` as
:func:`epaudit.catalog.corpus.ids.probe_id` writes them): whether ``<Op>`` exists
in some onnx would need ``import onnx`` on every matrix load, which this path avoids.
"""

from __future__ import annotations

import re

from .globs import is_glob

#: What an ``onnx`` value must look like: a release number as onnx publishes them
#: (``1.23.2``, ``1.24.0rc1``); compared with the installed version as written.
VERSION = re.compile(r"^[0-9]+(\.[0-9]+)+[0-9A-Za-z.+-]*$")
#: An ai.onnx operator name as the schemas write them (``RoiAlign``, ``LpNormalization``).
_OP = re.compile(r"^[A-Z][A-Za-z0-9]*$")
#: A generated feature id: ``onnx.<Op>.<change>.<case>.opset<N>`` (ids.probe_id).
_ID = re.compile(r"^onnx\.[A-Z][A-Za-z0-9]*\..+\.opset[0-9]+$")


def installed_onnx() -> str | None:
    """The installed onnx's version from its distribution metadata (``"1.23.2"``), or
    ``None`` when onnx is not installed; never imports onnx (it costs ~1 s), nor
    ``importlib.metadata`` (~0.1 s at every start): the dist-info beside onnx's package
    names it (:func:`epaudit.cache.probecache.onnx_version`)."""
    from ..cache.probecache import onnx_version

    version = onnx_version()
    return None if version == "not installed" else version


def plausible(key: str) -> bool:
    """May ``key`` be an ``onnx.*`` key of another onnx's corpus: an exact id shaped as
    the generated ids are, or a glob whose operator segment is a wildcard or an operator
    name (``onnx.*.opset28``, ``onnx.Attention.*``; not ``onnx.attention.*``)?"""
    if not key.startswith("onnx."):
        return False
    if not is_glob(key):
        return _ID.match(key) is not None
    op = key.split(".")[1]
    return is_glob(op) or _OP.match(op) is not None


def note(matrix) -> str | None:
    """The one line the CLI prints on stderr for a matrix with skipped ``onnx.*`` keys
    (``Matrix.stale_generated``), or ``None`` when none were skipped.

    ``capabilities.toml:13: onnx = "1.23.2" but onnx 1.22.0 is installed: 14 onnx.*
    declaration(s) match no generated probe and are ignored (see `epaudit features
    --feature 'onnx.*'`)``
    """
    stale = getattr(matrix, "stale_generated", ())
    if not stale:
        return None
    where = f"{matrix.path}:{matrix.onnx_line}" if matrix.onnx_line else matrix.path
    have = f"onnx {matrix.onnx_installed} is installed" if matrix.onnx_installed else "onnx is not installed"
    return (f'{where}: onnx = "{matrix.onnx}" but {have}: {len(stale)} onnx.* declaration(s) match no '
            "generated probe and are ignored (see `epaudit features --feature 'onnx.*'`)")


__all__ = ["VERSION", "installed_onnx", "note", "plausible"]
