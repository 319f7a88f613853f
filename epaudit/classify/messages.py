"""ORT's error text as a person reads it: the sentence, not the C++ source location.

An ORT status raised by ``ORT_ENFORCE``/``ORT_THROW`` carries ``<file>:<line> <function
signature> <message>`` (``onnxruntime/core/common/common.h``, ``ORT_WHERE_WITH_STACK``):
``/onnxruntime_src/onnxruntime/core/graph/model_load_utils.h:46 void
onnxruntime::model_load_utils::ValidateOpsetForDomain(const std::unordered_map<…>&, …)
ONNX Runtime only *guarantees* … Current official support for domain ai.onnx is till
opset 21.`` A one-line summary cut at a fixed width then shows the signature and drops
the sentence that says why. :func:`ort_message` removes the location and the signature
(and the ``[ONNXRuntimeError] : 2 : INVALID_ARGUMENT :`` prefix, which the summary
already gives as the status); :func:`shorten` keeps the first and the last sentence
when the text is still too long. The JSON report keeps ORT's full text. :func:`kernel_paths`
reads the attention kernel a node ran from what ORT printed to stderr.
"""

from __future__ import annotations

import re

_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : [A-Z_]+ : ")
_PREFIX_ANYWHERE = re.compile(r"\[ONNXRuntimeError\] : \d+ : ([A-Z_]+) : ")
#: ``/path/file.h:46 `` (POSIX or Windows path, C/C++/CUDA sources).
_LOCATION = re.compile(r"(?:[A-Za-z]:)?[\\/][^\s:]*\.(?:h|hh|hpp|hxx|c|cc|cpp|cxx|cu|cuh|inc):\d+ ?")
#: What a signature holds before its parameter list: types, qualified names, templates.
_BEFORE_PARAMS = re.compile(r"^[\w:<>,*&~\s\[\]]*?(::|\b[A-Za-z_]\w*)\s*\(")
_QUALIFIERS = re.compile(r"^(\s*(const|noexcept|override|volatile|&&?))+")


def _skip_signature(text: str, start: int) -> int:
    """Index just past a C++ function signature beginning at ``start``, or ``start`` when
    the text there is not one (a sentence follows the location directly)."""
    m = _BEFORE_PARAMS.match(text[start:start + 400])
    if not m or "::" not in text[start:start + m.end()] and " " not in text[start:start + m.end()].strip():
        return start
    depth, i = 0, start + m.end() - 1
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                i += 1
                q = _QUALIFIERS.match(text[i:])
                return i + (q.end() if q else 0)
        i += 1
    return start  # unbalanced: leave it as it is


def ort_message(text: str) -> str:
    """ORT's message on one line without source locations, function signatures and the
    ``[ONNXRuntimeError] : code : NAME :`` prefix; other text unchanged."""
    text = _PREFIX.sub("", " ".join(str(text).split()))
    text = _PREFIX_ANYWHERE.sub(lambda m: f"{m.group(1)}: ", text)  # later statuses keep their name
    out, pos = [], 0
    for m in _LOCATION.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        pos = _skip_signature(text, m.end())
    out.append(text[pos:])
    return re.sub(r"\s+", " ", "".join(out)).strip()


def shorten(text: str, limit: int = 320) -> str:
    """``text`` on one line, at most ``limit`` characters: when longer, its start and its
    last sentence (where ORT says what it supports) joined by `` … ``."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text)
    last = sentences[-1] if len(sentences) > 1 else ""
    if last and len(last) < limit // 2:
        head = text[: limit - len(last) - 3].rstrip()
        return f"{head} … {last}"
    return text[: limit - 1] + "…"


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FLAG = re.compile(r"\b([A-Z][A-Z_]+)=1\b")


def kernel_paths(stderr: str) -> list[dict[str, str]]:
    """The attention kernel paths ORT reported for this probe, from worker stderr.

    With ``ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO=1`` in a CUDA worker's environment,
    ORT's ``AttentionKernelDebugInfo::Print`` (CUDA attention kernel options) writes one
    line per node run to stdout, which the worker sends to stderr, e.g.
    ``Operator=GroupQueryAttention Node=probe DataType=fp16 SdpaKernel=FLASH_ATTENTION``;
    older builds print the chosen kernels as ``FLASH_ATTENTION=1`` flags instead.

    Returns:
        ``[{operator, node, dtype, kernel}]`` in order, duplicates (subject and control,
        two bound runs) removed; ``[]`` when ORT printed none.
    """
    out: list[dict[str, str]] = []
    for raw in stderr.splitlines():
        line = _ANSI.sub("", raw).strip()
        if not line.startswith("Operator="):
            continue
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        kernel = fields.get("SdpaKernel") or "+".join(_FLAG.findall(line)) or "unknown"
        entry = {"operator": fields.get("Operator", ""), "node": fields.get("Node", ""),
                 "dtype": fields.get("DataType", ""), "kernel": kernel}
        if entry not in out:
            out.append(entry)
    return out
