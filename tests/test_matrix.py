"""Matrix loading: every validation error names the file, key and line (exit 2 in the CLI)."""

from __future__ import annotations

import datetime as dt
import textwrap

import pytest

from epaudit.matrix.load import load, parse
from epaudit.matrix.model import MatrixError

IDS = ["gqa.attention_bias", "gqa.prompt", "attention.basic"]

GOOD = textwrap.dedent('''\
    schema_version = 1

    [gate]
    reference = ["CPU"]
    gated = ["CUDA"]

    [providers.CPU]
    name = "CPUExecutionProvider"

    [providers.CUDA]
    name = "CUDAExecutionProvider"
    options = { device_id = 0, enable = true }
    env = { ORT_DISABLE_FLASH_ATTENTION = "1" }

    [features."gqa.attention_bias"]
    CPU = "supported"
    CUDA = { status = "unsupported", issue = "https://example.org/1", until = 2027-03-31, reason = "r" }
    ''')


def err(text: str, **kw) -> MatrixError:
    with pytest.raises(MatrixError) as info:
        parse(text, "m.toml", feature_ids=IDS, **kw)
    return info.value


def test_good_matrix_loads_with_types_and_lines():
    m = parse(GOOD, "m.toml", feature_ids=IDS)
    assert m.gate.reference == ("CPU",) and m.gate.gated == ("CUDA",) and m.gate.parity == "any"
    assert m.providers["CUDA"].options == {"device_id": "0", "enable": "1"}
    assert m.providers["CUDA"].env == {"ORT_DISABLE_FLASH_ATTENTION": "1"}
    cell = m.declaration("gqa.attention_bias", "CUDA")
    assert cell.status == "unsupported" and cell.until == dt.date(2027, 3, 31) and cell.governed
    assert cell.line == 17
    assert m.declaration("gqa.attention_bias", "CPU").line == 16
    assert m.declaration("gqa.prompt", "CPU") is None
    assert m.line_of("gqa.attention_bias") == 15


@pytest.mark.parametrize("text, key, line, words", [
    ("bogus = 1\n" + GOOD, "bogus", 1, "unknown key"),
    (GOOD + "bogus = 1\n", 'features."gqa.attention_bias".bogus', 18, "unknown EP alias"),
    (GOOD.replace('[gate]\n', '[gate]\nparty = "any"\n'), "gate.party", 4, "did you mean 'parity'"),
    (GOOD.replace('gated = ["CUDA"]', 'gated = ["CUDE"]'), "gate.gated", 5, "did you mean 'CUDA'"),
    (GOOD.replace('[gate]\n', '[gate]\nparity = "most"\n'), "gate.parity", 4, "must be one of"),
    (GOOD + '[features."gqa.atention_bias"]\nCPU = "supported"\n', 'features."gqa.atention_bias"', 18,
     "did you mean 'gqa.attention_bias'"),
    (GOOD.replace('CPU = "supported"', 'CPUU = "supported"'), 'features."gqa.attention_bias".CPUU', 16,
     "unknown EP alias"),
    (GOOD.replace('CPU = "supported"', 'CPU = "yes"'), 'features."gqa.attention_bias".CPU', 16,
     'must be "supported"'),
    (GOOD.replace('until = 2027-03-31', 'until = "2027-03-31"'), 'features."gqa.attention_bias".CUDA.until',
     17, "TOML date"),
    (GOOD.replace('until = 2027-03-31', 'until = 2027-03-31T10:00:00'), 'features."gqa.attention_bias".CUDA.until',
     17, "TOML date"),
    (GOOD.replace('status = "unsupported"', 'status = "broken"'), 'features."gqa.attention_bias".CUDA.status',
     17, "must be one of"),
    (GOOD.replace('reason = "r"', 'reason = 3'), 'features."gqa.attention_bias".CUDA.reason', 17, "must be a string"),
    (GOOD.replace('name = "CPUExecutionProvider"', 'nme = "CPUExecutionProvider"'), "providers.CPU.nme", 8,
     "did you mean 'name'"),
    (GOOD.replace('options = { device_id = 0, enable = true }', 'options = { device_id = [0] }'),
     "providers.CUDA.options.device_id", 12, "string, number or boolean"),
    (GOOD.replace("schema_version = 1", "schema_version = 2"), "schema_version", 1, "must be 1"),
    (GOOD.replace("schema_version = 1", ""), "schema_version", None, "missing"),
    (GOOD.replace('name = "CPUExecutionProvider"', 'name = "CPUExecutionProvider"\ninject_fault = "explode"'),
     "providers.CPU.inject_fault", 9, "unknown fault"),
    (GOOD.replace('name = "CPUExecutionProvider"', 'name = "CPUExecutionProvider"\npython = "$1X"'),
     "providers.CPU.python", 9, "valid $VARIABLE"),
])
def test_each_error_names_key_and_line(text, key, line, words):
    e = err(text)
    assert e.key == key
    assert e.line == line
    assert words in e.problem
    assert str(e).startswith(f"m.toml:{line}: " if line else "m.toml: ")
    assert "\n" not in str(e)


@pytest.mark.parametrize("extra, key, words", [
    ('env = { "A=B" = "1" }', "providers.CPU.env.A=B", "not an environment variable name"),
    ('env = { "" = "1" }', "providers.CPU.env.", "not an environment variable name"),
    ('env = { A = "x\\u0000y" }', "providers.CPU.env.A", "NUL"),
    ('python = "/usr/bin/python3\\u0000x"', "providers.CPU.python", "NUL"),
    ("options = { a = nan }", "providers.CPU.options.a", "finite"),
])
def test_values_a_worker_cannot_start_with_are_matrix_errors(extra, key, words):
    """Found by a fresh user: these passed validation, then raised inside subprocess."""
    e = err(GOOD.replace('name = "CPUExecutionProvider"\n', f'name = "CPUExecutionProvider"\n{extra}\n'))
    assert e.key == key and words in e.problem and e.line == 9


def test_dotted_keys_get_their_line():
    e = err("schema_version = 1\n\nfeatures.\"gqa.atention_bias\".CPU = \"supported\"\n")
    assert e.line == 3 and "did you mean 'gqa.attention_bias'" in e.problem


def test_non_regular_matrix_files_are_refused(tmp_path):
    with pytest.raises(MatrixError, match="not a regular file"):
        load("/dev/zero", feature_ids=IDS)
    with pytest.raises(MatrixError, match="not a regular file"):
        load(tmp_path, feature_ids=IDS)


def test_toml_syntax_error_gives_line():
    e = err(GOOD.replace('gated = ["CUDA"]', 'gated = CUDA'))
    assert e.line == 5 and "TOML syntax" in e.problem


def test_python_variable_unset_makes_ep_unavailable_with_reason():
    text = GOOD.replace('name = "CUDAExecutionProvider"', 'name = "CUDAExecutionProvider"\npython = "$EPAUDIT_TEST_PY"')
    m = parse(text, "m.toml", feature_ids=IDS, environ={})
    assert m.providers["CUDA"].python is None
    assert "$EPAUDIT_TEST_PY is not set" in m.providers["CUDA"].unavailable
    m = parse(text, "m.toml", feature_ids=IDS, environ={"EPAUDIT_TEST_PY": "/opt/py"})
    assert m.providers["CUDA"].python == "/opt/py" and m.providers["CUDA"].unavailable == ""


def test_missing_file_and_binary_file(tmp_path):
    with pytest.raises(MatrixError, match="cannot read"):
        load(tmp_path / "nope.toml", feature_ids=IDS)
    bad = tmp_path / "bin.toml"
    bad.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(MatrixError, match="not UTF-8"):
        load(bad, feature_ids=IDS)


def test_shipped_matrix_is_valid_and_governed():
    """The embedded default loads against the real catalog and every gap is governed and current."""
    m = load(None)
    assert set(m.providers) >= {"CPU", "CUDA", "WebGPU"}
    assert m.gate.gated == ("CUDA",) and "CPU" in m.gate.reference
    from epaudit.catalog import BY_ID
    assert set(m.features) == set(BY_ID), "every catalog feature is declared in the shipped matrix"
    for fid, cells in m.features.items():
        for alias, d in cells.items():
            if d.status != "supported":
                assert d.governed, (fid, alias)
                assert d.issue.startswith("https://github.com/"), (fid, alias, d.issue)
                assert d.until > dt.date(2026, 11, 29), (fid, alias)


SKIPS = GOOD + textwrap.dedent('''
    [[conformance.skip]]
    ep = "CPU"
    test = "test_attention_4d_causal_fp16"
    issue = "https://example.org/2"
    until = 2027-03-31

    [[conformance.skip]]
    ep = "CUDA"
    test = "test_attention_*qk_matmul_softmax"
    max_matches = 2
    reason = "mode 3"
    ''')


def test_conformance_skips_load_with_their_own_lines():
    m = parse(SKIPS, "m.toml", feature_ids=IDS)
    first, second = m.skips
    assert (first.ep, first.test, first.line, first.governed, first.is_glob) == (
        "CPU", "test_attention_4d_causal_fp16", 19, True, False)
    assert (second.ep, second.max_matches, second.line, second.governed) == ("CUDA", 2, 25, False)
    assert second.matches("test_attention_4d_with_qk_matmul_softmax")
    # a glob reaches an _expanded (function-body) case only when it says so
    assert not second.matches("test_attention_4d_with_qk_matmul_softmax_expanded")


@pytest.mark.parametrize("old, new, key, line, words", [
    ('ep = "CUDA"', 'ep = "CUDE"', "conformance.skip[1].ep", 26, "did you mean 'CUDA'"),
    ("max_matches = 2\n", "", "conformance.skip[1].test", 27, "needs max_matches"),
    ("max_matches = 2", "max_matches = 0", "conformance.skip[1].max_matches", 28, "positive integer"),
    ('test = "test_attention_4d_causal_fp16"', 'test = "test_attention_4d_causal_fp16"\nmax_matches = 1',
     "conformance.skip[0].max_matches", 22, "only a glob"),
    ("until = 2027-03-31\n\n[[conformance", "until = \"soon\"\n\n[[conformance", "conformance.skip[0].until", 23,
     "TOML date"),
    ('reason = "mode 3"', 'reason = "mode 3"\nowner = "me"', "conformance.skip[1].owner", 30, "unknown key"),
    ('ep = "CPU"\ntest = "test_attention_4d_causal_fp16"', 'ep = "CPU"', "conformance.skip[0]", 19,
     "missing key 'test'"),
])
def test_conformance_skip_errors_name_key_and_line(old, new, key, line, words):
    assert old in SKIPS
    e = err(SKIPS.replace(old, new, 1))
    assert (e.key, e.line) == (key, line) and words in e.problem
