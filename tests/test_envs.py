"""`epaudit env create`: apt sources read from the machine, the private apt set-up, the wrapper."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from epaudit.cli import main
from epaudit.providers import envs

DEB822 = textwrap.dedent("""\
    Types: deb
    # http://snapshot.debian.org/archive/debian/20250520T000000Z
    URIs: http://mirror.example/debian
    Suites: bookworm bookworm-updates
    Components: main
    Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

    Types: deb
    URIs: http://mirror.example/debian-security
    Suites: bookworm-security
    Components: main
    Enabled: no
    """)


def test_deb822_sources_give_uri_suites_and_keyring():
    got = envs.parse_sources(DEB822, deb822=True)
    assert got == [
        envs.AptSource("http://mirror.example/debian", "bookworm", ("main",),
                       "/usr/share/keyrings/debian-archive-keyring.gpg"),
        envs.AptSource("http://mirror.example/debian", "bookworm-updates", ("main",),
                       "/usr/share/keyrings/debian-archive-keyring.gpg"),
    ]
    assert envs.base_source("bookworm", got).uri == "http://mirror.example/debian"


def test_one_line_sources_and_the_base_suite_of_the_machine():
    text = ("# comment\ndeb-src http://src.example/debian bookworm main\n"
            "deb [arch=amd64 signed-by=/k.gpg] http://m.example/debian/ bookworm main contrib\n")
    got = envs.parse_sources(text, deb822=False)
    assert got == [envs.AptSource("http://m.example/debian", "bookworm", ("main", "contrib"), "/k.gpg")]
    with pytest.raises(envs.EnvError, match="no apt source serves 'trixie main'"):
        envs.base_source("trixie", got)


def test_codename_comes_from_os_release(tmp_path):
    f = tmp_path / "os-release"
    f.write_text('NAME="Debian GNU/Linux"\nVERSION_CODENAME=bookworm\n')
    assert envs.codename(f) == "bookworm"
    f.write_text('NAME="Some OS"\n')
    with pytest.raises(envs.EnvError, match="names no VERSION_CODENAME"):
        envs.codename(f)


def test_no_apt_is_a_clear_failure(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get, apt-cache or dpkg-deb here
    with pytest.raises(envs.EnvError, match="apt-get not found: fetching Mesa's lavapipe driver needs"):
        envs.ensure_lavapipe(tmp_path / "mesa", lambda _: None)


def test_a_missing_backports_suite_is_a_clear_failure(tmp_path):
    """A mirror that serves nothing: apt-get update fails and the message names the suite."""
    if subprocess.run(["which", "apt-get"], capture_output=True).returncode:
        pytest.skip("no apt-get on this machine")
    src = [envs.AptSource(f"file://{tmp_path}/nothing", "bookworm", ("main",))]
    with pytest.raises(envs.EnvError, match="apt-get update for bookworm-backports"):
        envs.ensure_lavapipe(tmp_path / "mesa", lambda _: None, sources=src, release="bookworm")


def test_the_wrapper_sets_the_worker_variables_and_runs_python(tmp_path):
    w = tmp_path / "python"
    envs._wrapper(w, sys.executable, {"VK_ICD_FILENAMES": "/x/lvp_icd.json", "LD_LIBRARY_PATH": "/x/lib"})
    out = subprocess.run([str(w), "-c", "import os; print(os.environ['VK_ICD_FILENAMES'], "
                          "os.environ['LD_LIBRARY_PATH'].split(':')[0])"],
                         capture_output=True, text=True, env={"LD_LIBRARY_PATH": "/y"}, check=True)
    assert out.stdout.split() == ["/x/lvp_icd.json", "/x/lib"]


def test_env_create_rejects_an_unknown_kind():
    r = CliRunner().invoke(main, ["env", "create", "cuda"])
    assert r.exit_code == 2 and "'cuda' is not one of" in r.output
