"""Errors that reach users: each names what was wrong and what is allowed."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class WattgpuError(Exception):
    """Base class for errors whose message is meant for the user (no stack trace needed)."""


class UnknownNameError(WattgpuError, KeyError):
    """A GPU or LLM name that no catalog entry or alias matches."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        self.kind, self.name = kind, name
        known = list(known)
        needle = str(name).lower().replace(" ", "")
        # Names that contain what was typed first ("H100" -> every H100 variant), then close spellings.
        contained = [k for k in known if needle and needle in k.lower().replace(" ", "")]
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
        self.suggestions = list(dict.fromkeys([*sorted(contained, key=len)[:5], *close]))[:5]
        hint = f"; did you mean {', '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"unknown {kind} {name!r}{hint}")

    def __str__(self) -> str:  # KeyError would quote the message
        return self.args[0]


class CatalogError(WattgpuError, ValueError):
    """A catalog entry that fails validation; names the entry and the field."""

    def __init__(self, entry: str, field: str, problem: str):
        self.entry, self.field = entry, field
        super().__init__(f"catalog entry {entry!r}, field {field!r}: {problem}")


class RawDataError(WattgpuError, ValueError):
    """A malformed raw measurement file; names the file, the line and the field."""

    def __init__(self, path: object, line: int | None, field: str, problem: str):
        self.path, self.line, self.field = str(path), line, field
        where = f"{self.path}, line {line}" if line is not None else self.path
        super().__init__(f"{where}, field {field!r}: {problem}")
