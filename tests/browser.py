"""A headless Chromium for the HTML report's tests and benchmark (stdlib only, no CDP).

Chromium from the distribution's packages (Debian: ``apt-get install chromium``) runs
headless with a fresh profile and everything that would reach the network turned off.
``--dump-dom`` prints the DOM after the page's scripts ran (at the load event);
``--screenshot`` writes a PNG of the viewport. A URL fragment drives the report's
filters (``epaudit/report/html_assets.py``), so no clicking is needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

#: Names Chromium is installed under (Debian's package, other distributions, Chrome).
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run",
         "--disable-default-apps", "--disable-extensions", "--mute-audio")


def find() -> str | None:
    """The Chromium executable (``$EPAUDIT_CHROMIUM`` first), or ``None`` when none is installed."""
    explicit = os.environ.get("EPAUDIT_CHROMIUM")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _run(args: list[str], timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    exe = find()
    if exe is None:
        raise FileNotFoundError("no Chromium installed (apt-get install chromium)")
    profile = tempfile.mkdtemp(prefix="epaudit-chromium-")
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)
        return proc, time.perf_counter() - t0
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def url(path: str | os.PathLike, fragment: str = "") -> str:
    """A ``file://`` URL of ``path`` with an optional ``#fragment``."""
    return Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")


def dump_dom(page: str, timeout: float = 120.0) -> tuple[str, float]:
    """The DOM of ``page`` (a URL) after its scripts ran, and the wall seconds Chromium took.

    Raises:
        FileNotFoundError: no Chromium.
        RuntimeError: Chromium exited non-zero (its last stderr lines in the message).
    """
    proc, seconds = _run(["--dump-dom", page], timeout)
    if proc.returncode != 0 or not proc.stdout.strip():
        raise RuntimeError(f"chromium --dump-dom exited {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return proc.stdout, seconds


def screenshot(page: str, png: str | os.PathLike, size: str = "1400,1000", timeout: float = 120.0) -> float:
    """Write a PNG of ``page`` (a URL) at window ``size``; returns the wall seconds.

    Raises:
        FileNotFoundError: no Chromium.
        RuntimeError: Chromium exited non-zero or wrote no file.
    """
    proc, seconds = _run([f"--window-size={size}", f"--screenshot={Path(png).resolve()}", page], timeout)
    if proc.returncode != 0 or not Path(png).is_file():
        raise RuntimeError(f"chromium --screenshot exited {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return seconds
