"""Errors that reach users: each names what was wrong and what is allowed."""

from __future__ import annotations

import difflib
import errno
import reprlib
from collections.abc import Iterable

_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 5


def shown(value: object) -> str:
    """`repr(value)` cut to about 80 characters: errors echo what was sent, never all of a huge value."""
    return _SHORT.repr(value)


class WattgpuError(Exception):
    """Base class for errors whose message is meant for the user (no stack trace needed)."""


class UnknownNameError(WattgpuError, KeyError):
    """A GPU or LLM name that no catalog entry or alias matches."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        self.kind, self.name = kind, name
        known = list(known)
        needle = str(name).lower().replace(" ", "")
        # Names that contain what was typed first ("H100" -> every H100 variant), then close spellings (not for a
        # name far longer than any real one: the comparison would take minutes).
        contained = [k for k in known if needle and needle in k.lower().replace(" ", "")]
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5) if len(needle) <= 200 else []
        self.suggestions = list(dict.fromkeys([*sorted(contained, key=len)[:5], *close]))[:5]
        hint = f"; did you mean {', '.join(repr(s) for s in self.suggestions)}?" if self.suggestions else ""
        super().__init__(f"unknown {kind} {shown(name)}{hint}")

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


NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})  # disk full, quota, file size limit


def os_error_line(exc: OSError) -> str:
    """One line for an operating-system error a user can act on: what failed, on which file, what to do."""
    where = f" {exc.filename}" if exc.filename is not None else ""
    if exc.errno in NO_ROOM:
        return (f"no room to write{where} ({exc.strerror or exc}): free disk space (or lift the quota / file size "
                "limit, or write somewhere else) and run again")
    return f"{exc.strerror or exc}{':' + where if where else ''}"
