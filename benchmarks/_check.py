"""``epaudit check`` with the catalog replicated (run by floor_vs_check.py).

``python _check.py REPLICATE RSS_FILE -- <epaudit args>``: with ``REPLICATE`` > 1 every
feature of the catalog appears that many times under synthetic ids (``gqa.prompt.r2``,
...), each building the same probe and declared like its original in the embedded
matrix; then the real CLI runs. At exit the parent's own
peak RSS (``ru_maxrss`` of RUSAGE_SELF, KiB) and that of its largest worker
(RUSAGE_CHILDREN) are written to ``RSS_FILE``.
"""

import atexit
import dataclasses
import re
import resource
import sys


def _replicate(k: int) -> None:
    from epaudit import catalog

    def renamed(f, new_id):
        return dataclasses.replace(
            f, id=new_id, build=lambda f=f: dataclasses.replace(f.build(), feature_id=new_id))

    feats = list(catalog.FEATURES)
    for r in range(2, k + 1):
        feats += [renamed(f, f"{f.id}.r{r}") for f in catalog.FEATURES]
    catalog.FEATURES = tuple(feats)
    catalog.BY_ID = {f.id: f for f in feats}

    # Declare the replicas as their originals are, so the report is the same per row
    # (an undeclared cell would add a warning line each).
    from epaudit import matrix

    text = matrix.default_text()
    blocks = re.findall(r'^\[features\."([^"]+)"\]\n((?:(?!\[).*\n?)*)', text, flags=re.M)
    extra = "".join(f'\n[features."{fid}.r{r}"]\n{body}' for r in range(2, k + 1) for fid, body in blocks)
    matrix.default_text = lambda: text + extra


def _record(path: str) -> None:
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(path, "w") as fh:
        fh.write(f"{me} {kids}\n")


def main() -> None:
    k, rss_file, sep, *args = sys.argv[1:]
    assert sep == "--"
    if int(k) > 1:
        _replicate(int(k))
    atexit.register(_record, rss_file)
    from epaudit.cli import main as cli

    cli(args, prog_name="epaudit")


if __name__ == "__main__":
    main()
