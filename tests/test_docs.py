"""Docs that cannot rot: every ``epaudit …`` command shown in README.md and docs/*.md runs
here, with the exit code and output lines its page declares, and every TOML snippet
parses as a matrix.

The convention (docs/catalog.md "Docs that run"):

* A command is a line of a fenced code block whose info string is ``sh`` (also ``bash``,
  ``shell``), ``console`` or ``text``: in ``sh`` blocks a line starting with ``epaudit`` or
  ``$ epaudit``; in ``console`` and ``text`` blocks only ``$ epaudit`` lines (other lines
  there are output). A line ``pip install . && epaudit check`` counts its ``epaudit`` part;
  other shell lines (``pip``, ``. export.sh``, comments) are context and are not run.
* The first non-blank line after such a block is its declaration, an HTML comment of
  ``key: value`` pairs separated by ``;``: ``exit: N`` (the last command's exit code;
  ``exit: 0, 0, 1`` gives one per command, otherwise earlier commands must exit 0),
  ``expect: "text"`` (repeatable; must occur in the last command's output, whitespace
  runs compared as one space), ``run-with: "--feature gqa.softcap"`` (arguments the test
  adds to every command of the block to keep it fast; the page shows what a user types),
  ``skip: "why"`` (needs something CI does not have: a GPU, a provider environment, the
  network) and ``pending: "why"`` (a strict expected failure: the page documents a change
  that has not landed; it fails once the command behaves as declared, so the marker is
  removed then). A block with a command and no declaration fails.
* A ````toml`` block parses with :func:`epaudit.matrix.core.parse`; one declared
  ``<!-- toml: fragment -->`` is completed first with ``schema_version = 1`` and the
  shipped matrix's EP aliases it does not define itself.

Relative links between the pages must name a file of the repository and, with
``#anchor``, one of its headings.

Commands run in process (click's ``CliRunner``), in a temporary directory holding a copy
of the repository's ``capabilities.toml`` and links to ``examples`` and ``tests``, with no provider
environment variables set (the machine the pages describe: no GPU, no provider
environments) and the test session's probe and conformance-case cache.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from click.testing import CliRunner

from epaudit.cli import main
from epaudit.matrix.load import parse
from epaudit.matrix.model import MatrixError

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SHELL = {"sh", "bash", "shell"}
TRANSCRIPT = {"console", "text"}
KEYS = ("exit", "expect", "run-with", "skip", "pending", "toml")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")
_PAIR = re.compile(r'\s*([a-z][a-z-]*)\s*:\s*("(?:[^"\\]|\\.)*"|[^;]*?)\s*(?:;|$)')
_SHELL_OPERATORS = {"|", "||", ">", ">>", "<", "2>", "2>&1", "&", ";"}
#: Variables that would change what a documented command does on the machine the pages
#: describe (a provider environment, GitHub Actions' annotations and step summary).
_UNSET = ("EPAUDIT_WEBGPU_PYTHON", "EPAUDIT_QNN_PYTHON", "EPAUDIT_OPENVINO_PYTHON",
          "EPAUDIT_INTEGRATION", "GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY")
#: EP aliases a TOML fragment may name without defining them (the shipped matrix's).
_SHIPPED_PROVIDERS = {"CPU": "CPUExecutionProvider", "CUDA": "CUDAExecutionProvider",
                      "WebGPU": "WebGpuExecutionProvider", "QNN": "QNNExecutionProvider",
                      "OpenVINO": "OpenVINOExecutionProvider"}


@dataclass
class Block:
    """One fenced code block of a page and the declaration that follows it."""

    page: Path
    line: int
    lang: str
    text: str
    declared: dict[str, list[str]] | None = None
    commands: list[list[str]] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r'\\(.)', r'\1', value[1:-1])
    return value


def parse_declaration(line: str) -> dict[str, list[str]] | None:
    """``<!-- exit: 3; expect: "x" -->`` -> ``{"exit": ["3"], "expect": ["x"]}``; ``None``
    for a comment that declares nothing (``<!-- issue-12 -->``).

    Raises:
        ValueError: a known key with a malformed value, or an unknown key beside known ones.
    """
    m = re.fullmatch(r"\s*<!--(.*)-->\s*", line)
    if not m:
        return None
    body = m.group(1).strip()
    if not re.match(rf"({'|'.join(KEYS)})\s*:", body):
        return None
    out: dict[str, list[str]] = {}
    pos = 0
    while pos < len(body):
        pm = _PAIR.match(body, pos)
        if not pm or pm.end() == pos:
            raise ValueError(f"cannot read the declaration at {body[pos:]!r}")
        key, value = pm.group(1), _unquote(pm.group(2))
        if key not in KEYS:
            raise ValueError(f"unknown key {key!r}; known: {', '.join(KEYS)}")
        out.setdefault(key, []).append(value)
        pos = pm.end()
    return out


def _commands(lang: str, text: str) -> list[list[str]]:
    """The ``epaudit`` commands of a block's text, as argument lists (without ``epaudit``)."""
    lines, joined = [], ""
    for raw in text.splitlines():
        joined += raw.rstrip()
        if joined.endswith("\\"):
            joined = joined[:-1] + " "
            continue
        lines.append(joined.strip())
        joined = ""
    out = []
    for line in lines:
        if line.startswith("$ "):
            line = line[2:].lstrip()
        elif lang not in SHELL:
            continue
        for part in line.split("&&"):
            words = shlex.split(part, comments=True)
            if words[:1] == ["epaudit"]:
                bad = _SHELL_OPERATORS.intersection(words)
                if bad:
                    raise ValueError(f"{line!r}: shell operator {sorted(bad)[0]!r}: write one command a line")
                out.append(words[1:])
    return out


def blocks(page: Path) -> list[Block]:
    """Every fenced code block of ``page`` with its declaration, if any."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(1), m.group(2).lower(), i + 1
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith(fence):
            j += 1
        block = Block(page, start, lang, "\n".join(lines[i + 1:j]) + "\n")
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        if k < len(lines) and lines[k].lstrip().startswith("<!--"):
            comment = lines[k]
            while "-->" not in comment and k + 1 < len(lines):
                k += 1
                comment += " " + lines[k].strip()
            block.declared = parse_declaration(comment)
        if lang in SHELL | TRANSCRIPT:
            block.commands = _commands(lang, block.text)
        out.append(block)
        i = j + 1
    return out


ALL = [b for p in PAGES for b in blocks(p)]
RUNNABLE = [b for b in ALL if b.commands]
TOML = [b for b in ALL if b.lang == "toml"]


def _normal(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------- the convention itself
def test_declarations_are_read_as_documented():
    assert parse_declaration('<!-- exit: 3; expect: "verdict: INCOMPLETE"; expect: "a; b" -->') == {
        "exit": ["3"], "expect": ["verdict: INCOMPLETE", "a; b"]}
    assert parse_declaration("<!-- issue-12 -->") is None
    assert parse_declaration('<!-- skip: "needs a GPU" -->') == {"skip": ["needs a GPU"]}
    with pytest.raises(ValueError, match="unknown key 'exits'"):
        parse_declaration("<!-- exit: 0; exits: 1 -->")


def test_commands_are_found_as_documented():
    assert _commands("sh", "pip install . && epaudit check\n# epaudit nothing\n") == [["check"]]
    assert _commands("sh", "epaudit check \\\n  --ep CPU   # a comment\n") == [["check", "--ep", "CPU"]]
    assert _commands("text", "epaudit 0.1.0: 60 feature(s)\n$ epaudit features\n") == [["features"]]
    assert _commands("console", "$ epaudit diff a.json b.json\nepaudit: error: x\n") == [["diff", "a.json", "b.json"]]
    with pytest.raises(ValueError, match="shell operator"):
        _commands("sh", "epaudit check | tee out.txt\n")


def test_the_pages_show_commands_and_the_index_lists_every_page():
    assert len(RUNNABLE) >= 10 and len(TOML) >= 3, "the convention finds the documented commands"
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        if page.name != "index.md":
            assert f"({page.name})" in index, f"docs/index.md does not link {page.name}"


# --------------------------------------------------------------------------- the commands
@pytest.fixture
def docs_cwd(tmp_path, monkeypatch, cache_dir):
    """A scratch directory that looks like a clone: a copy of ``capabilities.toml`` (``bless``
    may rewrite it) and links to the folders commands read."""
    shutil.copyfile(ROOT / "capabilities.toml", tmp_path / "capabilities.toml")
    for name in ("examples", "tests"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    for var in _UNSET:
        monkeypatch.delenv(var, raising=False)
    # The session's cache: probes and generated conformance cases are built once.
    monkeypatch.setenv("EPAUDIT_CACHE_DIR", str(cache_dir))
    return tmp_path


def _run_block(block: Block) -> None:
    declared = block.declared
    if declared is None:
        pytest.fail(f"{block.where}: a command without a declaration: add "
                    f'<!-- exit: N; expect: "a key line" --> after the block (or skip: "why")')
    for key in ("skip", "pending", "run-with"):
        if len(declared.get(key, [])) > 1:
            pytest.fail(f"{block.where}: {key!r} given twice")
    extra = shlex.split(declared.get("run-with", [""])[0])
    exits = [int(x) for x in ",".join(declared.get("exit", [])).split(",") if x.strip()]
    if not exits:
        pytest.fail(f"{block.where}: the declaration gives no exit code (exit: N)")
    if len(exits) == 1:
        exits = [0] * (len(block.commands) - 1) + exits
    if len(exits) != len(block.commands):
        pytest.fail(f"{block.where}: {len(exits)} exit codes for {len(block.commands)} commands")
    runner = CliRunner()
    for argv, want in zip(block.commands, exits):
        result = runner.invoke(main, argv + extra, catch_exceptions=True)
        shown = "epaudit " + shlex.join(argv + extra)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise AssertionError(f"{block.where}: `{shown}` raised") from result.exception
        assert result.exit_code == want, (f"{block.where}: `{shown}` exited {result.exit_code}, "
                                          f"the page says {want}:\n{result.output[-3000:]}")
    output = _normal(result.output)
    for text in declared.get("expect", []):
        assert _normal(text) in output, (f"{block.where}: `{shown}` did not print {text!r}:\n"
                                         f"{result.output[-3000:]}")


def _params():
    out = []
    for b in RUNNABLE:
        marks = []
        declared = b.declared or {}
        if "skip" in declared:
            marks.append(pytest.mark.skip(reason=f"{b.where}: {declared['skip'][0]}"))
        elif "pending" in declared:
            marks.append(pytest.mark.xfail(reason=f"{b.where}: {declared['pending'][0]}", strict=True))
        out.append(pytest.param(b, id=b.where, marks=marks))
    return out


@pytest.mark.parametrize("block", _params())
def test_documented_command(block, docs_cwd):
    _run_block(block)


# --------------------------------------------------------------------------- TOML snippets
def _completed(text: str) -> str:
    """A fragment made a whole matrix: ``schema_version`` first, missing EP aliases last."""
    from epaudit.matrix.load import tomllib

    data = tomllib.loads(text)
    head = "" if "schema_version" in data else "schema_version = 1\n"
    defined = set(data.get("providers", {}))
    tail = "".join(f'\n[providers.{alias}]\nname = "{name}"\n'
                   for alias, name in _SHIPPED_PROVIDERS.items() if alias not in defined)
    return head + text + tail


@pytest.mark.parametrize("block", [pytest.param(b, id=b.where) for b in TOML])
def test_toml_snippet_parses_as_a_matrix(block):
    declared = block.declared or {}
    fragment = declared.get("toml") == ["fragment"]
    if declared and not fragment:
        pytest.fail(f"{block.where}: a TOML block takes only <!-- toml: fragment -->, got {declared}")
    text = _completed(block.text) if fragment else block.text
    try:
        parse(text, block.where, environ={})
    except MatrixError as exc:
        pytest.fail(f"{block.where}: does not parse as a matrix{' (fragment)' if fragment else ''}: {exc}")


def test_a_toml_snippet_that_is_not_a_matrix_fails():
    """The check can fail: a typo in a feature id is caught, fragment or not."""
    bad = '[features."gqa.sofcap"]\nCPU = "supported"\n'
    with pytest.raises(MatrixError, match="did you mean 'gqa.softcap'"):
        parse(_completed(bad), "doc", environ={})


# --------------------------------------------------------------------------- links between pages
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"\s", "-", re.sub(r"[^\w\- ]", "", text))


def _prose(page: Path) -> list[tuple[int, str]]:
    """(line number, line) of ``page`` outside fenced code blocks."""
    out, fence = [], None
    for no, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        m = _FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and line.strip().startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
        elif fence is None:
            out.append((no, line))
    return out


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    for _, line in _prose(page):
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            if n:
                seen[f"{slug}-{n}"] = 1
    return set(seen)


@pytest.mark.parametrize("page", [pytest.param(p, id=str(p.relative_to(ROOT))) for p in PAGES])
def test_links_between_pages_resolve(page):
    """Every relative link names a file of the repository and, with ``#anchor``, one of its
    headings. A docs page another piece of work adds (linked from the index before it lands)
    is reported as a skip, never as a pass of its link."""
    broken, absent = [], []
    for no, line in _prose(page):
        for target in _LINK.findall(line):
            if re.match(r"[a-z]+:", target) or target.startswith("#") and not target[1:]:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                (absent if dest.parent == ROOT / "docs" and dest.suffix == ".md" else broken).append(
                    f"{page.name}:{no}: {target}")
                continue
            if anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{page.name}:{no}: {target}: no heading with anchor #{anchor}")
    assert not broken, "\n".join(broken)
    if absent:
        pytest.skip("docs pages linked but not in this checkout: " + ", ".join(absent))


def test_the_link_check_can_fail():
    assert _slug("### `[providers.ALIAS]`".lstrip("# ")) == "providersalias"
    assert _slug("Over time: `diff` and `bless`") == "over-time-diff-and-bless"
