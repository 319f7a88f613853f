"""Bad input never breaks the gate: a property-based fuzzer over matrix files (hypothesis).

Random TOML documents built from the matrix's own vocabulary, random text and bytes, and
random mutations of the shipped ``capabilities.toml`` (lines deleted, duplicated,
swapped, values replaced, text inserted, file truncated) either load or raise
:class:`MatrixError` with one line naming the file; nothing else escapes. Through the
CLI the same inputs give exit 0, 1, 2 or 3 (3: a mutation may require an EP that is not
live here), a one-line ``epaudit: error: …`` on exit 2, and never a traceback.

Saved results files (``check --results``) are fuzzed in ``test_fuzz_results.py``.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import subprocess
import sys
import tempfile

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epaudit.cli import main
from epaudit.matrix.load import default_text, load, parse
from epaudit.matrix.model import Matrix, MatrixError

SHIPPED = default_text()
SHIPPED_LINES = SHIPPED.splitlines(keepends=True)
FAST = settings(max_examples=int(os.environ.get("EPAUDIT_FUZZ_EXAMPLES", "100")), deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------- a tiny TOML writer
KEYS = ["schema_version", "gate", "providers", "features", "reference", "gated", "require",
        "parity", "name", "options", "python", "env", "inject_fault", "status", "issue", "until",
        "reason", "CPU", "CUDA", "WebGPU", "gqa.softcap", "gqa.sofcap", "attention.basic", "1x",
        "", "a b", "é", "\n", "\"", "[x]", "\u2028", "\x1c", "x\ty"]
keys = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))


def basic(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters escaped."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def key(k: str) -> str:
    return basic(k)  # a TOML basic string is a valid quoted key


def literal(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, str)):
        return str(v) if isinstance(v, int) else basic(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, (dt.date, dt.datetime, dt.time)):
        return v.isoformat()
    if isinstance(v, list):
        return "[" + ", ".join(literal(x) for x in v) + "]"
    return "{ " + ", ".join(f"{key(k)} = {literal(x)}" for k, x in v.items()) + " }"


def document(d: dict) -> str:
    """Top-level scalars, then ``[table]`` sections (one level), as TOML text."""
    lines, tables = [], []
    for k, v in d.items():
        (tables if isinstance(v, dict) else lines).append((k, v))
    out = [f"{key(k)} = {literal(v)}" for k, v in lines]
    for k, v in tables:
        out.append(f"[{key(k)}]")
        out += [f"{key(k2)} = {literal(v2)}" for k2, v2 in v.items()]
    return "\n".join(out) + "\n"


scalars = st.one_of(
    st.integers(-3, 3), st.sampled_from([1, 2**63 - 1]), st.booleans(), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["supported", "unsupported", "skip", "any", "all", "CPUExecutionProvider",
                                            "$EPAUDIT_WEBGPU_PYTHON", "$", "$1bad", "kill", "hang"]),
    st.dates(), st.datetimes(), st.times())
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(keys, inner, max_size=4)), max_leaves=12)
documents = st.dictionaries(keys, values, max_size=6).map(
    lambda d: {"schema_version": 1, **d} if "schema_version" not in d else d)


def maybe(valid):
    """Mostly the valid value, sometimes anything at all."""
    return st.one_of(valid, valid, valid, values)


aliases = st.sampled_from(["CPU", "CUDA", "WebGPU", "X"])
cells = st.one_of(st.just("supported"), st.fixed_dictionaries(
    {"status": maybe(st.sampled_from(["unsupported", "skip", "supported"]))},
    optional={"issue": maybe(st.just("https://github.com/x/y/issues/1")),
              "until": maybe(st.dates()), "reason": maybe(st.text(max_size=8)),
              "owner": values}))
providers = st.fixed_dictionaries(
    {"name": maybe(st.sampled_from(["CPUExecutionProvider", "CUDAExecutionProvider"]))},
    optional={"options": maybe(st.dictionaries(keys, scalars, max_size=2)),
              "python": maybe(st.sampled_from(["$EPAUDIT_WEBGPU_PYTHON", "$UNSET_VAR", "/x/python", ""])),
              "env": maybe(st.dictionaries(keys, st.text(max_size=5), max_size=2)),
              "inject_fault": maybe(st.sampled_from(["kill", "nan", "explode"]))})
near_valid = st.fixed_dictionaries(
    {"schema_version": maybe(st.just(1))},
    optional={"gate": maybe(st.fixed_dictionaries({}, optional={
                  "reference": maybe(st.lists(aliases, max_size=2)), "gated": maybe(st.lists(aliases, max_size=2)),
                  "require": maybe(st.lists(aliases, max_size=2)), "parity": maybe(st.sampled_from(["any", "all"]))})),
              "providers": maybe(st.dictionaries(st.one_of(aliases, keys), providers, max_size=3)),
              "features": maybe(st.dictionaries(
                  st.sampled_from(["gqa.softcap", "attention.basic", "gqa.sofcap"]) | keys,
                  maybe(st.dictionaries(st.one_of(aliases, keys), cells, max_size=3)), max_size=3))})


def nested(d: dict) -> str:
    """Any depth of tables as dotted ``[a."b".c]`` sections (what the matrix uses)."""
    out = []

    def walk(prefix, table):
        scal = [(k, v) for k, v in table.items() if not isinstance(v, dict)]
        subs = [(k, v) for k, v in table.items() if isinstance(v, dict)]
        if prefix:
            out.append("[" + ".".join(key(p) for p in prefix) + "]")
        out.extend(f"{key(k)} = {literal(v)}" for k, v in scal)
        for k, v in subs:
            walk(prefix + (k,), v)

    walk((), d)
    return "\n".join(out) + "\n"


def check_parse(text: str) -> Matrix | None:
    """``parse`` loads ``text`` or raises a one-line MatrixError naming the file; nothing else."""
    try:
        return parse(text, "fuzz.toml", environ={"EPAUDIT_WEBGPU_PYTHON": "/usr/bin/false"})
    except MatrixError as exc:
        msg = str(exc)
        assert msg.startswith("fuzz.toml"), msg
        assert len(msg.splitlines()) == 1, msg
        return None


@FAST
@given(documents)
def test_random_toml_documents_load_or_fail_in_one_line(doc):
    check_parse(document(doc))


@FAST
@given(near_valid)
def test_near_valid_matrices_load_or_fail_in_one_line(doc):
    check_parse(nested(doc))


@FAST
@given(st.text(max_size=300))
def test_random_text_loads_or_fails_in_one_line(text):
    check_parse(text)


# ---------------------------------------------------------------- mutations of the shipped matrix
def _replace_value(ls, i, v):
    line = ls[i]
    if "=" not in line:
        return ls
    return ls[:i] + [line.split("=", 1)[0] + "= " + literal(v) + "\n"] + ls[i + 1:]


def _at(op):
    """Apply ``op(lines, i, *args)`` with ``i`` folded into the current length (lines come and go)."""
    return lambda t: lambda ls: op(ls, t[0] % len(ls), *t[1:]) if ls else ls


index = st.integers(0, len(SHIPPED_LINES) - 1)
mutation = st.one_of(
    st.tuples(index).map(_at(lambda ls, i: ls[:i] + ls[i + 1:])),                       # delete
    st.tuples(index).map(_at(lambda ls, i: ls[:i + 1] + ls[i:])),                       # duplicate
    st.tuples(index, index).map(_at(lambda ls, i, j: [ls[j % len(ls)] if k == i else ls[i] if k == j % len(ls)
                                                      else x for k, x in enumerate(ls)])),  # swap
    st.tuples(index, values).map(_at(_replace_value)),                                  # new value
    st.tuples(index, st.text(max_size=20)).map(_at(lambda ls, i, t: ls[:i] + [t + "\n"] + ls[i:])),  # new line
    st.tuples(index, st.integers(0, 200), st.text(min_size=1, max_size=5)).map(          # insert text
        _at(lambda ls, i, at, t: ls[:i] + [ls[i][:at] + t + ls[i][at:]] + ls[i + 1:])),
)


def mutate(steps) -> str:
    lines = list(SHIPPED_LINES)
    for step in steps:
        lines = step(lines)
    return "".join(lines)


@FAST
@given(st.lists(mutation, min_size=1, max_size=4), st.one_of(st.none(), st.integers(0, len(SHIPPED))))
def test_mutated_shipped_matrix_loads_or_fails_in_one_line(steps, cut):
    text = mutate(steps)
    check_parse(text if cut is None else text[:cut])


def test_the_shipped_matrix_itself_loads():
    assert check_parse(SHIPPED) is not None


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_in_a_file(data):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.toml")
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            load(path)
        except MatrixError as exc:
            assert str(exc).startswith(path) and len(str(exc).splitlines()) == 1


def test_huge_and_deeply_nested_input():
    for text in ["a = " + "[" * 100_000 + "]" * 100_000, "x = 1\n" * 200_000,
                 "a = " + "{ b = " * 5_000 + "1" + " }" * 5_000,
                 SHIPPED + "\n" + '[features."gqa.softcap"]\n' * 10_000]:
        check_parse(text)


# ---------------------------------------------------------------- through the CLI
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=3))
def test_cli_exit_2_on_a_bad_matrix_is_one_line(steps):
    """In process (fast): a bad matrix is exit 2 with one line; a good one reaches the
    ``--ep`` check, which fails the same way (no probe runs either way)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.toml")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(mutate(steps))
        r = CliRunner().invoke(main, ["check", "--matrix", path, "--ep", "NO_SUCH_EP"])
    assert r.exit_code == 2, r.output
    assert isinstance(r.exception, SystemExit), r.exc_info
    lines = r.output.rstrip("\n").splitlines()
    assert len(lines) == 1 and lines[0].startswith("epaudit: error: ") and "Traceback" not in r.output


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(mutation, min_size=1, max_size=2))
def test_cli_subprocess_on_mutated_matrices(steps):
    """The real command, a real process: exit 0-3, never a traceback, one line on exit 2."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.toml")
        with open(path, "w", encoding="utf-8", errors="surrogatepass") as fh:
            fh.write(mutate(steps))
        proc = subprocess.run([sys.executable, "-m", "epaudit", "check", "--matrix", path,
                               "--feature", "gqa.softcap", "--timeout", "10"],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, EPAUDIT_WEBGPU_PYTHON="/nonexistent/python"))
    assert proc.returncode in (0, 1, 2, 3), proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-1500:]
    if proc.returncode == 2:
        assert proc.stdout == ""
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"epaudit: error: {path}")
