"""Signed results: an HMAC-SHA256 over a saved report's canonical JSON.

A results file is plain JSON anyone with write access to the CI artifacts can edit. Where
the pipeline wants more than the re-derivation of outcomes from evidence (which an edit of
the evidence itself could still satisfy), the runner that probes signs its report with a
secret key and the gate job verifies it (``[gate] require_signed = true``: unsigned or
badly signed files are refused). Python's :mod:`hmac` and :mod:`hashlib`, nothing else.

The key: ``$EPAUDIT_RESULTS_KEY`` (its text, UTF-8), or a file named by ``--results-key-file``
(its bytes, surrounding whitespace stripped); at least :data:`MIN_KEY_BYTES` bytes. An
empty variable is no key (what a CI system's secret store gives a job that may not see the
secret, such as a pull request from a fork): the writer then signs nothing and a gate that
requires signatures refuses what it is given (docs/ci-and-fleet.md).

The signature is the report's ``"signature"`` object, ``{"alg": "HMAC-SHA256", "value":
<64 hex digits>}``, over :func:`canonical` of the report without it: keys sorted, no
whitespace, UTF-8, numbers as Python writes them. Any change of any value, key or number
changes it; whitespace, key order and indentation do not.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from typing import Any, Mapping

#: The report key holding the signature.
FIELD = "signature"
#: The one algorithm: HMAC with SHA-256 (RFC 2104, FIPS 180-4).
ALG = "HMAC-SHA256"
#: Shorter keys are refused: 16 bytes is 128 bits of a random key (``openssl rand -hex 32`` gives 64 characters).
MIN_KEY_BYTES = 16
#: The environment variable holding the key.
ENV = "EPAUDIT_RESULTS_KEY"
#: A key file larger than this is not a key, bytes.
MAX_KEY_FILE = 64 * 1024


class ResultsKeyError(ValueError):
    """The key cannot be had; ``str()`` is one line naming the variable or file."""


def canonical(doc: Mapping[str, Any]) -> bytes:
    """The bytes a signature covers: ``doc`` without :data:`FIELD`, as sorted compact JSON.

    Raises:
        ValueError: a non-finite float (never in a report that was read or written).
    """
    return canonical_value({k: v for k, v in doc.items() if k != FIELD})


def canonical_value(x: Any) -> bytes:
    """One value as :func:`canonical` writes it inside a document (keys sorted, compact, UTF-8)."""
    return json.dumps(x, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8", "surrogatepass")


class StreamSigner:
    """The signature of a report whose ``list_key`` member (a run's ``results``) is given one
    item at a time, so a streamed report (:func:`epaudit.report.json.write`) is signed
    without holding that list: the same HMAC as :func:`signature` of the whole report, over
    the same bytes (:func:`canonical`, which json writes member by member, keys sorted, the
    same for a part as for the whole).

    Args:
        rest: every other member of the report (plain JSON data; :data:`FIELD` is left out).
        list_key: the member given by :meth:`add`.
        key: the results key.

    Call :meth:`add` for each item, in order, then :meth:`signature`.
    """

    def __init__(self, rest: Mapping[str, Any], list_key: str, key: bytes):
        body = {k: v for k, v in rest.items() if k not in (FIELD, list_key)}
        before = sorted(k for k in body if k < list_key)
        self._after = [(k, body[k]) for k in sorted(k for k in body if k > list_key)]
        self._mac = hmac.new(key, b"{", hashlib.sha256)
        for k in before:
            self._mac.update(canonical_value(k) + b":" + canonical_value(body[k]) + b",")
        self._mac.update(canonical_value(list_key) + b":[")
        self._first = True

    def add(self, item: Any) -> None:
        """The next item of the list (plain JSON data)."""
        self._mac.update((b"" if self._first else b",") + canonical_value(item))
        self._first = False

    def update_raw(self, chunk: bytes) -> None:
        """Bytes of the list's canonical text between its brackets (items as
        :func:`canonical_value` writes them, separated by ``,``), e.g. read back from a spool
        file; instead of :meth:`add`, never mixed with it."""
        if chunk:
            self._mac.update(chunk)
            self._first = False

    def signature(self) -> dict:
        """The :data:`FIELD` value (after the last :meth:`add`)."""
        mac = self._mac.copy()
        mac.update(b"]" + b"".join(b"," + canonical_value(k) + b":" + canonical_value(v) for k, v in self._after) + b"}")
        return {"alg": ALG, "value": mac.hexdigest()}


def signature(doc: Mapping[str, Any], key: bytes) -> dict:
    """The :data:`FIELD` value for ``doc`` under ``key``."""
    return {"alg": ALG, "value": hmac.new(key, canonical(doc), hashlib.sha256).hexdigest()}


def sign(doc: dict, key: bytes | None) -> dict:
    """``doc`` with its signature (a new dict; ``doc`` itself unchanged); unsigned when ``key`` is ``None``."""
    out = {k: v for k, v in doc.items() if k != FIELD}
    if key is not None:
        out[FIELD] = signature(out, key)
    return out


def verify(doc: Mapping[str, Any], key: bytes, signer: StreamSigner | None = None) -> str:
    """What is wrong with ``doc``'s signature under ``key``, in words; ``""`` when it is good.

    ``signer``: the document's signature computed as it was read (a report read one cell at a
    time, :mod:`epaudit.saved.stream`; ``doc`` is then the report without its list), in place
    of :func:`signature` of ``doc``. Compares in constant time (:func:`hmac.compare_digest`).
    """
    sig = doc.get(FIELD)
    if sig is None:
        return "unsigned"
    if not isinstance(sig, Mapping) or sig.get("alg") != ALG or not isinstance(sig.get("value"), str):
        return f"signature is not {{\"alg\": \"{ALG}\", \"value\": …}}"
    want = (signer.signature() if signer is not None else signature(doc, key))["value"]
    if not hmac.compare_digest(want, sig["value"]):
        return "signature does not match: the file was changed after it was signed, or signed with another key"
    return ""


def load_key(key_file: str | None = None, environ: Mapping[str, str] | None = None) -> bytes | None:
    """The results key: ``key_file``'s bytes when given, else ``$EPAUDIT_RESULTS_KEY``; ``None``
    when neither is set (or the variable is empty).

    Raises:
        ResultsKeyError: the file cannot be read, is not a regular file or is too large, or the
            key is shorter than :data:`MIN_KEY_BYTES`.
    """
    environ = os.environ if environ is None else environ
    if key_file is not None:
        where = f"--results-key-file {key_file}"
        import stat

        try:  # without blocking: a FIFO named as the key must not hang the run
            fd = os.open(key_file, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError as exc:
            raise ResultsKeyError(f"{where}: cannot read: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ResultsKeyError(f"{where}: not a regular file")
            with os.fdopen(fd, "rb", closefd=False) as fh:
                raw = fh.read(MAX_KEY_FILE + 1)
        except OSError as exc:
            raise ResultsKeyError(f"{where}: cannot read: {exc.strerror or exc}") from None
        finally:
            os.close(fd)
        if len(raw) > MAX_KEY_FILE:
            raise ResultsKeyError(f"{where}: over {MAX_KEY_FILE // 1024} KiB: not a key")
        key = raw.strip()
    else:
        value = environ.get(ENV, "")
        if not value:
            return None
        where = f"${ENV}"
        key = value.strip().encode("utf-8", "surrogateescape")
    if len(key) < MIN_KEY_BYTES:
        raise ResultsKeyError(f"{where}: {len(key)} byte(s); a results key needs at least {MIN_KEY_BYTES} "
                        "(e.g. `openssl rand -hex 32`)")
    return key
