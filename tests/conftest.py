"""Shared helpers: tiny matrices with deliberately broken EP variants of the CPU EP."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import textwrap

import pytest

# The generated catalog (~2 500 probes, built once per cache directory) is left out of the
# suite's catalog unless the run asks for it (EPAUDIT_GENERATED=1); tests/test_generated.py
# builds and runs its own subset (docs/generated-catalog.md).
os.environ.setdefault("EPAUDIT_GENERATED", "0")

from epaudit.matrix.load import parse  # noqa: E402

TODAY = dt.date(2026, 11, 29)

_CACHE_HOME = None


def pytest_configure(config):
    """Every run of the CLI in the tests (in process or not) caches probes in a directory
    of this test session, never in the user's ~/.cache."""
    global _CACHE_HOME
    _CACHE_HOME = tempfile.mkdtemp(prefix="epaudit-test-cache-")
    os.environ["EPAUDIT_CACHE_DIR"] = _CACHE_HOME


def pytest_unconfigure(config):
    if _CACHE_HOME:
        shutil.rmtree(_CACHE_HOME, ignore_errors=True)


def make_matrix(providers: str, cells: str = "", gate: str = 'reference = ["CPU"]\ngated = ["BROKEN"]'):
    """A schema-1 matrix with a CPU provider plus ``providers`` (TOML text) and ``cells``."""
    text = textwrap.dedent(f'''\
        schema_version = 1
        [gate]
        {gate}
        [providers.CPU]
        name = "CPUExecutionProvider"
        ''') + textwrap.dedent(providers) + "\n" + textwrap.dedent(cells)
    return parse(text, "test.toml")


#: A schema-1 matrix with the CPU EP alone as reference and no gated EP (the head of a test's matrix).
CPU_ONLY = ('schema_version = 1\n[gate]\nreference = ["CPU"]\ngated = []\n[providers.CPU]\n'
            'name = "CPUExecutionProvider"\n')


def cpu_matrix(*globs: str, feature_ids):
    """A schema-1 matrix with the CPU EP alone as reference, no gated EP, and ``CPU =
    "supported"`` for each glob of ``globs`` (parsed against ``feature_ids``)."""
    text = (CPU_ONLY + "".join(f'[features."{g}"]\nCPU = "supported"\n' for g in globs))
    return parse(text, "m.toml", feature_ids=list(feature_ids))


@pytest.fixture
def broken():
    """Factory: matrix with BROKEN = the CPU EP with ``fault`` injected."""
    def factory(fault: str, cells: str = ""):
        return make_matrix(f'[providers.BROKEN]\nname = "CPUExecutionProvider"\ninject_fault = "{fault}"\n', cells)
    return factory


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    """A conformance case cache private to this test session."""
    return tmp_path_factory.mktemp("epaudit-cache")


@pytest.fixture(scope="session")
def backend_cases(cache_dir):
    """Every ONNX backend Attention case, generated from the installed onnx once per session."""
    from epaudit.catalog.corpus.cases import load_cases

    return load_cases(["Attention"], cache_dir)
