"""What the worker runs on: the onnxruntime it imported, its distribution, devices and build.

:data:`ort` is the ``onnxruntime`` module once :func:`load` imported it: the parent imports
the worker's modules for the framing and the poison helpers only, and importing ORT there
would cost it a quarter of a second and write ORT's files into the parent's temp directory.
Every module of the worker reaches ORT as ``ortinfo.ort``.
"""

from __future__ import annotations

import os
import platform
import sys

#: ``onnxruntime``, imported by :func:`load` (in the worker process only).
ort = None

#: Whether this process's sessions share ORT's global intra-op thread pool
#: (:func:`share_thread_pool`); ``False`` before that call, in any other process, and
#: where ORT made none.
SHARED_POOL = False

#: The thread ids of that pool (Linux), each moved to ``SCHED_IDLE`` where the OS allows.
POOL_THREADS: frozenset = frozenset()


def load():
    """Import ``onnxruntime`` (once) and return it; every module of the worker then reaches
    it as ``ortinfo.ort``."""
    global ort
    if ort is None:
        import onnxruntime

        ort = onnxruntime
    return ort


def share_thread_pool() -> bool:
    """In the worker process only, before its first session: make the one intra-op pool its
    sessions share (:func:`_share_thread_pool`); sets :data:`SHARED_POOL` and
    :data:`POOL_THREADS` and returns :data:`SHARED_POOL`.

    Once ORT has global pools, every session of the process must say
    ``use_per_session_threads = False`` (ORT refuses the others: "use_per_session_threads
    must be false when using a global thread pool"), so a process that makes sessions of
    its own (a test importing the worker's modules) must not call this."""
    global SHARED_POOL, POOL_THREADS
    load()
    if not SHARED_POOL:
        POOL_THREADS = _share_thread_pool()
        SHARED_POOL = bool(POOL_THREADS)
    return SHARED_POOL


def _share_thread_pool() -> frozenset:
    """Create ORT's environment with one global intra-op thread pool of ORT's default size
    (``thread_pool_size = 0``: what a session's own pool gets, one thread per physical
    core) and no inter-op pool (size 1; sessions run sequentially), so that every session
    of this worker runs its kernels on it (``use_per_session_threads = False``) instead of
    starting and joining a pool of its own: that was about half of what ORT spent on a
    one-node probe (docs/performance.md, "One intra-op pool per worker"). The kernels see
    a pool of the same size, so they split their work as in a user's session.

    The global pool spins while idle (the Python API cannot turn that off, and
    ``session.intra_op.allow_spinning`` and ``session.force_spinning_stop`` act on
    per-session pools only: ORT ``inference_session.cc``), on the core the parent
    classifies on; so its threads are moved to ``SCHED_IDLE`` (Linux): they run whenever
    a core is free and give it up to any other thread at once. A kernel's parallel loop
    loses nothing by it: the calling thread claims whatever share a pool thread has not
    started (ORT's ``ThreadPool::RunInParallel``).

    Source: ``set_global_thread_pool_sizes`` in ORT's ``onnxruntime_pybind_state.cc``.
    Where the pools were set already (a second call), onnxruntime 1.31.1 makes no thread
    and says nothing (measured: ``tests/test_thread_pool.py``), and where no pool exists a
    session without its own runs with none; so the pool counts as made only when its
    threads appeared (``/proc/self/task``).

    Returns:
        the ids of the pool's threads; empty where ORT has no such call, refused it, made
        no thread (pools set before, one core, a platform without ``/proc``): sessions
        then keep their own pools, as before.
    """
    before = _threads()
    try:
        from onnxruntime.capi import _pybind_state

        _pybind_state.set_global_thread_pool_sizes(0, 1)
    except Exception:  # noqa: BLE001 - an older or unusual build: per-session pools
        return frozenset()
    pool = frozenset(_threads() - before) if before else frozenset()
    for tid in pool:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):  # no SCHED_IDLE here: the pool spins as ORT made it
            pass
    return pool


def _threads() -> set[int]:
    """Ids of this process's threads (Linux ``/proc/self/task``); empty where unknown."""
    try:
        return {int(t) for t in os.listdir("/proc/self/task")}
    except OSError:
        return set()


# --------------------------------------------------------------------------- ORT facts
def _dist_info_near() -> str | None:
    """``Name Version`` from the ``*.dist-info`` folder beside the imported ``onnxruntime``
    package whose RECORD lists that package's files, read as the files they are
    (core metadata ``Name:``/``Version:`` headers; RECORD rows ``path,hash,size``, PEP 376);
    ``None`` when there is no such folder."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(ort.__file__)))
    try:
        names = sorted(n for n in os.listdir(site) if n.endswith(".dist-info")
                       and n.lower().startswith(("onnxruntime", "ort_nightly", "ort-nightly")))
    except OSError:
        return None
    for n in names:
        folder = os.path.join(site, n)
        try:
            with open(os.path.join(folder, "RECORD"), encoding="utf-8") as fh:
                if not any(line.startswith("onnxruntime/") for line in fh):
                    continue
            with open(os.path.join(folder, "METADATA"), encoding="utf-8") as fh:
                head = {}
                for line in fh:
                    if not line.strip():
                        break  # the headers end at the first empty line
                    key, sep, value = line.partition(":")
                    if sep:
                        head.setdefault(key.strip().lower(), value.strip())
        except OSError:
            continue
        if head.get("name") and head.get("version"):
            return f"{head['name']} {head['version']}"
    return None


def _distribution() -> str:
    """Name and version of the installed onnxruntime distribution (``onnxruntime-gpu 1.31.1``):
    the one whose RECORD lists the ``onnxruntime/`` package this process imported.

    The dist-info folders beside that package are read first (:func:`_dist_info_near`):
    ``importlib.metadata`` costs ~70 ms to import and scan, on every worker start; it
    remains for layouts without them."""
    near = _dist_info_near()
    if near is not None:
        return near
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return "unknown"
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        if name.startswith("onnxruntime") or name.startswith("ort-nightly"):
            try:
                files = dist.files or []
            except Exception:  # pragma: no cover
                files = []
            if any(str(f).startswith("onnxruntime/") for f in files):
                return f"{dist.metadata['Name']} {dist.version}"
    return "unknown"


def _devices() -> list[dict]:
    """Devices ORT really found (``get_ep_devices``), which, unlike the provider list, exist."""
    out = []
    get = getattr(ort, "get_ep_devices", None)
    if get is None:
        return out
    try:
        for d in get():
            hw = d.device
            out.append({
                "ep": d.ep_name,
                "type": str(getattr(hw, "type", "")).split(".")[-1],
                "vendor": getattr(hw, "vendor", "") or getattr(d, "ep_vendor", ""),
                "metadata": dict(getattr(hw, "metadata", {}) or {}),
            })
    except Exception as exc:  # noqa: BLE001 - facts only, never fatal
        out.append({"error": str(exc)})
    return out


def _build() -> dict:
    """The onnxruntime build's own facts: package, version, CUDA/cuDNN it was built for.

    ``onnxruntime/capi/build_and_package_info.py`` is written by ORT's ``setup.py``;
    GPU wheels carry ``cuda_version`` (and ``cudnn_version`` in some releases). Facts
    only: anything missing is left out, never fatal.
    """
    out = {"build_info": str(getattr(ort, "get_build_info", lambda: "")())}
    try:
        from onnxruntime.capi import build_and_package_info as info
    except Exception:  # noqa: BLE001 - an older or unusual build: fewer facts
        return out
    for key, attr in (("package", "package_name"), ("version", "__version__"),
                      ("cuda_version", "cuda_version"), ("cudnn_version", "cudnn_version")):
        value = getattr(info, attr, None)
        if value:
            out[key] = str(value)
    return out


def hello() -> dict:
    """What this worker runs on: interpreter, platform, onnxruntime version, file and
    distribution, available providers, devices ORT found, build facts (the ``hello`` reply)."""
    return {
        "python": sys.executable,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "ort_version": ort.__version__,
        "ort_file": ort.__file__,
        "distribution": _distribution(),
        "providers": list(ort.get_available_providers()),
        "devices": _devices(),
        "build_info": getattr(ort, "get_build_info", lambda: "")(),
        "build": _build(),
        "plugin_api": hasattr(ort, "register_execution_provider_library")
        and hasattr(ort.SessionOptions, "add_provider_for_devices"),
    }
