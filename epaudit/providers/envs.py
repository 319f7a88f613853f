"""Provider environments: a virtual environment per real non-CPU EP (``epaudit env create``).

Each EP package installs its own module ``onnxruntime`` (onnxruntime-webgpu,
onnxruntime-qnn pulls plain onnxruntime, onnxruntime-openvino), so each EP needs an
environment of its own, holding only that package and numpy: the worker needs nothing
else (``epaudit/worker/``). What each one needs, measured on CPU-only Debian 12 x86_64
(docs/ort-facts.md "Real EPs that run on a CPU-only Linux machine"):

* ``webgpu`` — onnxruntime-webgpu runs through Mesa's software Vulkan driver (lavapipe).
  Debian 12's Mesa 22.3.6 is rejected by Dawn (``Failed to get a WebGPU adapter: No
  supported adapters``); Mesa >= 25 from the distribution's ``<codename>-backports`` suite
  works. It is fetched with apt into a private directory (its own sources list, package
  lists and download cache: nothing is installed system-wide and the system's apt state
  is not touched), unpacked with ``dpkg-deb -x``, and its ICD file is copied with an
  absolute ``library_path``. The mirror is the one the machine's own apt sources use for
  the base suite; none is hard-coded. The interpreter to use is a small wrapper script
  that sets ``VK_ICD_FILENAMES`` and ``LD_LIBRARY_PATH`` and runs the environment's python.
* ``qnn`` — onnxruntime-qnn, a plugin EP (``library = "onnxruntime_qnn:get_library_path"``),
  whose x86_64 HTP backend runs on the CPU with ``backend_type = "htp"``.
* ``openvino`` — onnxruntime-openvino with ``device_type = "CPU"``.
* ``ort`` — any onnxruntime package and version (``--package onnxruntime==1.27.0``, the CPU
  wheel of an older release), for auditing one release against another
  (``docs/release-to-release.md``); see :mod:`epaudit.providers.releases`.

Every step is skipped when its result is already there (idempotent), so a second run
costs a few seconds. Downloads are cached under ``<dir>/cache``.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from .venv import EnvError, EnvResult, Say, _run, ensure_venv

#: Versions measured to work on a CPU-only machine (docs/ort-facts.md); ``--package`` overrides.
DEFAULT_DIR = ".epaudit/envs"

#: The Mesa major version Dawn accepts as a WebGPU adapter (22.3 is rejected, 25.0 works).
MESA_MIN_MAJOR = 25

_APT_SOURCES = Path("/etc/apt")


@dataclass(frozen=True)
class EnvKind:
    """What one kind of environment holds and how epaudit finds it.

    Attributes:
        kind: ``webgpu``, ``qnn`` or ``openvino``.
        package: the pip requirement installed with numpy (pinned to a measured version).
        variable: the environment variable the shipped matrix reads the interpreter from.
        alias: the provider alias in the shipped ``capabilities.toml``.
        mesa: also fetch Mesa's lavapipe Vulkan driver (WebGPU only).
    """

    kind: str
    """Environment kind."""
    package: str
    """pip requirement."""
    variable: str
    """Interpreter variable of the shipped matrix."""
    alias: str
    """Provider alias in the shipped matrix."""
    mesa: bool = False
    """Fetch lavapipe."""


KINDS: Mapping[str, EnvKind] = {
    "webgpu": EnvKind("webgpu", "onnxruntime-webgpu==1.27.0", "EPAUDIT_WEBGPU_PYTHON", "WebGPU", mesa=True),
    "qnn": EnvKind("qnn", "onnxruntime-qnn==2.7.0", "EPAUDIT_QNN_PYTHON", "QNN"),
    "openvino": EnvKind("openvino", "onnxruntime-openvino==1.24.1", "EPAUDIT_OPENVINO_PYTHON", "OpenVINO"),
}


# --------------------------------------------------------------------------- apt sources
@dataclass(frozen=True)
class AptSource:
    """One ``deb`` entry of the machine's apt configuration.

    Attributes:
        uri: the mirror (``http://deb.debian.org/debian``).
        suite: the suite (``bookworm``).
        components: ``main`` etc.
        signed_by: keyring path from ``signed-by`` / ``Signed-By``, or ``""``.
    """

    uri: str
    """Mirror URI."""
    suite: str
    """Suite."""
    components: tuple[str, ...]
    """Components."""
    signed_by: str = ""
    """Keyring path, or ""."""


def parse_sources(text: str, deb822: bool) -> list[AptSource]:
    """``deb`` entries of one apt sources file (one-line ``.list`` or deb822 ``.sources``).

    Format: sources.list(5). Disabled deb822 stanzas (``Enabled: no``) and ``deb-src``
    lines are left out; a ``Signed-By`` holding an inline key (not a path) is ignored.
    """
    out: list[AptSource] = []
    if not deb822:
        for line in text.splitlines():
            line = line.split("#", 1)[0].strip()
            m = re.match(r"^deb\s+(?:\[([^\]]*)\]\s+)?(\S+)\s+(\S+)\s*(.*)$", line)
            if not m:
                continue
            opts = dict(o.split("=", 1) for o in (m.group(1) or "").split() if "=" in o)
            out.append(AptSource(m.group(2).rstrip("/"), m.group(3), tuple(m.group(4).split()),
                                 opts.get("signed-by", "")))
        return out
    for stanza in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for line in stanza.splitlines():
            if line.startswith("#"):
                continue
            if line[:1] in (" ", "\t") and key:
                fields[key] += "\n" + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        signed = fields.get("signed-by", "")
        signed = signed if signed.startswith("/") and "\n" not in signed else ""
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                out.append(AptSource(uri.rstrip("/"), suite, tuple(fields.get("components", "").split()), signed))
    return out


def system_sources(root: Path = _APT_SOURCES) -> list[AptSource]:
    """Every ``deb`` entry of ``/etc/apt/sources.list`` and ``sources.list.d/*.{list,sources}``."""
    files = [(root / "sources.list", False)]
    d = root / "sources.list.d"
    if d.is_dir():
        files += [(p, p.suffix == ".sources") for p in sorted(d.iterdir())
                  if p.suffix in (".list", ".sources")]
    out: list[AptSource] = []
    for path, deb822 in files:
        try:
            out += parse_sources(path.read_text(encoding="utf-8", errors="replace"), deb822)
        except OSError:
            continue
    return out


def base_source(codename: str, sources: Sequence[AptSource]) -> AptSource:
    """The entry serving ``codename``'s ``main`` component: the mirror backports come from.

    Raises:
        EnvError: the machine's apt sources have no such entry.
    """
    for s in sources:
        if s.suite == codename and "main" in s.components:
            return s
    raise EnvError(f"no apt source serves '{codename} main' in /etc/apt/sources.list or "
                   "sources.list.d: cannot tell which mirror to fetch backports from")


def codename(os_release: Path = Path("/etc/os-release")) -> str:
    """The distribution codename (``VERSION_CODENAME`` of os-release(5)).

    Raises:
        EnvError: not a Debian-family system (no codename).
    """
    try:
        text = os_release.read_text()
    except OSError:
        text = ""
    m = re.search(r'^VERSION_CODENAME="?([A-Za-z0-9_-]+)"?', text, re.M)
    if not m:
        raise EnvError(f"{os_release} names no VERSION_CODENAME: the WebGPU environment needs a "
                       "Debian-family system with a <codename>-backports suite")
    return m.group(1)


# --------------------------------------------------------------------------- Mesa lavapipe
def _apt_options(apt_dir: Path) -> list[str]:
    """apt options that keep every file apt writes under ``apt_dir`` (system state untouched)."""
    return ["-o", f"Dir::Etc::SourceList={apt_dir / 'sources.list'}",
            "-o", "Dir::Etc::SourceParts=/nonexistent",
            "-o", f"Dir::State::Lists={apt_dir / 'lists'}",
            "-o", f"Dir::Cache={apt_dir / 'cache'}",
            "-o", "Debug::NoLocking=1", "-q"]


def _mesa_major(version: str) -> int:
    m = re.match(r"^(?:\d+:)?(\d+)\.", version)
    return int(m.group(1)) if m else 0


def ensure_lavapipe(target: Path, say: Say, *, sources: Sequence[AptSource] | None = None,
                    release: str | None = None) -> tuple[Path, Path]:
    """Fetch Mesa >= 25 lavapipe from ``<codename>-backports`` into ``target``.

    Returns:
        ``(icd_json, lib_dir)``: the ICD file with an absolute ``library_path``, and the
        directory to put on ``LD_LIBRARY_PATH`` (``libvulkan.so.1`` and the newer libdrm
        the driver needs, when the system lacks them).

    Raises:
        EnvError: no apt-get/dpkg-deb, no codename, no mirror, no backports suite, no
            Mesa >= 25 there, a download failed, or the package holds no lavapipe ICD.
    """
    icd = target / "lvp_icd.json"
    if icd.is_file():
        lib = Path(json.loads(icd.read_text())["ICD"]["library_path"])
        if lib.is_file():
            say(f"lavapipe: {icd} already there")
            return icd, lib.parent
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise EnvError(f"{tool} not found: fetching Mesa's lavapipe driver needs a Debian-family "
                           "system (or point VK_ICD_FILENAMES to a Mesa >= 25 lavapipe ICD yourself)")
    release = release or codename()
    base = base_source(release, system_sources() if sources is None else sources)
    backports = f"{release}-backports"
    apt_dir = target / "apt"
    for sub in ("lists/partial", "cache/archives/partial"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    signed = f" [signed-by={base.signed_by}]" if base.signed_by else ""
    # The base suite is listed too so that apt can resolve the driver's dependencies.
    (apt_dir / "sources.list").write_text(f"deb{signed} {base.uri} {release} main\n"
                                          f"deb{signed} {base.uri} {backports} main\n")
    opts = _apt_options(apt_dir)
    say(f"lavapipe: apt-get update ({base.uri} {release}, {backports}; private lists under {apt_dir})")
    _run(["apt-get", *opts, "update"], f"apt-get update for {backports}")
    madison = _run(["apt-cache", *opts, "madison", "mesa-vulkan-drivers"], "apt-cache madison")
    versions = [line.split("|")[1].strip() for line in madison.splitlines()
                if line.count("|") >= 2 and f" {backports}/" in line.split("|")[2]]
    if not versions:
        raise EnvError(f"no mesa-vulkan-drivers in {backports} at {base.uri}: the suite is missing or "
                       f"does not carry Mesa (Dawn needs Mesa >= {MESA_MIN_MAJOR}; {release} has "
                       f"{', '.join(line.split('|')[1].strip() for line in madison.splitlines() if '|' in line) or 'none'})")
    best = max(versions, key=_mesa_major)
    if _mesa_major(best) < MESA_MIN_MAJOR:
        raise EnvError(f"{backports} carries mesa-vulkan-drivers {best}; Dawn needs Mesa >= {MESA_MIN_MAJOR}")
    say(f"lavapipe: downloading mesa-vulkan-drivers {best} and what the system lacks for it")
    _run(["apt-get", *opts, "-y", "--download-only", "--no-install-recommends", "install",
          f"mesa-vulkan-drivers/{backports}", "libvulkan1"], "apt-get --download-only")
    root = target / "root"
    debs = sorted((apt_dir / "cache" / "archives").glob("*.deb"))
    say(f"lavapipe: unpacking {len(debs)} package(s) into {root}")
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(root)], f"dpkg-deb -x {deb.name}")
    icds = sorted(root.glob("usr/share/vulkan/icd.d/lvp_icd*.json"))
    libs = sorted(root.glob("usr/lib/*/libvulkan_lvp.so"))
    if not icds or not libs:
        raise EnvError(f"mesa-vulkan-drivers {best} holds no lavapipe ICD (lvp_icd*.json, libvulkan_lvp.so)")
    data = json.loads(icds[0].read_text())
    data["ICD"]["library_path"] = str(libs[0].resolve())
    icd.write_text(json.dumps(data, indent=2) + "\n")
    return icd, libs[0].resolve().parent


# --------------------------------------------------------------------------- the whole thing
def _wrapper(path: Path, python: Path, env: Mapping[str, str]) -> None:
    """A POSIX shell script that sets the worker's variables and runs ``python``."""
    lines = ["#!/bin/sh", "# Written by `epaudit env create`: the WebGPU worker's interpreter."]
    for k, v in env.items():
        if k == "LD_LIBRARY_PATH":
            lines.append(f"LD_LIBRARY_PATH='{v}'${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}; export LD_LIBRARY_PATH")
        else:
            lines.append(f"{k}='{v}'; export {k}")
    lines.append(f"exec '{python}' \"$@\"")
    path.write_text("\n".join(lines) + "\n")
    path.chmod(0o755)


def create(kind: str, directory: str | os.PathLike = DEFAULT_DIR, *, package: str | None = None,
           say: Say = lambda _: None) -> EnvResult:
    """Create (or reuse) the environment for ``kind`` under ``directory`` and check its canary.

    Args:
        kind: a key of :data:`KINDS`.
        directory: parent of every environment; ``<directory>/<kind>`` is this one and
            ``<directory>/cache`` holds pip's downloads.
        package: pip requirement overriding the pinned one.
        say: progress lines (the CLI prints them to stderr).

    Returns:
        :class:`EnvResult`; ``live`` is False (with ORT's reason) when the EP does not
        start, e.g. Dawn rejecting the Vulkan driver.

    Raises:
        EnvError: a step failed (message names the step).
        KeyError: unknown ``kind``.
    """
    if kind == "ort":  # any onnxruntime release: its own module (epaudit/providers/releases.py)
        from .releases import create_release

        return create_release(directory, package, say=say)
    spec = KINDS[kind]
    base = Path(directory).resolve()
    target = base / kind
    target.mkdir(parents=True, exist_ok=True)
    venv_python = ensure_venv(target / "venv", package or spec.package, base / "cache" / "pip", say)
    worker_env: dict[str, str] = {}
    python = venv_python
    if spec.mesa:
        icd, lib_dir = ensure_lavapipe(target / "mesa", say)
        worker_env = {"VK_ICD_FILENAMES": str(icd), "LD_LIBRARY_PATH": str(lib_dir)}
        python = target / "python"
        _wrapper(python, venv_python, worker_env)
    export_file = target / "export.sh"
    export_file.write_text(f"export {spec.variable}='{python}'\n")
    say(f"canary: starting a worker under {python}")
    status = _canary(spec, str(python))
    return EnvResult(kind, str(python), spec.variable, str(export_file), worker_env,
                     status.distribution, status.live, status.reason)


def _canary(spec: EnvKind, python: str):
    """Run the shipped matrix's provider for ``spec`` under ``python`` (canary only)."""
    from ..matrix.load import load
    from ..run.canary import inspect_provider

    provider = load(None, environ={**os.environ, spec.variable: python}).providers[spec.alias]
    return inspect_provider(provider)
