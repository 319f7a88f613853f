"""Whether the corpus-derived catalog is part of the catalog: ``$EPAUDIT_GENERATED``.

Its own module so that the catalog (``corpus/__init__.py``) and the builder's children
(``corpus/build.py``, which turn it off in each child) read one switch without importing each
other.
"""

from __future__ import annotations

import os

#: Environment variable: ``0`` leaves the generated catalog out of the catalog.
ENV = "EPAUDIT_GENERATED"


def enabled() -> bool:
    """Whether the generated catalog is part of the catalog (``$EPAUDIT_GENERATED`` not ``0``)."""
    return os.environ.get(ENV, "1").strip() not in ("0", "no", "false", "off")
