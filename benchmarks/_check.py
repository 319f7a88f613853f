"""``epaudit check`` with the catalog replicated (run by floor_vs_check.py).

``python _check.py REPLICATE RSS_FILE -- <epaudit args>``: with ``REPLICATE`` > 1 every
feature of the catalog appears that many times under synthetic ids (``gqa.prompt.r2``,
...), each the same probe as its original, a catalog member as its original is (built on
a scale's first run, then read from the probe cache), and declared like it in the
embedded matrix; then the real CLI runs as the console script runs it
(``epaudit.launch``: workers prestarted first, the quick exit at the end). At exit the parent's own
peak RSS (``ru_maxrss`` of RUSAGE_SELF, KiB) and that of its largest worker are written to
``RSS_FILE``. A worker's peak is its ``VmHWM`` in ``/proc/<pid>/status``, sampled every 0.5 s
while it runs: RUSAGE_CHILDREN's ``ru_maxrss`` is no measure of it, since Linux hands a
``posix_spawn``ed (vfork) child the high-water mark of the parent's memory at its exec (a
``python -c pass`` started that way from a 313 MiB parent reports 313 MiB, measured), so it
read the parent's size as the worker's (330 MiB beside the parent's 335 at 16x).
"""

import atexit
import dataclasses
import json
import os
import resource
import sys
import threading
import time

#: pid -> the largest VmHWM (KiB) seen of each child process.
_PEAKS: dict[int, int] = {}


def _children() -> list[int]:
    me = str(os.getpid())
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == me:
                out.append(int(name))
    return out


def _sample_workers() -> None:
    while True:
        for pid in _children():
            try:
                with open(f"/proc/{pid}/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            _PEAKS[pid] = max(_PEAKS.get(pid, 0), int(line.split()[1]))
            except OSError:
                pass
        time.sleep(0.5)


def _replicate(k: int) -> None:
    from epaudit import catalog

    # A replica is its original's probe under another id, and a member of the catalog as
    # its original is (shipped): the first run at a scale builds it and writes it to the
    # probe cache, every later run reads it from there, exactly as for the original. So
    # the timed runs (after a warm-up run per scale, in a probe cache of that scale's
    # own) compare a warm catalog of k times the size with a warm catalog, as the floor
    # compares k times the sessions.
    def renamed(f, new_id):
        def build(f=f):
            return dataclasses.replace(f.build(), feature_id=new_id)
        return dataclasses.replace(f, id=new_id, build=build)

    originals = list(catalog.FEATURES)
    feats = list(originals)
    for r in range(2, k + 1):
        feats += [renamed(f, f"{f.id}.r{r}") for f in originals]
    catalog.FEATURES = tuple(feats)
    catalog.BY_ID = {f.id: f for f in feats}
    catalog._SHIPPED = frozenset(id(f) for f in feats)

    # Declare each replica as its original is *after resolution*: the original's cell may
    # come from a glob with a tail (``onnx.Abs.*.int32``) or, for a type variant
    # (``<base>.<type>``), from its base's cell (the matrix's inheritance rule,
    # docs/matrix-globs-and-large-reports.md), and neither reaches ``<id>.r2``. So every
    # replica gets an exact key holding its original's resolved cells: the run at k x
    # probes exactly k times the cells the run at 1 x probes, and exits as it does.
    # Computed once per scale (the untimed warm-up run) and read back from
    # ``$EPAUDIT_BENCH_REPLICAS/matrix-x<k>.toml`` by the timed runs.
    from epaudit.matrix import load as matrix

    text = matrix.default_text()
    folder = os.environ.get("EPAUDIT_BENCH_REPLICAS")
    saved = os.path.join(folder, f"matrix-x{k}.toml") if folder else None
    if saved and os.path.isfile(saved):
        with open(saved, encoding="utf-8") as fh:
            full = fh.read()
    else:
        full = text + _replica_cells(matrix.parse(text, feature_ids=[f.id for f in originals]), originals, k)
        if saved:
            with open(saved, "w", encoding="utf-8") as fh:
                fh.write(full)
    matrix.default_text = lambda: full


def _toml_string(s: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's for these characters)."""
    return json.dumps(s, ensure_ascii=False)


def _replica_cells(m, originals, k: int) -> str:
    """``[features."<id>.r<r>"]`` tables, r = 2..k, each with the resolved cells of ``<id>``."""
    out = []
    for f in originals:
        cells = m.features.get(f.id)
        if not cells:
            continue
        body = []
        for alias, d in cells.items():
            parts = [f"status = {_toml_string(d.status)}"]
            if d.issue:
                parts.append(f"issue = {_toml_string(d.issue)}")
            if d.until is not None:
                parts.append(f"until = {d.until.isoformat()}")
            if d.reason:
                parts.append(f"reason = {_toml_string(d.reason)}")
            body.append(f"{_toml_string(alias)} = {{ {', '.join(parts)} }}\n")
        for r in range(2, k + 1):
            out.append(f"\n[features.{_toml_string(f'{f.id}.r{r}')}]\n" + "".join(body))
    return "".join(out)


def _record(path: str) -> None:
    me = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = max(_PEAKS.values(), default=0)
    with open(path, "w") as fh:
        fh.write(f"{me} {kids}\n")


def main() -> None:
    k, rss_file, sep, *args = sys.argv[1:]
    assert sep == "--"
    from epaudit.launch import workers_wanted
    from epaudit.run import spawn

    threading.Thread(target=_sample_workers, name="rss-sampler", daemon=True).start()
    for _ in range(workers_wanted(args)):
        spawn.prestart()  # first, as the console script does
    if int(k) > 1:
        _replicate(int(k))
    atexit.register(_record, rss_file)
    from epaudit.cli import main as cli
    from epaudit.launch import _exit_status, _leave

    try:
        cli(args, prog_name="epaudit")
        status = 0
    except SystemExit as exc:
        status = _exit_status(exc.code)
    _leave(status)  # the console script's quick exit (atexit handlers run)


if __name__ == "__main__":
    main()
