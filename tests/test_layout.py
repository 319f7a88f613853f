"""The package's layout stays readable as it grows (docs/internals.md "Layout").

Every rule is read from the source itself (``ast``, lazy imports inside functions included):
no import circle between modules, the stages import one way (each subpackage names in its
docstring what it may import), at most 12 plain modules at the top, no module over 600 lines
without a reason at its top, no folder named ``generated``, and a worker that imports nothing
of epaudit.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

import epaudit

ROOT = Path(epaudit.__file__).resolve().parent
#: Top-level plain modules the package may hold (issue 22): the entry points and helpers.
MAX_TOP_MODULES = 12
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The epaudit modules ``name`` imports (module-level and inside functions)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("epaudit"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("epaudit"))
    out.discard(name)
    return {m for m in out if m in MODULES}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _stage(module: str) -> str:
    """The stage a module belongs to: its subpackage, or ``<name>.py`` at the top."""
    parts = module.split(".")
    if len(parts) == 1:
        return "epaudit"
    if len(parts) == 2 and MODULES[module].name != "__init__.py":
        return parts[1] + ".py"
    return parts[1]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_between_modules():
    assert _cycles(GRAPH) == []


def test_the_cycle_check_can_fail():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _stage_graph() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for m, deps in GRAPH.items():
        for d in deps:
            a, b = _stage(m), _stage(d)
            if a != b:
                out.setdefault(a, set()).add(b)
    return out


def test_stages_import_one_way():
    assert _cycles(_stage_graph()) == []


PACKAGES = sorted(m for m, p in MODULES.items() if p.name == "__init__.py" and m.count(".") == 1)


def _may_import(doc: str) -> set[str] | None:
    m = re.search(r"^May import:(.*?)(?:\.\s*$|\n\s*\n|\nImported by)", doc, re.S | re.M)
    if m is None:
        return None
    text = m.group(1)
    if "nothing of epaudit" in text:
        return set()
    if "every stage" in text:
        return {"*"}
    names = set(re.findall(r"\b([a-z_]+)\b", re.sub(r"\([^)]*\)", "", text)))
    return {n + ".py" if (ROOT / f"{n}.py").exists() else n for n in names} | (
        {"terminal.py", "textenc.py"} if "terminal and textenc" in text else set())


@pytest.mark.parametrize("package", PACKAGES)
def test_each_stage_says_what_it_owns_and_may_import(package):
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text(encoding="utf-8"))) or ""
    allowed = _may_import(doc)
    assert allowed is not None, f"{package}/__init__.py: no 'May import:' line"
    assert "Imported by:" in doc, f"{package}/__init__.py: no 'Imported by:' line"
    if "*" in allowed:
        return
    used = _stage_graph().get(package.split(".")[1], set())
    assert used <= allowed, f"{package} imports {sorted(used - allowed)} beyond what its docstring allows"


def test_at_most_twelve_plain_modules_at_the_top():
    top = sorted(p.name for p in ROOT.glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, top


def test_no_module_over_600_lines_without_a_reason_at_its_top():
    long = []
    for name, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        if text.count("\n") > MAX_LINES:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "kept whole" not in doc.lower():
                long.append(f"{name} ({text.count(chr(10))} lines)")
    assert long == []


def test_no_folder_named_generated():
    assert [p for p in ROOT.rglob("generated") if p.is_dir()] == []


def test_the_worker_imports_nothing_of_epaudit_but_itself():
    """It runs under interpreters where epaudit is not installed (docs/internals.md)."""
    allowed_third_party = {"numpy", "onnxruntime"}
    for name, path in MODULES.items():
        if not name.startswith("epaudit.worker"):
            continue
        assert {d for d in GRAPH[name] if not d.startswith("epaudit.worker")} == set(), name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and not node.level:
                roots = {(node.module or "").split(".")[0]}
            else:
                continue
            assert roots <= set(sys.stdlib_module_names) | allowed_third_party, (name, roots)
