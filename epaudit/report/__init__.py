"""Report formats: one module each, ``format(result) -> str``; writing files is the CLI's job."""

from __future__ import annotations

from typing import Callable

from ..results import RunResult
from . import github, junit, markdown, table
from . import json as json_report

#: Format name -> pure formatter.
FORMATS: dict[str, Callable[..., str]] = {
    "table": table.format,
    "json": json_report.format,
    "junit": junit.format,
    "markdown": markdown.format,
    "github": github.format,
}

__all__ = ["FORMATS", "RunResult"]
