"""Report formats: one module each, ``format(result) -> str``; writing files is the CLI's job."""

from __future__ import annotations

from typing import Callable

from ..results import RunResult
from . import json as json_report
from . import table

#: Format name -> pure formatter.
FORMATS: dict[str, Callable[..., str]] = {
    "table": table.format,
    "json": json_report.format,
}

__all__ = ["FORMATS", "RunResult"]
