"""The command line's words: the options every command shares, their types, and the usage error.

``_fail`` prints one line and exits 2 (never a traceback); ``--color`` and ``--quiet`` set
:data:`_TERM` for the whole process.
"""

from __future__ import annotations

import sys

import click

from ..report import FORMATS
from ..run.runner import DEFAULT_TIMEOUT

EXIT_USAGE = 2


def _fail(message: str) -> None:
    """One line on stderr, ``epaudit: error: …`` (escaped: a file's text never splits it or
    carries a workflow command, :func:`epaudit.textenc.one_line`), and exit 2."""
    from ..textenc import one_line

    click.echo(f"epaudit: error: {one_line(message)}", err=True)
    sys.exit(EXIT_USAGE)


def _say(kind: str, message: str) -> None:
    """One ``epaudit: <kind>: …`` line on stderr (a note or a warning), escaped as :func:`_fail` does."""
    from ..textenc import one_line

    click.echo(f"epaudit: {kind}: {one_line(message)}", err=True)


#: Terminal settings from --color / --quiet (epaudit/terminal.py), read by _emit; the
#: results key file (--results-key-file) and the key once loaded.
_TERM = {"color": "auto", "quiet": False, "key_file": None}
_KEY: dict = {}


def results_key() -> bytes | None:
    """The results key of this invocation (``--results-key-file``, else
    ``$EPAUDIT_RESULTS_KEY``), loaded once; ``None`` without one. A key that cannot be
    had is a usage error (exit 2)."""
    from ..contract.signing import ResultsKeyError, load_key

    where = _TERM.get("key_file")
    if where not in _KEY:
        try:
            _KEY.clear()
            _KEY[where] = load_key(where)
        except ResultsKeyError as exc:
            _fail(str(exc))
    return _KEY[where]


def _set_term(key: str):
    def callback(ctx, param, value):
        if value is not None and value is not False:
            _TERM[key] = value
        return value
    return callback


_color_opt = click.option("--color", type=click.Choice(["auto", "always", "never"]), default=None,
                          expose_value=False, is_eager=True, callback=_set_term("color"),
                          help="colour the terminal report: auto (a terminal, unless NO_COLOR is set), "
                               "always, never.")

_quiet_opt = click.option("--quiet", "-q", is_flag=True, default=None, expose_value=False,
                          callback=_set_term("quiet"),
                          help="print only the failing findings and the verdict (reports written in full).")

_matrix_opt = click.option("--matrix", "matrix_path", type=click.Path(dir_okay=False),
                           help="capabilities.toml to use (default: ./capabilities.toml if there is one, "
                                "else the packaged one).")

#: The longest time limit any option takes, seconds: ``1e300`` is finite but never ends,
#: so a hung probe would hang the gate as ``inf`` would.
MAX_SECONDS = 3600.0


class Seconds(click.ParamType):
    """A time limit in seconds, from 0.1 to :data:`MAX_SECONDS` (``nan``, ``inf`` and
    ``1e300`` are refused: a limit that never expires would let a hung probe hang the gate)."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math

        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not 0.1 <= seconds <= MAX_SECONDS:
            self.fail(f"{value!r} must be a number of seconds from 0.1 to {MAX_SECONDS:.0f}", param, ctx)
        return seconds


class ShardSpec(click.ParamType):
    """``K/N``: this run is shard K of N (:func:`epaudit.run.shard.parse`); anything else is
    one line, exit 2."""

    name = "K/N"

    def convert(self, value, param, ctx):
        from ..run.shard import Shard, parse

        if isinstance(value, Shard):
            return value
        try:
            return parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


_shard_opt = click.option("--shard", type=ShardSpec(), default=None,
                          help="run only shard K of N of the selection (a stable split balanced by measured "
                               "cost; each shard is a normal saved result; merge with check --results).")

_timeout_opt = click.option("--timeout", type=Seconds(), default=DEFAULT_TIMEOUT,
                            show_default=True, help="per-probe limit, seconds.")

_start_timeout_opt = click.option("--start-timeout", type=Seconds(), default=None,
                                  help="seconds a worker may take to start and run the canary (default 120, "
                                       "or the provider's start_timeout); past it the EP is misconfigured.")

_allow_absent_opt = click.option("--allow-absent", "allow_absent", multiple=True, metavar="EP",
                                 help="a gated EP that may be not live here (repeatable; adds to [gate] "
                                      "allow_absent): the verdict names it as not audited instead of "
                                      "being INCOMPLETE.")

_feature_opt = click.option("--feature", "feature_patterns", multiple=True,
                            help="feature id or glob (repeatable), e.g. 'gqa.*'.")

_report_opt = click.option("--report", "reports", multiple=True, metavar="FORMAT:FILE",
                           help=f"also write FORMAT ({', '.join(sorted(FORMATS))}) to FILE ('-' = stdout); "
                                "repeatable.")

_cache_dir_opt = click.option("--cache-dir", type=click.Path(file_okay=False),
                              help="where built probes are cached (default: $EPAUDIT_CACHE_DIR, "
                                   "$XDG_CACHE_HOME/epaudit or ~/.cache/epaudit).")

_no_cache_opt = click.option("--no-cache", is_flag=True,
                             help="build every probe now; read and write no probe cache.")

_label_opt = click.option("--label", default=None,
                          help="machine label recorded in the report (default: from the GPU name, else 'cpu'); "
                               "fleet columns are ALIAS@LABEL.")

_results_key_opt = click.option("--results-key-file", type=click.Path(dir_okay=False), default=None,
                                expose_value=False, is_eager=True, callback=_set_term("key_file"),
                                help="file holding the results key (default: $EPAUDIT_RESULTS_KEY): JSON reports "
                                     "written are signed with it (HMAC-SHA256), saved results read are verified.")
