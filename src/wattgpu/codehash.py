"""Code fingerprints that ignore prose.

`closure` finds the wattgpu modules a module imports, statically and transitively (imports inside functions
included, and the packages each import executes); `module_hash` hashes a module's syntax tree without its
docstrings, so editing a docstring, a comment or the layout changes no fingerprint. The `code` stage writes one
fingerprint per stage (what DVC reruns stages on), the search keys its Optuna studies on one, and the planner's
prediction cache on another.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "wattgpu"
SOURCE_ROOT = Path(__file__).resolve().parent.parent  # the folder holding the wattgpu package


def module_file(name: str, root: Path = SOURCE_ROOT) -> Path | None:
    """The file of module `name` (a package's __init__.py), or None where there is none."""
    base = root.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _tree(name: str, root: Path) -> ast.Module:
    path = module_file(name, root)
    if path is None:
        raise ModuleNotFoundError(f"no module {name!r} under {root}")
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _packages(name: str) -> list[str]:
    """`a.b.c` -> [`a`, `a.b`]: the packages whose __init__ runs when `a.b.c` is imported."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def direct_imports(name: str, root: Path = SOURCE_ROOT) -> set[str]:
    """The wattgpu modules that module `name` imports anywhere in its body."""
    found: set[str] = set()
    for node in ast.walk(_tree(name, root)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == PACKAGE)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != PACKAGE:
                continue
            found.add(node.module)
            # `from wattgpu.x import y`: y may be a submodule
            found.update(f"{node.module}.{a.name}" for a in node.names
                         if module_file(f"{node.module}.{a.name}", root) is not None)
    return {m for m in found if module_file(m, root) is not None}


def closure(roots: Iterable[str], root: Path = SOURCE_ROOT) -> list[str]:
    """Every wattgpu module the `roots` need: themselves, what they import (transitively) and the packages run."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(m for m in (*direct_imports(name, root), *_packages(name)) if m not in seen)
    return sorted(seen)


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return tree


def module_hash(name: str, root: Path = SOURCE_ROOT) -> str:
    """sha256 of the module's syntax tree without docstrings (comments and layout are not in the tree)."""
    dump = ast.dump(_strip_docstrings(_tree(name, root)), include_attributes=False)
    return hashlib.sha256(dump.encode()).hexdigest()


def fingerprint(roots: Iterable[str], root: Path = SOURCE_ROOT) -> dict[str, str]:
    """{module: module_hash} over the closure of `roots`."""
    return {m: module_hash(m, root) for m in closure(roots, root)}


def digest(roots: Iterable[str], root: Path = SOURCE_ROOT) -> str:
    """One hash of `fingerprint(roots)`."""
    h = hashlib.sha256()
    for module, value in fingerprint(roots, root).items():
        h.update(f"{module}={value}\n".encode())
    return h.hexdigest()
