"""Plugin EPs and providers in other environments, on the CPU machine: real workers, real ORT.

A plugin EP (``library`` in the matrix) is registered and selected through its devices
inside the worker; one named without its library must read UNAVAILABLE with the reason,
never a pass (ORT would silently hand back a CPU session).
"""

from __future__ import annotations

import pytest
from conftest import make_matrix

from epaudit.audit import run
from epaudit.catalog import BY_ID
from epaudit.contract.outcomes import Outcome
from epaudit.matrix.load import parse
from epaudit.matrix.model import MatrixError
from epaudit.run.canary import inspect_provider


def _one(provider_toml: str):
    m = make_matrix(provider_toml, gate='reference = ["CPU"]')
    return m, m.providers["X"]


def test_a_plugin_ep_named_without_its_library_is_unavailable_with_the_reason():
    m, p = _one('[providers.X]\nname = "QNNExecutionProvider"\n')
    result = run(m, providers=[p], features=[BY_ID["gqa.softcap"]])
    info = result.eps["X"]
    assert not info.live
    assert "QNNExecutionProvider is not a provider of onnxruntime" in info.reason
    assert "selected by name alone" in info.reason
    assert result.results[("gqa.softcap", "X")].outcome is Outcome.UNAVAILABLE


@pytest.mark.parametrize("library, words", [
    ("/nonexistent/libep.so", "'/nonexistent/libep.so' (from '/nonexistent/libep.so') is not a file"),
    ("os:getcwd", "(from 'os:getcwd') is not a file"),               # resolves to a directory
    ("json:dumps", "library 'json:dumps': TypeError"),                 # the function fails
    ("no_such_module_x:get_library_path", "ModuleNotFoundError"),      # not installed there
])
def test_a_plugin_library_that_cannot_be_registered_is_unavailable(library, words):
    _, p = _one(f'[providers.X]\nname = "QNNExecutionProvider"\nlibrary = "{library}"\n')
    st = inspect_provider(p)
    assert not st.live and words in st.reason, st.reason
    assert st.listed == "plugin"


def test_a_library_onnxruntime_refuses_is_unavailable_with_orts_words(tmp_path):
    lib = tmp_path / "libnot_an_ep.so"
    lib.write_bytes(b"\x7fELF not really")
    _, p = _one(f'[providers.X]\nname = "QNNExecutionProvider"\nlibrary = "{lib}"\n')
    st = inspect_provider(p)
    assert not st.live and f"registering '{lib}' as QNNExecutionProvider" in st.reason


def test_matrix_reads_library_and_device_filters():
    m = parse('schema_version = 1\n[providers.QNN]\nname = "QNNExecutionProvider"\n'
              'library = "$QNN_LIB"\ndevice = { type = "NPU", vendor_id = 20803 }\n',
              "m.toml", environ={"QNN_LIB": "onnxruntime_qnn:get_library_path"})
    p = m.providers["QNN"]
    assert p.library == "onnxruntime_qnn:get_library_path" and dict(p.device) == {"type": "NPU", "vendor_id": "20803"}
    m = parse('schema_version = 1\n[providers.QNN]\nname = "QNNExecutionProvider"\nlibrary = "$QNN_LIB"\n',
              "m.toml", environ={})
    assert m.providers["QNN"].unavailable == '$QNN_LIB is not set (library = "$QNN_LIB" in the matrix)'


@pytest.mark.parametrize("body, message", [
    ('device = { type = "NPU" }', 'm.toml:4: providers.Q.device: device filters select a plugin EP'),
    ('library = "x:y"\ndevice = { kind = "NPU" }', "m.toml:5: providers.Q.device.kind: unknown key 'kind'"),
    ('library = "x:y"\ndevice = { type = true }', "m.toml:5: providers.Q.device.type: must be a string or an integer"),
    ('library = ""', "m.toml:4: providers.Q.library: must not be empty"),
])
def test_bad_plugin_keys_name_file_key_and_line(body, message):
    with pytest.raises(MatrixError) as err:
        parse(f'schema_version = 1\n[providers.Q]\nname = "QNNExecutionProvider"\n{body}\n', "m.toml")
    assert str(err.value).startswith(message), str(err.value)
