"""`epaudit selftest` and `epaudit oracle`: proofs that the probes can fail and that the reference is right."""

from __future__ import annotations

import sys

import click

from .app import main
from .common import _features, _load_matrix, _sharded
from .options import Seconds, _fail, _feature_opt, _matrix_opt, _shard_opt, _timeout_opt
from .output import _color_out, say


@main.command()
@_matrix_opt
@_feature_opt
@_timeout_opt
@click.option("--hang-timeout", type=Seconds(), default=None,
              help="per-probe limit under the hang fault, seconds (default 0.5).")
@_shard_opt
def selftest(matrix_path, feature_patterns, timeout, hang_timeout, shard) -> None:
    """Prove every probe catches every fault: the catalog on the CPU EP under each fault.

    Prints the features x faults detection table; exits 1 naming each feature and fault
    that was not caught as it must be. Features the matrix declares skip on CPU are not run.

    \b
    Exit codes:
      0  every fault caught on every feature
      1  a fault not caught as it must be
      2  usage or matrix error

    \b
    Examples:
      epaudit selftest --feature 'gqa.*'
      epaudit selftest --shard 3/8      (one job of a CI matrix; every job must exit 0)
    """
    from ..report.selftest import format as format_selftest
    from ..run.selftest import HANG_TIMEOUT, cpu_skips, run_selftest

    from ..run.interrupt import stop_on_signals

    matrix = _load_matrix(matrix_path)
    features, _ = _sharded(_features(feature_patterns), shard)
    # Ctrl-C / SIGTERM / SIGHUP stop every fault's worker at once (it waited for each
    # worker's probes: 12-38 s, issue 24); a part of a self-test proves nothing: no table.
    with stop_on_signals() as stop:
        result = run_selftest(features, timeout=timeout, skip=cpu_skips(matrix), stop=stop,
                              hang_timeout=HANG_TIMEOUT if hang_timeout is None else hang_timeout)
    if stop.signum is not None:
        import signal

        click.echo(f"epaudit: selftest interrupted by {signal.Signals(stop.signum).name}: workers stopped; "
                   "no table (a part of a self-test proves nothing)", err=True)
        sys.exit(3)
    from ..terminal import width

    say(format_selftest(result, color=_color_out(), width=width(sys.stdout)))
    sys.exit(result.exit_code)


@main.command()
@_feature_opt
def oracle(feature_patterns) -> None:
    """Cross-check our reference with onnx's ReferenceEvaluator on every ONNX Attention probe.

    Exits 1 on a disagreement that is not listed (with its clauses) in epaudit/reference/oracle.py,
    or on a listed one that went away.

    \b
    Exit codes:
      0  every case agrees or is a listed disagreement
      1  a new disagreement, a listed one that no longer occurs, or an evaluator failure
      2  the selection has no ONNX Attention feature

    \b
    Example:
      epaudit oracle --feature 'attention.qk_matmul_output_mode.*'
    """
    from ..reference import SEMANTICS
    from ..reference.oracle import cross_check, exit_code
    from ..report.oracle import format as format_oracle

    features = _features(feature_patterns)
    if not any(f.op_type == "Attention" and not f.domain for f in features):
        _fail("oracle: the selection has no ONNX Attention feature: nothing to cross-check "
              "(onnx.reference implements ai.onnx Attention only)")
    from ..cache.probecache import onnx_version

    rows = cross_check(features)
    say(format_oracle(rows, semantics=SEMANTICS, color=_color_out(), onnx_version=onnx_version()))
    sys.exit(exit_code(rows))
