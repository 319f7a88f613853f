"""The worker's request loop: announce ``hello``, answer ``canary`` and ``probe``, die with the parent.

Replies go to the reply descriptor the parent passes (stdout is joined to stderr, so
whatever ORT or Python prints cannot corrupt a reply); each reply carries the span of stderr
its request wrote (:mod:`.protocol`).
"""

from __future__ import annotations

import os
import sys
import time

import numpy as np

from . import ortinfo
from .ortinfo import _distribution, hello
from .plugins import _REGISTERED, PluginError, describe_device, plugin_devices
from .protocol import CANARY_MODEL, CASE_MARKER, CPU, encode, read_message
from .sessions import _session_options, run_case


def _plugin(req: dict) -> dict | None:
    return {"library": req["library"], "device": req.get("device")} if req.get("library") else None


def canary(req: dict) -> dict:
    """Is ``req['provider']`` live? Its canary node must be placed on it and compute right."""
    case = {"role": "canary", "model": req["model"], "feeds": req["feeds"], "node": "canary",
            "outputs": list(req["expected"])}
    plugin = _plugin(req)
    if plugin is None and req["provider"] not in ortinfo.ort.get_available_providers():
        # ORT would warn and hand back a CPU session: say why before that happens.
        known = [d.ep_name for d in getattr(ortinfo.ort, "get_ep_devices", list)()]
        return {"live": False, "placement": None, "library_path": "", "selected": [],
                "not_a_provider": req["provider"] not in ortinfo.ort.get_all_providers(),
                "not_available": True,
                "reason": f"{req['provider']} is not a provider of {_distribution()} "
                          f"(available: {', '.join(ortinfo.ort.get_available_providers())}; devices: "
                          f"{', '.join(known) or 'none'}); a plugin EP selected by name alone "
                          "runs on CPU: name its library in the matrix (library = "
                          "\"module:function\" or a path)"}
    selected: list[str] = []
    if plugin is not None:
        try:
            selected = [describe_device(d) for d in
                        plugin_devices(req["provider"], plugin["library"], plugin["device"])]
        except PluginError as exc:
            return {"live": False, "reason": str(exc), "placement": None, "library_path": "",
                    "selected": [], "misconfigured": exc.config}
    res = run_case(req["provider"], req.get("options") or {}, case, None, plugin=plugin)
    facts = {"library_path": _REGISTERED.get(req["provider"], ""), "selected": selected}
    if not res["ok"]:
        return {"live": False, "reason": res["error"]["message"] if res["error"] else "failed",
                "placement": res["placement"], **facts}
    on = {p["name"]: p["ep"] for p in res["placement"] or []}
    if on.get("canary") != req["provider"]:
        return {"live": False, "placement": res["placement"], **facts,
                "reason": f"ORT placed the canary node on {on.get('canary', 'no EP')}, not on "
                          f"{req['provider']} (session providers {res.get('session_providers')})"}
    for name, want in req["expected"].items():
        got = res["outputs"].get(name)
        if got is None or got.shape != want.shape or not np.allclose(got, want):
            return {"live": False, "placement": res["placement"], **facts,
                    "reason": f"canary output {name} was {got!r}, expected {want!r}"}
    return {"live": True, "reason": "", "placement": res["placement"], **facts}


def probe(req: dict) -> dict:
    """Run every case of a ``probe`` request on its EP (see :func:`run_case`), in order,
    each announced on stderr (:data:`~.protocol.CASE_MARKER`) before it starts."""
    fault = req.get("fault")
    cases = []
    for c in req["cases"]:
        sys.stderr.write(f"\n{CASE_MARKER}{req.get('case_token', '')} {c['role']}\n")
        sys.stderr.flush()
        cases.append(run_case(req["provider"], req.get("options") or {}, c, fault,
                              req.get("fault_args"), _plugin(req), bool(req.get("profile"))))
    return {"cases": cases}


def _stderr_position() -> int | None:
    """Bytes written so far to fd 2 (a file the parent opened for it), or ``None`` when fd 2
    is not a seekable file. Python's own ``sys.stderr`` is flushed first."""
    try:
        sys.stderr.flush()
        return os.lseek(2, 0, os.SEEK_CUR)
    except (OSError, ValueError):
        return None


def _answer(out, handler, req) -> None:
    """Run ``handler(req)`` and write its reply frame, with the stderr span it produced."""
    start = _stderr_position()
    try:
        reply = {"ok": True, "result": handler(req)}
    except Exception as exc:  # noqa: BLE001 - a worker bug, reported as ERROR
        import traceback
        reply = {"ok": False, "error": traceback.format_exc(), "type": type(exc).__name__}
    reply["stderr"] = [start, _stderr_position()]
    reply["seq"] = req.get("seq")
    out.write(encode(reply))


def main(reply_fd: int | None = None) -> int:
    """Warm up, announce :func:`hello`, then serve framed requests from stdin until
    ``exit`` or end of input; returns 0.

    Replies go to ``reply_fd`` (the parent's start-up line gives one, with stdout already
    joined to stderr), else to the real stdout, which is then moved onto stderr: anything
    ORT or Python prints lands in the stderr log, never in the reply stream.

    The first frame the worker writes, unasked, is the ``hello`` reply: the parent reads it
    when it needs it, so the facts are gathered while the parent is still starting. Before
    it, one CPU session of :data:`CANARY_MODEL` is created and run (:func:`_warm_up`), so
    that ORT's one-time set-up and anything it prints precede every request. Every
    reply carries ``stderr: [start, end]``, the byte offsets of fd 2 before and after the
    request: the parent reads what a request printed even when the next one is already
    queued (``[null, null]`` when fd 2 is not a file).

    onnxruntime is imported here (:func:`.ortinfo.share_thread_pool` loads it), not at module level, so the parent can
    import the worker's modules for the framing helpers without loading onnxruntime.
    """
    if reply_fd is None:
        reply_fd = os.dup(1)
        os.dup2(2, 1)
    proto_out = os.fdopen(reply_fd, "wb", buffering=0)
    sys.stdout = sys.stderr
    orphaned = _watch_parent()  # before the imports: a parent may die while we start
    ortinfo.share_thread_pool()  # imports onnxruntime; before any session is made

    proto_in = sys.stdin.buffer
    handlers = {"hello": lambda r: hello(), "canary": canary, "probe": probe}
    _warm_up()
    try:
        _answer(proto_out, handlers["hello"], {})
    except BrokenPipeError:  # the parent is gone already
        orphaned(5.0)
        return 0
    while True:
        try:
            req = read_message(proto_in)
        except EOFError:
            # The parent kills its workers; an end of input it did not follow with a kill
            # is its death (its descriptors close just before we are reparented).
            orphaned(5.0)
            return 0
        op = req.get("op")
        if op == "exit":
            return 0
        try:
            _answer(proto_out, handlers.get(op, _unknown), req)
        except BrokenPipeError:  # nobody reads the replies any more: the parent is gone
            orphaned(5.0)
            return 0


#: Seconds between two looks at the parent (:func:`_watch_parent`).
PARENT_POLL = 0.25


def _watch_parent():
    """Die with the parent: a thread that, once the parent that started this worker is
    gone (a SIGKILL, the OOM killer, a CI hard kill: the worker is reparented), removes
    the worker's own temp directory and exits at once, even while the main thread hangs
    in a probe (ORT releases the GIL while it runs; the ``hang`` fault sleeps).

    The directory is removed only when it is the one the parent made for this worker
    (the current directory, named ``epaudit-worker-*``). Source: issue 12 ("Orphans").

    Returns:
        ``orphaned(wait)``: for the main thread when its input ends or its replies find
        no reader. It waits up to ``wait`` seconds for the reparenting that follows the
        parent's death and, if it came, removes the directory itself (the watch thread
        may not get scheduled before the interpreter exits).
    """
    import shutil
    import threading

    # The pid the parent recorded when it started us: if it is gone already (reparented
    # before this line ran), getppid() differs at the first look.
    parent = int(os.environ.get("EPAUDIT_PARENT_PID") or os.getppid())
    home = os.getcwd()
    mine = os.path.basename(home).startswith("epaudit-worker-")

    def clean() -> None:
        if mine:
            shutil.rmtree(home, ignore_errors=True)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL)
        clean()
        os._exit(0)

    def orphaned(wait: float) -> bool:
        deadline = time.monotonic() + wait
        while os.getppid() == parent:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
        clean()
        return True

    threading.Thread(target=watch, name="epaudit-parent-watch", daemon=True).start()
    return orphaned


def _warm_up() -> None:
    """Create and run one CPU session of :data:`CANARY_MODEL`, typically while the parent
    is still starting: ORT's one-time set-up (environment, CPU kernel registry,
    allocators) then costs nothing on the canary's clock. Any failure is left for the
    canary to meet."""
    try:
        so = _session_options(False, None)  # the probes' options: the shared pool among them
        sess = ortinfo.ort.InferenceSession(CANARY_MODEL, so, providers=[CPU])
        a = np.zeros((2, 3), dtype=np.float32)
        sess.run(None, {"a": a, "b": a})
    except Exception:  # noqa: BLE001
        pass


def _unknown(req: dict):
    raise ValueError(f"unknown request op {req.get('op')!r}")


if __name__ == "__main__":
    sys.exit(main())
