"""Matrix declarations for one EP's loud non-passes on the generated catalog, by glob.

    python tools/declare_generated.py RUN.json [RUN.json]... --ep WebGPU --link URL [--ep QNN --link URL]...

Reads saved ``epaudit check --format json`` runs (one per EP, or one with several) and prints ``[features."<glob>"]``
tables (TOML, to paste at the end of ``capabilities.toml``) that declare, for each EP
given, every generated probe (``onnx.*``) the EP refused loudly (``REJECTED``,
``FALLBACK``, ``DECOMPOSED``) as a governed gap: ``status = "unsupported"``, the
``--link`` that documents what the EP registers (its kernel registrations or supported
operator list), ``until``, and a reason with the outcomes counted in that run.

Grouping, so the matrix stays small and a gap that starts to pass reads *stale*:
an operator whose generated probes all refused loudly -> ``onnx.<Op>.*``; otherwise
each opset stamp whose probes all did -> ``onnx.<Op>.*.opset<N>``; otherwise the exact
ids. The same key for several EPs is one table. ``--replace`` (with ``--into``) first removes
every cell this tool wrote for those EPs (their reason says "<EP> (onnxruntime …) in the
measured run"), so a re-run declares what the new run saw: gaps that now pass stop being
declared instead of reading stale, and new gaps appear. Silent outcomes (``IGNORED``, ``NAN``,
``MISMATCH``, ``CRASH``, ...) are never declared here: they are findings, triaged by
hand (docs/generated-catalog.md). PASS cells are covered by ``[features."onnx.*"]``
(declare the EP ``"supported"`` there). Exact ids the matrix already declares for the
EP are left out (an exact key wins over any glob).
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys

LOUD = ("REJECTED", "FALLBACK", "DECOMPOSED")
_OPSET = re.compile(r"\.opset(\d+)$")


def groups(results: list[dict], ep: str) -> dict[str, collections.Counter]:
    """Glob or id -> outcome counts, for ``ep``'s loud generated non-passes among base
    probes (type variants, ``<base>.<type>``, are :func:`variant_cells`'s: they take their
    base's cell unless a key names them). An operator glob counts the variants too: it
    matches them."""
    by_op: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
    for r in results:
        fid = r["feature"]
        if r["ep"] == ep and fid.startswith("onnx.") and r["outcome"] != "SKIPPED":
            by_op[fid.split(".")[1]].append((fid, r["outcome"]))
    out: dict[str, collections.Counter] = {}
    for op, rows in sorted(by_op.items()):
        loud = [(f, o) for f, o in rows if o in LOUD]
        if not loud:
            continue
        if len(loud) == len(rows):
            out[f"onnx.{op}.*"] = collections.Counter(o for _, o in loud)
            continue
        by_stamp: dict[str, list[tuple[str, str]]] = collections.defaultdict(list)
        for f, o in rows:
            stamp = _OPSET.search(f)
            if stamp is not None:  # a base probe; variants end with their type
                by_stamp[stamp.group(1)].append((f, o))
        for stamp, srows in sorted(by_stamp.items(), key=lambda kv: int(kv[0])):
            sloud = [(f, o) for f, o in srows if o in LOUD]
            if sloud and len(sloud) == len(srows):
                out[f"onnx.{op}.*.opset{stamp}"] = collections.Counter(o for _, o in sloud)
            else:
                for f, o in sloud:
                    out[f] = collections.Counter([o])
    return out


def _wanted(outcome: str) -> str | None:
    """The status a measured outcome asks of its cell: loud -> unsupported, PASS ->
    supported; anything else (silent, process failures, SKIPPED) asks nothing here."""
    return "unsupported" if outcome in LOUD else "supported" if outcome == "PASS" else None


def variant_cells(results: list[dict], ep: str, resolve) -> dict[str, tuple[str, collections.Counter]]:
    """Keys for ``ep``'s type variants whose resolved cell is not what the run measured.

    A variant (``<base>.<type>``) takes its base's cell unless a key naming it is at least
    as specific (docs/matrix-globs-and-large-reports.md "Type variants"), so what it needs
    depends on the whole matrix: ``resolve(extra)`` parses the matrix with ``extra`` (key ->
    (status, counts)) added and returns a mapping id -> status for ``ep`` (``None`` where
    undeclared). A variant measured loud needs ``unsupported``, one that passed needs
    ``supported`` (its base may be a declared gap: the type runs where the base's does
    not). Per operator and type, one glob ``onnx.<Op>.*.<type>`` when every variant there
    that asks anything wants the same status and the glob decides some of them (an exact
    base key decides its variants over any glob); exact ids for the rest. Returns
    key -> (status, outcome counts)."""
    from epaudit.contract.probes import type_variant_of

    rows = [r for r in results if r["ep"] == ep and r["feature"].startswith("onnx.")
            and type_variant_of(r["feature"]) is not None]
    want = {r["feature"]: (_wanted(r["outcome"]), r["outcome"]) for r in rows}

    def off(f: str, got: dict) -> bool:
        # undeclared passes are [features."onnx.*"]'s to declare, as for base probes
        w = want[f][0]
        return w is not None and f in got and got[f] != w and not (got[f] is None and w == "supported")

    def wrong(got: dict) -> list[str]:
        return [f for f in want if off(f, got)]

    extra: dict[str, tuple[str, collections.Counter]] = {}
    first = resolve(extra)
    skipped = {f for f in want if first.get(f) == "skip"}  # declared by hand: stays so
    bad = wrong(first)
    by_group: dict[tuple[str, str], list[str]] = collections.defaultdict(list)
    for f in want:
        by_group[(f.split(".")[1], f.rpartition(".")[2])].append(f)
    bad_set = set(bad)
    for (op, t), fids in sorted(by_group.items()):
        wants = {want[f][0] for f in fids} - {None}  # a silent variant asks nothing
        if not bad_set.intersection(fids) or len(wants) != 1:
            continue
        extra[f"onnx.{op}.*.{t}"] = (wants.pop(), collections.Counter(want[f][1] for f in fids if want[f][0]))
    if extra:
        got = resolve(extra)
        for key in list(extra):
            group = by_group[(key.split(".")[1], key.rpartition(".")[2])]
            if all(off(f, got) for f in group if f in bad_set) or any(got.get(f) != "skip" for f in skipped.intersection(group)):
                del extra[key]  # it decides none of them (exact base keys win), or unskips one: ids instead
    for f in wrong(resolve(extra)):
        extra[f] = (want[f][0], collections.Counter([want[f][1]]))
    left = wrong(resolve(extra))
    if left:  # an exact key decides its id: nothing else can be wrong
        raise AssertionError(f"variant cells still not as measured: {left[:5]}")
    return extra


#: What each loud outcome means, for the reason text.
_SAYS = {"FALLBACK": "placed on CPU", "REJECTED": "refused", "DECOMPOSED": "function body inlined",
         "PASS": "runs in this type"}


def _reason(ep: str, version: str, counts: collections.Counter) -> str:
    said = ", ".join(f"{o} {n} ({_SAYS[o]})" for o, n in sorted(counts.items()))
    return f"{ep} (onnxruntime {version}) in the measured run: {said}"


def merge(path: str, tables: dict[str, dict[str, str]], header: str = "") -> int:
    """Add ``tables`` (key -> EP -> inline-table text) to the matrix at ``path`` as text,
    so every comment and blank line stays where it is: a cell the file already declares
    for that key and EP is left alone; a key the file has (``[features."KEY"]`` on a line
    of its own) gets the new cells on the lines after its header; new keys are appended
    at the end, after ``header`` (comment lines). Written atomically (temp file, rename).
    Returns the cells added."""
    import os
    import tempfile
    import tomllib

    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    have = tomllib.loads(text).get("features", {})  # a matrix TOML cannot read: ValueError
    lines = text.splitlines()
    index = {line.strip(): i for i, line in enumerate(lines) if line.startswith("[features.")}
    inserts: dict[int, list[str]] = collections.defaultdict(list)
    tail: list[str] = []
    added = 0
    for key in sorted(tables):
        new = [f"{ep} = {cell}" for ep, cell in tables[key].items() if ep not in have.get(key, {})]
        if not new:
            continue
        added += len(new)
        head = f'[features."{key}"]'
        if key in have and head in index:
            inserts[index[head]] += new
        else:
            tail += ["", head, *new]
    out = []
    for i, line in enumerate(lines):
        out.append(line)
        out += inserts.get(i, [])
    if tail:
        out += [""] + [f"# {h}" if h else "#" for h in header.splitlines()] + tail
    new_text = "\n".join(out) + "\n"
    tomllib.loads(new_text)  # never write a file TOML cannot read (raises ValueError)
    fd, tmp = tempfile.mkstemp(prefix=".matrix-", dir=os.path.dirname(os.path.abspath(path)))
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(new_text)
    os.replace(tmp, path)
    return added


def remove_tool_cells(text: str, eps: list[str]) -> tuple[str, int]:
    """``text`` without the cells this tool wrote for ``eps`` (a line ``EP = { status =
    "unsupported", … reason = "EP (onnxruntime …) in the measured run: …" }`` in a
    ``[features."onnx…"]`` table), and without the tables that leaves empty; comments and
    every other line stay. Returns ``(text, cells removed)``."""
    lines = text.splitlines()
    keep, removed, table = [], 0, None
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            table = stripped
        ep = stripped.split("=", 1)[0].strip() if "=" in stripped else ""
        if (table and table.startswith('[features."onnx.') and ep in eps
                and f'reason = "{ep} (onnxruntime ' in stripped and ") in the measured run: " in stripped):
            removed += 1
            continue
        keep.append(line)
    # Drop tables whose every cell was removed (a header followed only by blanks or the next header).
    out: list[str] = []
    i = 0
    while i < len(keep):
        line = keep[i]
        if line.strip().startswith('[features."onnx.'):
            j = i + 1
            while j < len(keep) and not keep[j].strip():
                j += 1
            if j >= len(keep) or keep[j].strip().startswith("[") or keep[j].lstrip().startswith("#"):
                while out and not out[-1].strip():
                    out.pop()
                i = j
                if out and i < len(keep):
                    out.append("")
                continue
        out.append(line)
        i += 1
    return "\n".join(out) + "\n", removed


def _resolver(base_text: str | None, tables: dict[str, dict[str, str]], ep: str, results: list[dict],
              declared: set) -> object:
    """``resolve(extra)`` for :func:`variant_cells`: the matrix (``base_text``, else a bare
    one naming ``ep``) with ``tables`` and ``extra`` appended, parsed; id -> ``ep``'s status.
    Ids declared by hand for the EP (``declared``) read as what they want: they are left alone."""
    from epaudit.matrix.load import parse

    ids = {r["feature"] for r in results}
    if base_text is None:
        import tomllib

        from epaudit.matrix.load import default_text

        name = tomllib.loads(default_text()).get("providers", {}).get(ep, {}).get("name", f"{ep}ExecutionProvider")
        base_text = f'schema_version = 1\n[providers.{ep}]\nname = "{name}"\n'
    else:
        from epaudit.catalog import BY_ID

        ids |= set(BY_ID)
    have = _keys(base_text)

    def render(key: str, cells: dict[str, str]) -> str:
        return f'[features."{key}"]\n' + "".join(f"{e} = {c}\n" for e, c in cells.items())

    def resolve(extra: dict) -> dict:
        add = {k: dict(v) for k, v in tables.items()}
        for key, (status, _) in extra.items():
            add.setdefault(key, {})[ep] = (f'{{ status = "{status}", issue = "https://example.org/x", '
                                           'until = 2099-01-01 }' if status != "supported" else '"supported"')
        text = base_text
        for key, cells in add.items():
            if key in have:  # the file's own table: its cells stay first, these would be duplicates
                cells = {e: c for e, c in cells.items() if e not in have[key]}
                text = text.replace(f'[features."{key}"]\n', render(key, cells), 1) if cells else text
            else:
                text += "\n" + render(key, cells)
        m = parse(text, "<matrix>", feature_ids=ids, environ={})
        out = {}
        for fid in ids:
            if (fid, ep) in declared:
                continue
            d = m.features.get(fid, {}).get(ep)
            out[fid] = d.status if d is not None else None
        return out

    return resolve


def _keys(text: str) -> dict[str, set]:
    """Feature key -> the EPs it declares, of matrix text."""
    import tomllib

    return {k: set(v) for k, v in tomllib.loads(text).get("features", {}).items()}


def _fail(message: str) -> int:
    """One line on stderr, exit 2 (as every epaudit command does on bad input)."""
    print(f"declare_generated: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    import datetime

    from epaudit.matrix.model import is_issue_link

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", help="saved JSON reports (epaudit check --format json)")
    ap.add_argument("--ep", action="append", required=True, help="matrix alias (repeatable)")
    ap.add_argument("--link", action="append", required=True, help="what documents it, per --ep")
    ap.add_argument("--until", default="2027-06-30", help="review date of the gaps (YYYY-MM-DD)")
    ap.add_argument("--into", metavar="MATRIX", help="add the cells to this matrix file instead of printing")
    ap.add_argument("--header", default="", help="comment lines written above the new tables (--into)")
    ap.add_argument("--replace", action="store_true",
                    help="with --into: first remove the cells this tool wrote for these EPs (a re-run's declarations)")
    args = ap.parse_args(argv)
    if len(args.ep) != len(args.link):
        ap.error("one --link per --ep")
    for link in args.link:
        if not is_issue_link(link):
            return _fail(f"--link {link!r}: not a link the gate accepts (an http(s) URL with a host "
                         "and a path, e.g. https://github.com/microsoft/onnxruntime/issues/26288)")
    try:
        if datetime.date.fromisoformat(args.until) <= datetime.date.today():
            return _fail(f"--until {args.until}: not in the future (the gaps would be expired at once)")
    except ValueError:
        return _fail(f"--until {args.until!r}: not a date like 2027-06-30")
    results, versions = [], {}
    for path in args.runs:
        try:
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            results += doc["results"]
        except OSError as exc:
            return _fail(f"{path}: cannot read: {exc.strerror or exc}")
        except (ValueError, KeyError, TypeError):
            return _fail(f"{path}: not an epaudit JSON report (epaudit check --format json)")
        versions.update({e.get("alias"): e.get("ort_version") or "?" for e in doc.get("eps", [])})
    if args.into:  # a run of an older catalog: its ids this catalog no longer has are no cell of the matrix
        from epaudit.catalog import BY_ID

        ours = {str(r.get("feature")) for r in results if str(r.get("feature")).startswith("onnx.")}
        gone = {f for f in ours if f not in BY_ID}
        if gone and len(gone) < len(ours):  # (none known: a run of another catalog, left whole)
            print(f"# {len(gone)} feature(s) of the run are not in this catalog; left out", file=sys.stderr)
            results = [r for r in results if r.get("feature") in BY_ID]
    seen = {r.get("ep") for r in results}
    for ep in args.ep:
        if ep not in seen:
            return _fail(f"--ep {ep}: no result of that EP in {', '.join(args.runs)} "
                         f"(its EPs: {', '.join(sorted(str(e) for e in seen)) or 'none'})")
    if args.replace and not args.into:
        return _fail("--replace edits a matrix: give it with --into MATRIX")
    removed = 0
    if args.replace:
        import tomllib

        try:
            with open(args.into, encoding="utf-8") as fh:
                text, removed = remove_tool_cells(fh.read(), args.ep)
            have = tomllib.loads(text).get("features", {})
        except (OSError, ValueError) as exc:
            return _fail(f"{args.into}: {exc}")
        # What stays declared by hand for an exact id wins over anything written here.
        declared = {(k, ep) for k, cells in have.items() for ep in cells if "*" not in k and ep in args.ep}
    else:
        declared = {(r["feature"], r["ep"]) for r in results if r.get("declared") not in (None, "undeclared")
                    and not str(r.get("declared", "")).startswith("supported")}
    tables: dict[str, dict[str, str]] = collections.defaultdict(dict)

    def cell(ep: str, link: str, status: str, counts: collections.Counter) -> str:
        reason = json.dumps(_reason(ep, versions.get(ep, "?"), counts))
        if status == "supported":
            return f'{{ status = "supported", reason = {reason} }}'
        return f'{{ status = "unsupported", issue = "{link}", until = {args.until}, reason = {reason} }}'

    for ep, link in zip(args.ep, args.link):
        for key, counts in groups(results, ep).items():
            if (key, ep) in declared:
                continue
            tables[key][ep] = cell(ep, link, "unsupported", counts)
    base_text = text if args.replace else None
    if base_text is None and args.into:
        with open(args.into, encoding="utf-8") as fh:
            base_text = fh.read()
    for ep, link in zip(args.ep, args.link):
        resolve = _resolver(base_text, tables, ep, results, declared)
        try:
            for key, (status, counts) in variant_cells(results, ep, resolve).items():
                tables[key][ep] = cell(ep, link, status, counts)
        except ValueError as exc:  # the matrix with these cells does not parse
            return _fail(f"{args.into or 'the declared tables'}: {exc}")
    cells = sum(len(t) for t in tables.values())
    if not cells:
        print(f"# nothing to declare: no generated probe was REJECTED, FALLBACK or DECOMPOSED on "
              f"{', '.join(args.ep)} (or those cells are already declared)", file=sys.stderr)
        return 0
    if args.into:
        try:
            if args.replace:
                import os
                import tempfile

                fd, tmp = tempfile.mkstemp(prefix=".matrix-", dir=os.path.dirname(os.path.abspath(args.into)))
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(text)
                try:
                    added = merge(tmp, tables, args.header)
                    os.replace(tmp, args.into)
                finally:
                    if os.path.exists(tmp):
                        os.unlink(tmp)
            else:
                added = merge(args.into, tables, args.header)
        except (OSError, ValueError) as exc:
            return _fail(f"{args.into}: {exc}")
        print(f"{removed} cell(s) removed, {added} cell(s) added to {args.into}" if args.replace
              else f"{added} cell(s) added to {args.into}", file=sys.stderr)
        return 0
    for key in sorted(tables):
        print(f'\n[features."{key}"]')
        for ep, cell in tables[key].items():
            print(f"{ep} = {cell}")
    print(f"# {len(tables)} table(s), {cells} cell(s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
