"""Values the cells assign to attributes of modules and of classes they import: ``config.DEBUG = True``,
``pd.DataFrame.summary = summary``, ``statistics.mean = my_mean``, ``setattr(config, "SEED", 1)``.

Modules and imported classes are saved by reference (a restore imports them again), so such a value was
lost: the restoring kernel's module had the value its file gives. The Checkpointer keeps the names of the
attributes that cells which ran without error assign in their own code, as typed (``merged``), along the
session's lineage. Each checkpoint reads their values (``read``) and keeps them as variables of those dotted
names, grouped and pickled with the others: an attribute set to a notebook function is that function after a
restore, not a copy of it, and the timeline names ``config.DEBUG`` where it changed. A restore sets them
again once the namespace and its modules are back (``apply``), on what the name's first part is then.

Not followed: an assignment inside a function or class body (``def setup(): config.X = 1``), an attribute
changed in place (``config.ITEMS.append(1)``), and one of a notebook object (its own state is kept with it).
An attribute set to a module is not kept (importing gives it). An undo sets the checkpoint's values again;
one first assigned after the checkpoint keeps its value, as for the IPython configuration (shellconfig.py).
"""

from __future__ import annotations

import ast
import re
import types
from collections.abc import Iterable, Iterator
from typing import Any

from .recipes import parsed


def merged(kept: list[str], source: str) -> list[str]:
    """``kept`` with the attributes a cell that ran without error assigns, each once. Returns a new list."""
    out = list(kept)
    for name in _assigned(source):
        if name not in out:
            out.append(name)
    return out


def read(namespace: dict[str, Any], names: Iterable[str], main: str) -> dict[str, Any]:
    """The values of the attributes ``names`` whose first part is a module, or a class of another module than
    ``main`` (the notebook's), as the namespace holds them now; those gone or not such are left out."""
    values = {}
    for name in names:
        root, *path = name.split(".")
        owner = namespace.get(root)
        if not (isinstance(owner, types.ModuleType) or (isinstance(owner, type) and owner.__module__ != main)):
            continue
        try:
            for part in path:
                owner = getattr(owner, part)
        except AttributeError:  # deleted since, or assigned on a path this cell's code never made
            continue
        if not isinstance(owner, types.ModuleType):
            values[name] = owner
    return values


def places(namespace: dict[str, Any], names: Iterable[str]) -> list[tuple[str, str]]:
    """Of ``names``, the attributes of a module itself, as (module, attribute): the places in a module whose
    value is the notebook's (``serialize.assigned_by_notebook``)."""
    found = []
    for name in names:
        root, *path = name.split(".")
        module = namespace.get(root)
        if len(path) == 1 and isinstance(module, types.ModuleType):
            found.append((module.__name__, path[0]))
    return found


def apply(namespace: dict[str, Any], values: dict[str, Any]) -> dict[str, str]:
    """Set the attributes kept again, on what the namespace's names hold now; returns those that failed, with why."""
    failed = {}
    for name, value in values.items():
        root, *path = name.split(".")
        try:
            owner = namespace[root]
            for part in path[:-1]:
                owner = getattr(owner, part)
            setattr(owner, path[-1], value)
        except Exception as e:  # a module changed since, a read-only attribute: the others are set
            failed[name] = f"not set again: {type(e).__name__}: {e}"
    return failed


# What any such assignment has in its text: a cell without it (most) is not parsed, at its end, in the pause.
# (``self.x = ...`` in a method is not: a class's cell is parsed only if it assigns something else.)
_MAYBE = re.compile(
    r"(?<![\w.])(?!self\.|cls\.)[A-Za-z_]\w*(?:\.\w+)+\s*(?::[^=\n]*)?(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=)"
    r"|\bsetattr\("
)


def _assigned(source: str) -> list[str]:
    """The dotted attributes a cell's statements assign: ``a.b = ...``, ``a.b += ...``, ``setattr(a, "b", ...)``."""
    tree = parsed(source) if _MAYBE.search(source) else None
    if tree is None:
        return []
    found: list[str] = []
    for node in _statements(tree.body):
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in ast.walk(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Expr) and _is_setattr(node.value):
            call: Any = node.value
            targets = [ast.Attribute(call.args[0], call.args[1].value, ast.Store())]
        found += [name for target in targets if (name := _dotted(target)) is not None]
    return found


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of ``body`` and of the blocks in it (``if``, ``for``, ``with``, ``try``, ``match``), in order,
    but not those of the functions and classes it defines."""
    todo = list(reversed(body))
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        inner: list[ast.stmt] = []
        for field in ("body", "handlers", "cases", "orelse", "finalbody"):
            for child in getattr(node, field, []):
                inner += [child] if isinstance(child, ast.stmt) else child.body  # a handler's or a case's block
        todo += reversed(inner)


def _is_setattr(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) == 3
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
        and node.args[1].value.isidentifier()
    )


def _dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for an attribute on a chain of names only; None for anything else (``a[0].b``, ``f().b``)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not parts or not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])
