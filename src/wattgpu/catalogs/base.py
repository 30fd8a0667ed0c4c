"""What every catalog shares: an immutable, ordered set of specs with a key-and-alias name index."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, TypeVar

import pandas as pd
from pydantic import BaseModel, ValidationError

from wattgpu.errors import CatalogError, UnknownNameError

S = TypeVar("S")


M = TypeVar("M", bound=BaseModel)


def validate_entry(model: type[M], d: Mapping[str, Any], entry: str) -> M:
    """Validate one catalog entry; a failure becomes a `CatalogError` naming `entry` and the first bad field."""
    if not isinstance(d, Mapping):
        raise CatalogError(entry, "<entry>", f"expected a mapping of fields, got {type(d).__name__}")
    try:
        return model.model_validate(d)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "<entry>"
        problem = err["msg"]
        if err["type"] == "string_pattern_mismatch":  # fields.PRINTABLE
            problem = "must be printable text on one line (no newline or other control character)"
        raise CatalogError(entry, field, problem) from None


def normalize_name(name: str) -> str:
    """Case- and whitespace-insensitive matching key: "h100 nvl" matches "H100 NVL"."""
    return "".join(name.split()).casefold()


class NamedCatalog(Generic[S]):
    """Specs (pydantic models with `key` and `names`) looked up by key or alias, case-insensitively.

    Subclasses set `kind` (used in error messages) and `list_fields` (joined with "; " in `to_frame`).
    """

    kind = "entry"
    list_fields: tuple[str, ...] = ("aliases",)

    def __init__(self, specs: Iterable[S]):
        self._specs: tuple[S, ...] = tuple(specs)
        self._by_key: dict[str, S] = {}
        self._index: dict[str, str] = {}  # normalized name -> key
        for spec in self._specs:
            if spec.key in self._by_key:
                raise CatalogError(spec.key, "key", "another entry already has this key")
            for i, name in enumerate(spec.names):
                norm = normalize_name(name)
                owner = self._index.get(norm)
                if owner is not None and owner != spec.key:
                    field = "key" if i == 0 else "aliases"
                    raise CatalogError(spec.key, field, f"name {name!r} is already used by entry {owner!r}")
                self._index[norm] = spec.key
            self._by_key[spec.key] = spec

    @property
    def keys(self) -> list[str]:
        return [s.key for s in self._specs]

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[S]:
        return iter(self._specs)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_name(name) in self._index

    def _known_names(self) -> list[str]:
        return [n for s in self._specs for n in s.names]

    def resolve(self, name: str) -> str:
        """The key of the entry whose key or alias matches `name`."""
        key = self._index.get(normalize_name(name)) if isinstance(name, str) else None
        if key is None:
            raise UnknownNameError(self.kind, name, self._known_names())
        return key

    def get(self, name: str) -> S:
        return self._by_key[self.resolve(name)]

    def field_table(self, fields: tuple[str, ...]) -> pd.DataFrame:
        """Entry key -> the given fields (None: NaN), one row per entry; built once per field list (a catalog
        never changes), so that a batch of requests looks its entries up in one step."""
        tables = self.__dict__.setdefault("_field_tables", {})
        if fields not in tables:
            tables[fields] = pd.DataFrame([[getattr(s, f) for f in fields] for s in self._specs], index=self.keys,
                                          columns=list(fields))
        return tables[fields]

    def with_spec(self, spec: S):
        """A new catalog with `spec` appended (its key and aliases must be new)."""
        return type(self)((*self._specs, spec))

    def to_frame(self) -> pd.DataFrame:
        """One row per entry, one column per field; list fields joined with "; "."""
        rows = []
        for spec in self._specs:
            row = spec.model_dump()
            for f in self.list_fields:
                row[f] = "; ".join(row[f])
            rows.append(row)
        fields = list(type(self._specs[0]).model_fields) if self._specs else []
        return pd.DataFrame(rows, columns=fields)
