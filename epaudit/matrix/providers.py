"""Validating ``[providers.ALIAS]`` tables: names, options, interpreters, plugin libraries.

A mixin of :class:`~epaudit.matrix.validate.Validator` (its ``fail``, ``table``, ``string``
and ``lines``). A provider name no onnxruntime knows is caught here before any worker starts
(:mod:`epaudit.matrix.preflight`); ``$VAR`` in ``python`` is resolved from the environment.
"""

from __future__ import annotations

import math
import re

from .lines import _tname
from .model import _ALIAS, _ENV_NAME, DEVICE_KEYS, FAULTS, Provider
from .preflight import IF_UNSET, name_problem


class ProviderChecks:
    """``[providers]``: one :class:`~epaudit.matrix.model.Provider` per alias."""

    def providers(self, raw, environ) -> dict[str, Provider]:
        self.table(raw, ("providers",), raw.keys() if isinstance(raw, dict) else ())
        out = {}
        for alias, body in raw.items():
            path = ("providers", alias)
            if not _ALIAS.match(alias):
                raise self.fail(path, "EP alias must start with a letter and use letters, digits, _ . - "
                                      "('@' is reserved for fleet columns ALIAS@LABEL)")
            self.table(body, path, ("name", "options", "python", "env", "inject_fault", "library",
                                    "device", "if_unset", "start_timeout", "profile"))
            if "name" not in body:
                raise self.fail(path, "missing key 'name' (the ORT provider name, e.g. CUDAExecutionProvider)")
            pname = self.string(body["name"], path + ("name",))
            why = name_problem(pname, plugin="library" in body)
            if why:
                raise self.fail(path + ("name",), why)
            if_unset = body.get("if_unset", "error")
            if if_unset not in IF_UNSET:
                raise self.fail(path + ("if_unset",), f"must be one of {', '.join(map(repr, IF_UNSET))}, "
                                                      f"got {if_unset!r}")
            start_timeout = body.get("start_timeout")
            if start_timeout is not None and (isinstance(start_timeout, bool)
                                              or not isinstance(start_timeout, (int, float))
                                              or not 1 <= start_timeout <= 3600):
                raise self.fail(path + ("start_timeout",), f"must be a number of seconds from 1 to 3600, "
                                                           f"got {start_timeout!r}")
            options = body.get("options", {})
            if not isinstance(options, dict):
                raise self.fail(path + ("options",), f"must be a table, got {_tname(options)}")
            opts = {}
            for k, val in options.items():
                if isinstance(val, bool):
                    opts[k] = "1" if val else "0"
                elif isinstance(val, float) and not math.isfinite(val):
                    raise self.fail(path + ("options", k), f"must be a finite number, got {val!r}")
                elif isinstance(val, (str, int, float)):
                    if "\0" in str(val):
                        raise self.fail(path + ("options", k), "must not contain a NUL character")
                    opts[k] = str(val)
                else:
                    raise self.fail(path + ("options", k), f"must be a string, number or boolean, got {_tname(val)}")
            env = body.get("env", {})
            if not isinstance(env, dict):
                raise self.fail(path + ("env",), f"must be a table, got {_tname(env)}")
            for k, val in env.items():
                self.string(val, path + ("env", k))
                if not _ENV_NAME.fullmatch(k):
                    raise self.fail(path + ("env", k), "not an environment variable name "
                                                       "(letters, digits and _, not starting with a digit)")
                if "\0" in val:
                    raise self.fail(path + ("env", k), "must not contain a NUL character")
            python, unavailable, unset, python_var = None, "", (), ""
            if "python" in body:
                python, unavailable = self.expand(body["python"], path + ("python",), environ)
                if isinstance(body["python"], str) and body["python"].startswith("$"):
                    python_var = body["python"][1:]
                    if python is None:
                        unset = ("python", python_var)
            library = None
            if "library" in body:
                library, missing = self.expand(body["library"], path + ("library",), environ)
                if missing and not unset:
                    unset = ("library", body["library"][1:])
                unavailable = unavailable or missing
            if unset and if_unset == "unavailable":
                unavailable += " (the matrix marks it optional: if_unset = \"unavailable\")"
            device = body.get("device", {})
            self.table(device, path + ("device",), DEVICE_KEYS)
            device = {k: str(self.scalar(v, path + ("device", k))) for k, v in device.items()}
            if device and "library" not in body:
                raise self.fail(path + ("device",), "device filters select a plugin EP's devices; "
                                                    "name its library too (library = \"module:function\" or a path)")
            profile = body.get("profile", False)
            if not isinstance(profile, bool):
                raise self.fail(path + ("profile",), f"must be true or false, got {_tname(profile)}")
            fault = body.get("inject_fault")
            if fault is not None and fault not in FAULTS:
                raise self.fail(path + ("inject_fault",), f"unknown fault {fault!r}; one of {', '.join(FAULTS)}")
            key_lines = {k: line for k in ("name", "python", "library")
                         if k in body and (line := self.lines.find(path + (k,))) is not None}
            out[alias] = Provider(alias, pname, opts, python, unavailable, dict(env), fault,
                                  self.lines.find(path), library, device, if_unset, unset, python_var,
                                  key_lines, None if start_timeout is None else float(start_timeout),
                                  profile)
        return out

    def expand(self, value, path, environ) -> tuple[str | None, str]:
        """A string that may be ``$VAR``: ``(value, "")``, or ``(None, why)`` when VAR is unset."""
        value = self.string(value, path)
        if value.startswith("$"):
            var = value[1:]
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", var):
                raise self.fail(path, f"{value!r} is not a valid $VARIABLE")
            if not environ.get(var):
                return None, f"${var} is not set ({path[-1]} = \"${var}\" in the matrix)"
            return environ[var], ""
        if not value:
            raise self.fail(path, "must not be empty")
        if "\0" in value:
            raise self.fail(path, "must not contain a NUL character")
        return value, ""
