"""The matrix's top-level ``onnx`` key (epaudit/matrix/onnxkey.py, docs/matrix.md "The onnx key"):
``onnx.*`` keys of another onnx's backend test corpus are skipped and named, not errors;
everything else stays strict."""

from __future__ import annotations

import textwrap
from importlib import metadata

import pytest
from click.testing import CliRunner

from epaudit.matrix.load import parse
from epaudit.matrix.model import MatrixError

INSTALLED = metadata.version("onnx")
#: The catalog ids the matrices below are checked against: hand-written ones plus a few
#: generated ones, so the generated-catalog-present path is taken.
IDS = ["gqa.prompt", "gqa.softcap",
       "onnx.Abs.input:X=zeros.abs.opset13",
       "onnx.LeakyRelu.alpha=0.5.leakyrelu_default.opset16",
       "onnx.RoiAlign.mode=max.roialign_aligned_false.opset22"]
UNKNOWN = "onnx.Attention.softcap.attention_4d_softcap.opset28"
NO_MATCH = "onnx.*.opset28"


def matrix_text(onnx: str | None, extra: str = "") -> str:
    """A matrix with the ``onnx`` key (line 2) set to ``onnx`` (TOML source) or absent (a
    comment keeps the line numbers), an unknown exact ``onnx.*`` key at line 8, a glob
    matching nothing at line 11, and keys the catalog has."""
    head = f"onnx = {onnx}" if onnx is not None else "# no onnx key"
    return textwrap.dedent(f"""\
        schema_version = 1
        {head}
        [gate]
        reference = ["CPU"]
        [providers.CPU]
        name = "CPUExecutionProvider"

        [features."{UNKNOWN}"]
        CPU = "supported"

        [features."{NO_MATCH}"]
        CPU = {{ status = "skip", issue = "https://github.com/onnx/onnx/pull/7000", until = 2027-01-31 }}

        [features."onnx.LeakyRelu.*"]
        CPU = "supported"

        [features."gqa.prompt"]
        CPU = "supported"
        """) + textwrap.dedent(extra)


def test_another_onnx_skips_and_names_its_keys():
    m = parse(matrix_text('"0.0.1"'), "m.toml", feature_ids=IDS)
    assert m.stale_generated == (UNKNOWN, NO_MATCH)
    assert (m.onnx, m.onnx_installed, m.onnx_line) == ("0.0.1", INSTALLED, 2)
    # What the catalog has still resolves: the glob that matches, the exact key.
    assert m.declaration("onnx.LeakyRelu.alpha=0.5.leakyrelu_default.opset16", "CPU").status == "supported"
    assert m.declaration("gqa.prompt", "CPU").status == "supported"
    assert UNKNOWN not in m.features and [t.glob.key for t in m.globs] == ["onnx.LeakyRelu.*"]


def test_the_installed_onnx_keeps_unknown_keys_errors():
    with pytest.raises(MatrixError) as err:
        parse(matrix_text(f'"{INSTALLED}"'), "m.toml", feature_ids=IDS)
    assert str(err.value).startswith(f'm.toml:8: features."{UNKNOWN}": unknown feature id')


def test_the_installed_onnx_keeps_an_empty_glob_an_error():
    text = matrix_text(f'"{INSTALLED}"').replace(f'[features."{UNKNOWN}"]\nCPU = "supported"\n', "")
    with pytest.raises(MatrixError) as err:
        parse(text, "m.toml", feature_ids=IDS)
    assert str(err.value).startswith(f'm.toml:9: features."{NO_MATCH}": glob matches no feature of the catalog')


def test_without_the_key_unknown_onnx_keys_are_errors():
    with pytest.raises(MatrixError) as err:
        parse(matrix_text(None), "m.toml", feature_ids=IDS)
    assert str(err.value).startswith(f'm.toml:8: features."{UNKNOWN}": unknown feature id')


def test_a_hand_written_typo_is_an_error_with_another_onnx():
    text = matrix_text('"0.0.1"', '[features."gqa.sofcap"]\nCPU = "supported"\n')
    with pytest.raises(MatrixError) as err:
        parse(text, "m.toml", feature_ids=IDS)
    assert str(err.value) == ("m.toml:19: features.\"gqa.sofcap\": unknown feature id 'gqa.sofcap', "
                              "did you mean 'gqa.softcap'? (see `epaudit features`)")


@pytest.mark.parametrize("key", ["onnx.attention.softcap.case.opset28",   # not an operator name
                                 "onnx.Attention.softcap.case",           # no .opset<N>
                                 "onnx.leakyrelu.*"])                     # glob, not an operator name
def test_an_implausible_onnx_key_is_an_error_with_another_onnx(key):
    text = matrix_text('"0.0.1"', f'[features."{key}"]\nCPU = "supported"\n')
    with pytest.raises(MatrixError) as err:
        parse(text, "m.toml", feature_ids=IDS)
    assert str(err.value).startswith(f'm.toml:19: features."{key}": ')


def test_a_skipped_keys_cells_are_still_checked():
    text = matrix_text('"0.0.1"').replace(f'[features."{UNKNOWN}"]\nCPU', f'[features."{UNKNOWN}"]\nCUDA')
    with pytest.raises(MatrixError) as err:
        parse(text, "m.toml", feature_ids=IDS)
    assert str(err.value).startswith(f'm.toml:9: features."{UNKNOWN}".CUDA: unknown EP alias')


@pytest.mark.parametrize("value, problem", [
    ("3", "must be a string, got an integer"),
    ('"latest"', "must be the onnx version the onnx.* keys were written against, like \"1.23.2\", got 'latest'"),
])
def test_a_bad_onnx_value_names_file_line_and_key(value, problem):
    with pytest.raises(MatrixError) as err:
        parse(matrix_text(value), "m.toml", feature_ids=IDS)
    assert str(err.value) == f"m.toml:2: onnx: {problem}"


def test_a_catalog_without_generated_ids_ignores_onnx_keys_and_records_none():
    m = parse(matrix_text('"0.0.1"'), "m.toml", feature_ids=["gqa.prompt", "gqa.softcap"])
    assert m.stale_generated == () and m.onnx == "0.0.1"


@pytest.fixture
def catalog_with_generated_ids(monkeypatch):
    """The catalog's ``BY_ID`` plus the generated ids of :data:`IDS` (the suite runs with
    ``EPAUDIT_GENERATED=0``; building the real generated catalog costs ~15 s)."""
    from epaudit import catalog

    by_id = dict(catalog.BY_ID)  # built first: a later first use would overwrite the patch
    prompt = by_id["gqa.prompt"]
    monkeypatch.setattr(catalog, "BY_ID", {**by_id, **{i: prompt for i in IDS if i.startswith("onnx.")}})


@pytest.mark.parametrize("quiet", [False, True])
def test_check_prints_one_note_unless_quiet(tmp_path, catalog_with_generated_ids, quiet):
    from epaudit.cli import main

    path = tmp_path / "m.toml"
    path.write_text(matrix_text('"0.0.1"'), encoding="utf-8")
    args = ["check", "--matrix", str(path), "--ep", "CPU", "--feature", "gqa.prompt", "--no-cache"]
    r = CliRunner().invoke(main, args + (["--quiet"] if quiet else []))
    assert r.exit_code == 0, r.output + r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("epaudit: note: ")]
    if quiet:
        assert notes == []
        return
    assert notes == [f'epaudit: note: {path}:2: onnx = "0.0.1" but onnx {INSTALLED} is installed: 2 onnx.* '
                     "declaration(s) match no generated probe and are ignored "
                     "(see `epaudit features --feature 'onnx.*'`)"]
    assert "PASS" in r.output
