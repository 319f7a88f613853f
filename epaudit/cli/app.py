"""The ``epaudit`` command group: one-line usage errors, Ctrl-C before a run, streams
that cannot encode every symbol."""

from __future__ import annotations

import sys

import click

from .. import __version__
from .options import _KEY, _TERM, EXIT_USAGE, _color_opt


class _OneLineErrors(click.Group):
    """click's usage errors as one line (``epaudit: error: …``, exit 2), like every other
    bad input, instead of click's four-line usage block; Ctrl-C before a run starts is
    exit 3 without a traceback."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if sys.stdout is None:  # started with stdout closed (`>&-`): nowhere to report
            click.echo("epaudit: error: standard output is closed", err=True)
            sys.exit(EXIT_USAGE)
        from ..textenc import degrade_streams

        degrade_streams()  # an ASCII or latin-1 stream gets look-alikes, never a traceback
        _TERM.update(color="auto", quiet=False, key_file=None)  # per invocation (tests run many in one process)
        _KEY.clear()
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # `epaudit` alone: the help text
                click.echo(exc.format_message(), err=True)
            else:
                click.echo(f"epaudit: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except (click.exceptions.Abort, KeyboardInterrupt):
            click.echo("epaudit: interrupted: nothing was reported", err=True)
            sys.exit(3)
        except OSError as exc:  # writing stdout failed (`> /dev/full`, a closed pipe)
            try:
                click.echo(f"epaudit: error: {exc.strerror or exc}", err=True)
            except OSError:
                pass
            sys.exit(EXIT_USAGE)
        if not standalone_mode:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=_OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="epaudit")
@_color_opt
def main() -> None:
    """Audit ONNX Runtime execution providers for feature parity."""
