"""The probe cache (epaudit/cache/probecache.py): same probes, never stale, never trusted blindly."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import TODAY, make_matrix

from epaudit.audit import run
from epaudit.cache import probecache as cache_mod
from epaudit.cache.probecache import FORMAT, MAGIC, ProbeCache, probe_key
from epaudit.catalog import BY_ID, CATALOG_VERSION, FEATURES, shipped
from epaudit.contract.outcomes import Outcome
from epaudit.run.probeset import ProbeSet

SMALL = [BY_ID[f] for f in ("gqa.softcap", "attention.scale", "attention.mask.bool")]


def _same_case(a, b) -> None:
    assert (a is None) == (b is None)
    if a is None:
        return
    assert a.model == b.model
    assert a.outputs == b.outputs and a.exact == b.exact
    for mine, theirs in ((a.feeds, b.feeds), (a.reference, b.reference)):
        assert mine.keys() == theirs.keys()
        for k in mine:
            assert mine[k].dtype == theirs[k].dtype and mine[k].shape == theirs[k].shape
            assert mine[k].tobytes() == theirs[k].tobytes(), k


def test_every_shipped_probe_comes_back_from_the_cache_bit_for_bit(tmp_path):
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    built = {f.id: f.build() for f in FEATURES}
    assert c.store(built)
    loaded = c.load()
    assert loaded.keys() == built.keys()
    for fid, p in built.items():
        q = loaded[fid]
        assert (q.feature_id, q.dtype, q.node_name, q.tolerance) == (p.feature_id, p.dtype, p.node_name, p.tolerance)
        _same_case(p.subject, q.subject)
        _same_case(p.control, q.control)


def test_a_second_run_uses_the_cache_and_never_imports_onnx(tmp_path):
    script = (
        "import sys\n"
        "from epaudit.cli import main\n"
        "try:\n"
        f"    main(['check', '--ep', 'CPU', '--feature', 'gqa.softcap', '--cache-dir', {str(tmp_path)!r}],"
        " prog_name='epaudit')\n"
        "except SystemExit as e:\n"
        "    print('exit', e.code, 'onnx' in sys.modules, file=sys.stderr)\n")

    def once() -> str:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
        return r.stderr.strip().splitlines()[-1]

    assert once() == "exit 0 True"          # nothing cached: built with onnx, then stored
    files = sorted(p.name for p in tmp_path.iterdir())
    # the built probes, and the CPU EP's kernel registry for the coverage line (epaudit/surface/kernels.py)
    assert files == [f"probes-{probe_key(CATALOG_VERSION)}.bin", "surface"]
    assert once() == "exit 0 False"         # all from the cache: onnx never imported


def test_no_cache_reads_and_writes_nothing(tmp_path):
    from click.testing import CliRunner

    from epaudit.cli import main

    r = CliRunner().invoke(main, ["check", "--ep", "CPU", "--feature", "gqa.softcap", "--no-cache",
                                  "--cache-dir", str(tmp_path / "c")])
    assert r.exit_code == 0, r.output
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("damage", ["flip", "truncate", "other_key", "not_a_cache"])
def test_a_damaged_or_foreign_file_is_a_miss_and_the_run_rebuilds(tmp_path, damage):
    key = probe_key(CATALOG_VERSION)
    c = ProbeCache(tmp_path, key)
    assert c.store({f.id: f.build() for f in SMALL})
    data = c.path.read_bytes()
    if damage == "flip":       # one byte of an array changed: the digest no longer matches
        data = data[:-10] + bytes([data[-10] ^ 1]) + data[-9:]
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "other_key":  # whole and consistent, but written for another key
        ProbeCache(tmp_path / "o", "0" * 64).store({f.id: f.build() for f in SMALL})
        data = (tmp_path / "o" / f"probes-{'0' * 64}.bin").read_bytes()
    else:
        data = b"hello"
    c.path.write_bytes(data)
    assert c.load() == {}
    result = run(make_matrix("", gate='reference = ["CPU"]'), features=SMALL, today=TODAY, cache=c)
    assert [result.results[(f.id, "CPU")].outcome for f in SMALL] == [Outcome.PASS] * 3
    assert c.load().keys() == {f.id for f in SMALL}  # rewritten whole


def test_a_consistent_cache_entry_still_passes_the_blind_probe_check(tmp_path):
    """A file with a right digest is still not trusted to be a probe that can fail: a
    cached probe whose control equals its subject is refused like a built one."""
    f = BY_ID["gqa.softcap"]
    p = f.build()
    blind = dataclasses.replace(p, control=p.subject)
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    assert c.store({f.id: blind})
    got = ProbeSet([f], c)[f.id]
    assert isinstance(got, str) and got.startswith("blind probe"), got


def test_a_variant_of_a_shipped_feature_is_built_never_served_from_the_cache(tmp_path):
    f = BY_ID["gqa.softcap"]
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    assert c.store({f.id: f.build()})

    def broken():
        raise RuntimeError("deliberately broken build")

    variant = dataclasses.replace(f, build=broken)
    assert shipped(f) and not shipped(variant)
    got = ProbeSet([variant], c)[f.id]
    assert isinstance(got, str) and "deliberately broken build" in got
    # and the variant's failure is not written over the shipped entry
    ps = ProbeSet([variant], c)
    assert ps.save() is False
    assert f.id in c.load()


def test_an_unwritable_cache_costs_only_the_rebuild(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    c = ProbeCache(blocker / "cache", probe_key(CATALOG_VERSION))
    result = run(make_matrix("", gate='reference = ["CPU"]'), features=SMALL[:1], today=TODAY, cache=c)
    assert result.results[(SMALL[0].id, "CPU")].outcome is Outcome.PASS
    assert c.store({}) is False
    assert c.load() == {}


def test_the_key_follows_the_catalog_version_sources_and_installs(monkeypatch):
    key = probe_key(CATALOG_VERSION)
    assert len(key) == 64 and key == probe_key(CATALOG_VERSION)
    assert probe_key(CATALOG_VERSION + 1) != key
    monkeypatch.setattr(cache_mod, "FORMAT", FORMAT + 1)
    assert probe_key(CATALOG_VERSION) != key
    monkeypatch.setattr(cache_mod, "FORMAT", FORMAT)
    monkeypatch.setattr(np, "__version__", "0.0.0")
    assert probe_key(CATALOG_VERSION) != key


def test_the_key_follows_the_source_text(tmp_path, monkeypatch):
    """A copy of the package whose reference math differs by one comment has another key."""
    import shutil

    import epaudit

    src = os.path.dirname(epaudit.__file__)
    copy = tmp_path / "epaudit"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache_mod, "__file__", str(copy / "cache" / "probecache.py"))
    same = probe_key(CATALOG_VERSION)
    assert same == probe_key(CATALOG_VERSION)
    with open(copy / "reference" / "gqa.py", "a") as fh:
        fh.write("\n# a change\n")
    assert probe_key(CATALOG_VERSION) != same


def test_a_write_prunes_only_stale_cache_files_it_owns(tmp_path):
    """Another key's file in use stays (two installs sharing ~/.cache take no turns);
    one untouched for a week goes, as does a dead write's temp file after an hour;
    a file of any other name is never touched."""
    p = SMALL[0].build()
    old, other, new = (ProbeCache(tmp_path, c * 64) for c in "abc")
    assert old.store({p.feature_id: p}) and other.store({p.feature_id: p})
    week_ago = time.time() - cache_mod.STALE_KEY_SECONDS - 60
    os.utime(old.path, (week_ago, week_ago))
    dead_temp = tmp_path / ".probes-x1y2z3"
    dead_temp.write_bytes(b"half a cache")
    os.utime(dead_temp, (week_ago, week_ago))
    fresh_temp = tmp_path / ".probes-inflight"
    fresh_temp.write_bytes(b"another run writing now")
    mine = tmp_path / "probes-experiment1.bin"
    mine.write_text("precious")
    assert new.store({p.feature_id: p})
    names = sorted(x.name for x in tmp_path.iterdir())
    assert names == sorted([other.path.name, new.path.name, fresh_temp.name, mine.name])
    assert new.path.read_bytes().startswith(MAGIC)


def test_a_write_keeps_only_the_most_recently_used_keys(tmp_path):
    """Every epaudit change or virtual environment is a new key; with the generated
    catalog a file is ~28 MB, and 40 of them piled up on one machine within a day (none a
    week old). A load marks its file used, so a file in use stays among the newest."""
    p = SMALL[0].build()
    others = [ProbeCache(tmp_path, f"{i:x}" * 64) for i in range(1, 7)]
    assert others[0].store({p.feature_id: p})
    for i, c in enumerate(others):
        if i:
            c.path.write_bytes(b"another key's probes")  # content aside: pruned by name and age
        os.utime(c.path, (time.time() - 600 + i, time.time() - 600 + i))
    assert others[0].load()  # the oldest, read now: in use
    new = ProbeCache(tmp_path, "f" * 64)
    assert new.store({p.feature_id: p})
    kept = {x.name for x in tmp_path.iterdir()}
    assert len(kept) == cache_mod.KEEP_KEYS
    assert kept == {new.path.name, others[0].path.name, others[5].path.name, others[4].path.name}


@pytest.mark.parametrize("kind", ["fifo", "device", "too_big"])
def test_only_a_regular_file_of_sane_size_is_read(tmp_path, monkeypatch, kind):
    """Found by a fresh user: a FIFO at the cache path hung the run for good (signals
    ignored), /dev/zero read until memory ran out."""
    c = ProbeCache(tmp_path, probe_key(CATALOG_VERSION))
    if kind == "fifo":
        os.mkfifo(c.path)
    elif kind == "device":
        c.path.symlink_to("/dev/zero")
    else:
        assert c.store({f.id: f.build() for f in SMALL})
        monkeypatch.setattr(cache_mod, "MAX_BYTES", c.path.stat().st_size - 1)
    t0 = time.monotonic()
    assert c.load() == {}
    assert time.monotonic() - t0 < 5


def test_the_onnx_version_is_read_without_importing_onnx():
    code = ("import sys; from epaudit.cache.probecache import onnx_version; v = onnx_version(); "
            "print(v, 'onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.split()
    import onnx

    assert out == [onnx.__version__, "False"]


@pytest.mark.parametrize("environ, expected", [
    ({"EPAUDIT_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/c"),
    ({"XDG_CACHE_HOME": "/x", "HOME": "/h"}, "/x/epaudit"),
    ({"XDG_CACHE_HOME": "relative/x", "HOME": "/h"}, "/h/.cache/epaudit"),  # XDG: ignore relative
    ({"EPAUDIT_CACHE_DIR": "", "HOME": "/h"}, "/h/.cache/epaudit"),
    ({"HOME": ""}, None),
    ({"HOME": "/"}, None),
    ({"HOME": "somewhere"}, None),
])
def test_default_cache_dir(environ, expected):
    from epaudit.cache.probecache import default_cache_dir

    got = default_cache_dir(environ)
    assert (None if got is None else str(got)) == expected


def test_an_empty_cache_dir_option_is_a_usage_error(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from epaudit.cli import main

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["check", "--ep", "CPU", "--feature", "gqa.softcap", "--cache-dir", ""])
    assert r.exit_code == 2 and "--cache-dir: empty path" in r.output
    assert list(tmp_path.iterdir()) == []
