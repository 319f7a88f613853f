"""`epaudit surface`: the kernels each EP registers, and the catalog's coverage of them."""

from __future__ import annotations

import click

from .app import main
from .common import _features, _load_matrix, _load_saved, _probe_cache, _providers
from .options import _cache_dir_opt, _feature_opt, _matrix_opt, _no_cache_opt
from .output import _check_writable, write_report


@main.command()
@_matrix_opt
@click.option("--ep", "eps", help="comma-separated EP aliases (default: all in the matrix; with --observed, "
                                  "the columns of these EPs).")
@_feature_opt
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True)
@click.option("--output", type=click.Path(dir_okay=False), help="write the report here instead of stdout.")
@click.option("--observed", "observed", multiple=True, metavar="GLOB",
              help="saved JSON reports (repeatable; quote globs): per EP and operator what was registered, "
                   "probed, claimed and passed.")
@_cache_dir_opt
@_no_cache_opt
def surface(matrix_path, eps, feature_patterns, fmt, output, observed, cache_dir, no_cache) -> None:
    """Each EP's registered kernels x operator schemas (the surface) and the catalog's coverage of it.

    \b
    Exit codes:
      0  the surface (or the observed support page) was written
      2  usage or matrix error
    A registry query that crashes (the GPU wheel without a GPU) is contained: that EP
    reads as not measured, with the reason.

    \b
    Examples:
      epaudit surface --ep CPU --format markdown
      epaudit surface --observed 'results/*.json' --format markdown --output support.md
    """
    from ..report.surface import FORMATS as SURFACE_FORMATS
    from ..surface.coverage import observed as observed_page
    from ..surface.coverage import survey

    _check_writable(output, "--output")
    if observed:
        reports = _load_saved(observed, "--observed")
        data = observed_page(reports)
        if eps:
            keep = {a.strip() for a in eps.split(",") if a.strip()}
            data["eps"] = {c: v for c, v in data["eps"].items() if c.split("@")[0] in keep}
    else:
        matrix = _load_matrix(matrix_path)
        cache = _probe_cache(cache_dir, no_cache)
        data = survey(_providers(matrix, eps), _features(feature_patterns),
                      cache.directory if cache is not None else None)
    text = SURFACE_FORMATS[(bool(observed), fmt)](data)
    write_report(text, output, f"surface {fmt}")
