"""GitHub Actions annotations (``--format github``): one workflow command per finding.

``::error file=<matrix>,line=<line of the cell>,title=…::<message>`` for a failing
finding, ``::warning …`` for a warning, so the finding shows on the matrix line in the
pull request. ``epaudit check`` prints them by itself when ``GITHUB_ACTIONS=true``.
Escaping as GitHub's toolkit does it (``@actions/core`` ``command.ts``): ``%``, CR and LF
in the message; additionally ``:`` and ``,`` in property values. GitHub shows at most
10 annotations of each kind per step; the Markdown summary and JUnit report have all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..contract.results import RunResult
from ..textenc import one_line


def escape_data(text: str) -> str:
    """A workflow command's message: ``%`` ``\\r`` ``\\n`` percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: as :func:`escape_data`, plus ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _file(matrix_path: str, cwd: str | None) -> str | None:
    """The matrix as a path GitHub can place (relative to the workspace), or ``None`` for
    the embedded matrix, which is no file in the repository."""
    if not matrix_path or matrix_path.startswith("<"):
        return None
    p = Path(matrix_path)
    if p.is_absolute():
        try:
            return p.relative_to(cwd or os.getcwd()).as_posix()
        except ValueError:
            return p.as_posix()
    return p.as_posix()


def format(result: RunResult, *, cwd: str | None = None, **_: Any) -> str:  # noqa: A001
    """One ``::error``/``::warning`` line per finding (empty when there are none)."""
    if result.gate is None:
        return ""
    file = _file(result.matrix_path, cwd)
    out = []
    for f in result.gate.findings:
        props = []
        if file:
            props.append(f"file={escape_property(file)}")
            if f.line:
                props.append(f"line={f.line}")
        where = f"{f.feature_id} on {f.ep}" if f.feature_id else f.ep
        props.append(f"title={escape_property(one_line(f'epaudit {f.kind.value}: {where}'))}")
        # one line, no escape code and no ##[ (epaudit.textenc.one_line), then GitHub's own escaping
        out.append(f"::{'error' if f.failing else 'warning'} {','.join(props)}::"
                   f"{escape_data(one_line(f'{f.message} (declared {f.declared})'))}")
    return "".join(line + "\n" for line in out)
