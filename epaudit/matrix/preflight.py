"""Matrix mistakes found before any worker starts: a provider name no onnxruntime knows,
an interpreter or plugin library that is not there.

A mistake in the matrix is a matrix error (exit 2, one line naming the file, the line and
the key), never an ``UNAVAILABLE`` EP that lets the gate pass over it; ``UNAVAILABLE``
is kept for what the environment lacks: a device, a driver, CUDA libraries, an optional
``$VAR`` left unset (``if_unset = "unavailable"``). Source: issue 12 ("A mistake in the
matrix is a matrix error, not an unavailable EP").

Names are checked when the matrix is read (a typo is a typo on every machine); paths
only for the providers a command is about to start (:func:`check_providers`), since a
gate machine merging saved results need not have every runner's interpreter.
"""

from __future__ import annotations

import os
from typing import Iterable

#: Built-in execution provider names: ``onnxruntime.get_all_providers()`` of
#: onnxruntime-gpu 1.31.1 (``include/onnxruntime/core/graph/constants.h``), plus names
#: that earlier releases registered. A plugin EP (``library =``) may have any name.
KNOWN_PROVIDERS = (
    "CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider",
    "NvTensorRTRTXExecutionProvider", "MIGraphXExecutionProvider", "ROCMExecutionProvider",
    "OpenVINOExecutionProvider", "DnnlExecutionProvider", "VitisAIExecutionProvider",
    "QNNExecutionProvider", "NnapiExecutionProvider", "VSINPUExecutionProvider",
    "JsExecutionProvider", "CoreMLExecutionProvider", "ACLExecutionProvider",
    "ArmNNExecutionProvider", "DmlExecutionProvider", "RknpuExecutionProvider",
    "WebNNExecutionProvider", "WebGpuExecutionProvider", "XnnpackExecutionProvider",
    "CANNExecutionProvider", "AzureExecutionProvider", "SNPEExecutionProvider",
    "TvmExecutionProvider",
)

#: ``if_unset`` values: what a ``$VAR`` interpreter or library that is not set means.
IF_UNSET = ("error", "unavailable")


def name_problem(name: str, plugin: bool) -> str:
    """Why ``name`` cannot be a provider name (``""`` when it can): a built-in EP must be
    one onnxruntime knows; a plugin EP's name is whatever its library registers."""
    if plugin or name in KNOWN_PROVIDERS:
        return ""
    import difflib

    close = difflib.get_close_matches(name, KNOWN_PROVIDERS, n=1, cutoff=0.6)
    return (f"{name!r} is not an execution provider onnxruntime knows"
            + (f"; did you mean {close[0]!r}?" if close else "")
            + " (a plugin EP also names its library = \"module:function\" or a path)")


def interpreter_problem(python: str, environ=os.environ) -> str:
    """Why ``python`` cannot be executed as a worker interpreter (``""`` when it can).

    A path (it holds a separator; relative ones are read from the current directory, as
    the runner does) must be an executable regular file; a bare name must be found on
    ``PATH``. Whether it is a Python with onnxruntime and numpy shows only when it runs.
    """
    if os.sep not in python:
        for folder in os.get_exec_path(dict(environ)):
            candidate = os.path.join(folder, python)
            if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                return ""
        return f"{python!r} is not found on PATH"
    path = os.path.abspath(python)
    if not os.path.exists(path):
        return f"{python!r} does not exist"
    if os.path.isdir(path):
        return f"{python!r} is a directory, not an interpreter"
    if not os.path.isfile(path):
        return f"{python!r} is not a regular file"
    if not os.access(path, os.X_OK):
        return f"{python!r} is not executable"
    return ""


def library_problem(library: str) -> str:
    """Why a plugin ``library`` path is not there (``""`` when it is, or when it is a
    ``module:function`` the worker resolves in the EP's own interpreter)."""
    looks_like_path = os.sep in library or library.endswith((".so", ".dll", ".dylib"))
    if not looks_like_path and ":" in library:
        return ""
    path = os.path.abspath(library)
    if not os.path.exists(path):
        return f"{library!r} does not exist"
    if not os.path.isfile(path):
        return f"{library!r} is not a regular file"
    return ""


def check_providers(matrix, providers: Iterable, environ=os.environ) -> None:
    """Refuse to start workers for providers whose matrix entries are mistakes.

    Args:
        matrix: the :class:`epaudit.matrix.core.Matrix` the providers come from (for its path).
        providers: the :class:`epaudit.matrix.core.Provider` objects about to be started.
        environ: where ``PATH`` is read.

    Raises:
        epaudit.matrix.core.MatrixError: an interpreter or library that is not there, or a
            required ``$VAR`` that is not set; names the file, line and key.
    """
    from .model import MatrixError

    for p in providers:
        lines = dict(p.key_lines)
        if p.unset_var and p.if_unset == "error":
            key = p.unset_var[0]
            raise MatrixError(matrix.path, f"providers.{p.alias}.{key}", lines.get(key, p.line),
                              f"${p.unset_var[1]} is not set; set it, or add if_unset = \"unavailable\" "
                              "to read this EP as unavailable when it is not")
        if p.python is not None:
            why = interpreter_problem(p.python, environ)
            if why:
                via = f" (from ${p.python_var})" if p.python_var else ""
                raise MatrixError(matrix.path, f"providers.{p.alias}.python", lines.get("python", p.line),
                                  f"{why}{via}: it must be a Python interpreter with onnxruntime and numpy")
        if p.library is not None:
            why = library_problem(p.library)
            if why:
                raise MatrixError(matrix.path, f"providers.{p.alias}.library", lines.get("library", p.line),
                                  f"{why}: it must be the plugin EP's shared library or \"module:function\"")
