"""An EP's surface: its registered kernels joined with its onnxruntime's operator schemas.

The kernels and schemas are read by ``registry.py`` in the EP's own interpreter, in a
throw-away process (a segfault there is a reason here, never a crash of epaudit), and
cached per (interpreter, onnxruntime build) under the probe cache directory: a warm
answer costs one interpreter start (~30 ms), a cold one an onnxruntime import (~0.5 s).

A *surface item* is one of operator x opset x (each type the EP's kernel takes for the
operator's first input, each optional input, each attribute), where "opset" is the
``since_version`` of a schema version some registered kernel of the EP serves by ORT's
own matching rule (:func:`serves`; docs/outcomes-and-gates.md "Words": Surface).
Only the ONNX and ``com.microsoft`` domains are on the surface.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from ..matrix.model import Provider

REGISTRY_PATH = os.path.join(os.path.dirname(os.path.realpath(__file__)), "registry.py")
#: Loads ``registry.py`` by path, with the current directory dropped from ``sys.path``
#: (as the worker's bootstrap, ``spawn.BOOTSTRAP``): argv ``registry.py REQUEST OUT``.
BOOTSTRAP = (
    "import sys\n"
    "if sys.path and sys.path[0] == '':\n"
    "    del sys.path[0]\n"
    "import importlib.util as u\n"
    "s = u.spec_from_file_location('epaudit_registry', sys.argv[1])\n"
    "m = u.module_from_spec(s)\n"
    "s.loader.exec_module(m)\n"
    "sys.exit(m.main(sys.argv[2:]))\n"
)
#: Seconds a registry query may take (an onnxruntime import plus two queries: ~0.5 s).
TIMEOUT = 120.0
#: Kernel type names: ``Feature.dtype`` (numpy's names) -> ONNX's ``tensor(...)`` names.
_ONNX_NAMES = {"float32": "float", "float64": "double"}

_memo: dict[tuple, "Registry"] = {}
_memo_lock = threading.Lock()


def onnx_type(dtype: str) -> str:
    """``float32`` -> ``tensor(float)``, ``float16`` -> ``tensor(float16)``, ``bool`` -> ``tensor(bool)``."""
    return f"tensor({_ONNX_NAMES.get(dtype, dtype)})"


def operator_name(domain: str, op_type: str) -> str:
    """``ai.onnx.Abs`` / ``com.microsoft.GroupQueryAttention`` (as :attr:`Feature.operator`)."""
    return f"{domain or 'ai.onnx'}.{op_type}"


@dataclass(frozen=True)
class Registry:
    """What one EP registers, as its own onnxruntime says (``registry.py``'s answer).

    Attributes:
        alias: matrix alias.
        provider: ORT provider name.
        status: ``kernels``; ``none`` (a query that covers the EP lists no kernel: a
            compiling EP); ``unknown`` (no query could read it: ``reason``).
        reason: why ``none`` or ``unknown``, in ORT's words where it gave some.
        method: the query that answered (``get_registered_ep_kernel_defs`` or
            ``get_all_opkernel_def``), or ``""``.
        distribution: onnxruntime distribution and version (``onnxruntime-gpu 1.31.1``).
        kernels: ``(domain, op_type, since, until, {param: (type, ..)})`` per kernel.
        schemas: ``(domain, name, since, deprecated, param, optional inputs, attributes,
            types the param allows)`` (the last empty when the param is not constrained).
        seconds: wall time of the query (the throw-away process), seconds.
        cached: the answer came from the cache.
    """

    alias: str
    """Matrix alias."""
    provider: str
    """ORT provider name."""
    status: str
    """kernels / none / unknown."""
    reason: str = ""
    """Why none or unknown."""
    method: str = ""
    """The query that answered."""
    distribution: str = ""
    """onnxruntime distribution."""
    kernels: tuple = ()
    """(domain, op_type, since, until, {param: types})."""
    schemas: tuple = ()
    """(domain, name, since, deprecated, param, optional, attributes)."""
    seconds: float = 0.0
    """Query wall time, s."""
    cached: bool = False
    """Answered from the cache."""
    _index: dict = field(default_factory=dict, repr=False, compare=False)

    def kernels_of(self, domain: str, op_type: str) -> list:
        """Kernels of ``domain``/``op_type`` (``""`` is ai.onnx)."""
        idx = self._index.get("kernels")
        if idx is None:
            idx = {}
            for k in self.kernels:
                idx.setdefault((k[0], k[1]), []).append(k)
            self._index["kernels"] = idx
        return idx.get((_domain(domain), op_type), [])

    def versions(self, domain: str, op_type: str) -> list:
        """Schema versions of ``domain``/``op_type``, by ``since`` ascending (duplicates dropped)."""
        idx = self._index.get("schemas")
        if idx is None:
            idx = {}
            for s in self.schemas:
                bucket = idx.setdefault((s[0], s[1]), {})
                bucket.setdefault(s[2], s)
            idx = {k: [v[s] for s in sorted(v)] for k, v in idx.items()}
            self._index["schemas"] = idx
        return idx.get((_domain(domain), op_type), [])

    def schema_at(self, domain: str, op_type: str, opset: int):
        """The schema version in effect at ``opset`` (largest ``since`` <= opset), or ``None``."""
        best = None
        for s in self.versions(domain, op_type):
            if s[2] <= opset:
                best = s
        return best

    def types(self, kernel, param: str) -> set[str]:
        """The types ``kernel`` takes for type parameter ``param``; every type it names when
        it does not constrain ``param`` (a kernel constrained by other names)."""
        constraints = kernel[4]
        if param in constraints:
            return set(constraints[param])
        return {t for ts in constraints.values() for t in ts}

    def registers(self, domain: str, op_type: str, opset: int, dtype: str) -> bool | None:
        """Is there a kernel ORT would pick for a node of the operator at ``opset`` whose
        float type is ``dtype``? (:func:`serves` on the schema version in effect there.)
        ``dtype`` is the feature's float type, which is not always the first input's: a
        ``GatherBlockQuantized`` node's first input is its uint8/int4 ``data`` (``T1``) and
        its float type is ``T2``; so any type parameter of the kernel that takes ``dtype``
        counts. ``None`` when the registry is not ``kernels`` (not known, or a compiling EP)."""
        if self.status != "kernels":
            return None
        schema = self.schema_at(domain, op_type, opset)
        if schema is None:
            return False
        want = onnx_type(dtype)
        # a sequence or optional kernel lists its element type wrapped: seq(tensor(float))
        wants = {want, f"seq({want})", f"optional({want})", f"optional(seq({want}))"}
        return any(serves(k, schema[2]) and (not k[4] or any(wants.intersection(ts) for ts in k[4].values()))
                   for k in self.kernels_of(domain, op_type))


#: ``version_range`` end of a kernel registered without an end ("since N").
OPEN = 2**31 - 1


def serves(kernel, since: int) -> bool:
    """Does ``kernel`` (its ``since``, ``until``) serve nodes whose schema version is ``since``?

    ORT's own rule (``onnxruntime/core/framework/kernel_registry.cc``, ``VerifyKernelDef``):
    the kernel's start equals the node's schema ``since_version``, or the kernel is
    versioned (an end other than INT_MAX) and its range holds it. An open-ended kernel
    ("since 24", listed as 24..INT_MAX) therefore serves schema version 24 only, not a
    later version 25: the registry's range reads wider than what ORT will run.
    """
    start, end = kernel[2], kernel[3]
    return start == since or (start < since and end != OPEN and end >= since)


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def cache_dir(base: str | os.PathLike | None) -> str | None:
    """Where registry answers are cached: ``<probe cache dir>/surface`` (made private when
    missing); ``None``: no cache, or one owned or writable by someone else (one warning;
    :mod:`epaudit.cache.trust`)."""
    if base is None:
        return None
    from ..cache.trust import makedirs_private, trusted_dir

    folder = Path(base) / "surface"
    if not trusted_dir(folder, "EP registries are read now and not stored"):
        return None
    try:
        makedirs_private(folder)
    except OSError:
        pass
    return str(folder)


def fetch(provider: Provider, cache: str | None, timeout: float = TIMEOUT) -> Registry:
    """The registry of ``provider``, read in its own interpreter in a throw-away process.

    Answers are memoized per process (interpreter, environment, provider, library) and
    cached on disk per onnxruntime build (``cache``: a folder, or ``None``). Never raises:
    an interpreter that does not start, a crash (signal) or a hang is a ``Registry`` of
    status ``unknown`` whose ``reason`` says so (and in which call it crashed).
    """
    if provider.start_timeout is not None:  # the provider's own start-up limit bounds its query too
        timeout = min(timeout, max(provider.start_timeout, 1.0))
    if provider.unavailable:
        return Registry(provider.alias, provider.name, "unknown", reason=provider.unavailable)
    python = provider.python or sys.executable
    key = (python, tuple(sorted(provider.env.items())), provider.name, provider.library or "",
           tuple(sorted(provider.device.items())), cache or "")
    with _memo_lock:
        hit = _memo.get(key)
    if hit is not None:
        return dataclasses.replace(hit, alias=provider.alias, seconds=0.0, cached=True)
    t0 = time.perf_counter()
    doc = _cached_here(python, provider, cache)
    reason = ""
    if doc is None:
        doc, reason = _run(python, provider, cache, timeout)
    seconds = time.perf_counter() - t0
    if doc is None:
        return Registry(provider.alias, provider.name, "unknown", reason=reason, seconds=seconds)
    reg = Registry(provider.alias, provider.name, doc.get("status", "unknown"), reason=doc.get("reason", ""),
                   method=doc.get("method", ""), distribution=doc.get("distribution", ""),
                   kernels=tuple((k[0], k[1], k[2], k[3], {p: tuple(t) for p, t in k[4].items()})
                                 for k in doc.get("kernels", ())),
                   schemas=tuple((s[0], s[1], s[2], s[3], s[4], tuple(s[5]), tuple(s[6]),
                                  tuple(s[7]) if len(s) > 7 else ())
                                 for s in doc.get("schemas", ())),
                   seconds=seconds, cached=bool(doc.get("_hit")))
    with _memo_lock:  # an answer (not a crash or a hang) holds for this process
        _memo[key] = reg
    return reg


def _cached_here(python: str, provider: Provider, cache: str | None) -> dict | None:
    """The cached answer, looked up without a child process when the EP runs under this
    very interpreter with no environment of its own (the fingerprint is then the same
    computed here: :func:`epaudit.surface.registry.fingerprint`); ``None`` otherwise or on a miss."""
    if not cache or provider.env or provider.library:
        return None
    try:
        if os.path.realpath(python) != os.path.realpath(sys.executable):
            return None
        from .registry import fingerprint

        path = os.path.join(cache, f"registry-{fingerprint(provider.name, None)}.json")
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return None
    doc["_hit"] = True
    return doc


def _run(python: str, provider: Provider, cache: str | None, timeout: float) -> tuple[dict | None, str]:
    """Run ``registry.py`` once; ``(answer, "")`` or ``(None, reason)``."""
    req = {"provider": provider.name, "library": provider.library, "device": dict(provider.device),
           "cache_dir": cache}
    env = dict(os.environ)
    env.update(provider.env)
    with tempfile.TemporaryDirectory(prefix="epaudit-registry-") as tmp:
        out = os.path.join(tmp, "answer.json")
        env.update({"TMPDIR": tmp, "TMP": tmp, "TEMP": tmp, **provider.env})
        try:
            proc = subprocess.Popen([python, "-c", BOOTSTRAP, REGISTRY_PATH, json.dumps(req), out],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, env=env, cwd=tmp, start_new_session=True)
        except OSError as exc:
            return None, f"cannot start interpreter {python!r}: {exc.strerror or exc}"
        _CHILDREN.add(proc)
        try:
            return _answer(proc, python, provider, out, timeout)
        finally:
            _CHILDREN.discard(proc)


#: Registry children running now (killed when the command is interrupted: they run in
#: sessions of their own, so a terminal's Ctrl-C never reaches them).
_CHILDREN: set = set()


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


def _answer(proc, python: str, provider: Provider, out: str, timeout: float) -> tuple[dict | None, str]:
    """Wait for one registry child and read what it answered."""
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        _, err = proc.communicate()
        return None, f"the registry query did not finish within {timeout:g} s under {python} (killed)"
    except BaseException:  # Ctrl-C, SIGTERM, SIGHUP: the child is in its own session, never left behind
        _kill(proc)
        proc.wait()
        raise
    text = err.decode("utf-8", "replace")
    if proc.returncode != 0:
        reason = _death(proc.returncode, text, python)
        _remember_crash(out, provider, reason)
        return None, reason
    try:
        with open(out, encoding="utf-8") as fh:
            doc = json.load(fh)
        if "hit" in doc:
            with open(doc["hit"], encoding="utf-8") as fh:
                doc = json.load(fh)
            doc["_hit"] = True
        elif "pending" in doc:  # exit status 0 without an answer: not ours to trust
            raise ValueError("the answer was never written")
    except (OSError, ValueError) as exc:
        return None, f"the registry query under {python} wrote no answer ({exc})"
    return doc, ""


def _remember_crash(out: str, provider: Provider, reason: str) -> None:
    """Record a crash as this build's cached answer (the child said where before it died),
    so that a crash that happens on every run (onnxruntime-openvino's
    ``get_all_opkernel_def``) costs one interpreter start on the next, not a crash."""
    from .registry import VERSION

    try:
        with open(out, encoding="utf-8") as fh:
            said = json.load(fh)
        path = said.get("pending")
        if not path:
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"version": VERSION, "fingerprint": said.get("fingerprint"), "provider": provider.name,
                       "status": "unknown", "method": "", "kernels": [], "schemas": [],
                       "reason": f"{reason} (recorded for this onnxruntime build on an earlier run)"}, fh)
        os.replace(tmp, path)
    except (OSError, ValueError, AttributeError):
        pass


def _death(code: int, stderr: str, python: str) -> str:
    """Why the throw-away process died: the signal and the onnxruntime call it was in."""
    from .registry import MARKER

    calls = [line[len(MARKER):].strip() for line in stderr.splitlines() if line.startswith(MARKER)]
    where = f" in {calls[-1]}" if calls else ""
    if code < 0:
        try:
            how = f"killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"killed by signal {-code}"
    else:
        how = f"exited with status {code}"
        tail = [line for line in stderr.strip().splitlines() if not line.startswith(MARKER)][-1:]
        if tail:
            how += f" ({tail[0][:300]})"
    return f"the registry query {how}{where} under {python}; the throw-away process contained it"


def fetch_all(providers: Iterable[Provider], cache: str | None,
              timeout: float = TIMEOUT) -> dict[str, Registry]:
    """:func:`fetch` for every provider, concurrently (one thread each); alias -> Registry."""
    providers = list(providers)
    out: dict[str, Registry] = {}
    threads = []
    for p in providers:
        def one(p=p):
            out[p.alias] = fetch(p, cache, timeout)
        t = threading.Thread(target=one, name=f"epaudit-registry-{p.alias}", daemon=True)
        t.start()
        threads.append(t)
    try:
        for t in threads:
            t.join()
    except BaseException:  # interrupted: no registry child outlives the command
        for proc in list(_CHILDREN):
            _kill(proc)
        raise
    return {p.alias: out[p.alias] for p in providers}


def registries_for(providers: Iterable[Provider], base_cache: str | os.PathLike | None) -> Mapping[str, Registry]:
    """Registries of ``providers`` with the surface cache under ``base_cache`` (the probe cache dir)."""
    return fetch_all(providers, cache_dir(base_cache))
