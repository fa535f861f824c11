"""What the cells change of modules and of classes they import: ``config.DEBUG = True``,
``pd.DataFrame.summary = summary``, ``statistics.mean = my_mean``, ``setattr(config, "SEED", 1)``, and a
project module's ``config.PARAMS["lr"] = 0.1`` or ``config.ITEMS.append(x)``.

Modules and imported classes are saved by reference (a restore imports them again), so such a change was
lost: the restoring kernel's module had the value its file gives. The Checkpointer keeps the names of the
attributes that cells which ran without error change in their own statements, as typed, with how
(``merged``), along the session's lineage:

- ``SET``, assigned: each checkpoint keeps the value (``read``) as a variable of that dotted name, grouped and
  pickled with the others, so an attribute set to a notebook function is that function after a restore, not
  a copy of it. A restore sets it again (``apply``).
- ``IN_PLACE``, a list, dict or set of one of the project's own modules changed in place (an item set or
  deleted, a method of ``cellcode.MUTATORS`` called): the checkpoint keeps a copy of its contents, and a
  restore puts them back into the object the module holds, which its functions and others' ``from config
  import PARAMS`` share. Not for the standard library's or an installed package's containers (``sys.path``,
  ``sys.modules``, ``plt.rcParams``): what they hold is kept where it is the session's (paths.py,
  settings.py), and replacing a library's registry wholesale could break it.

The timeline names ``config.DEBUG`` where it changed. A restore sets them once the namespace and its modules
are back, on what the name's first part is then.

So are those of an object a module holds, saved as that module's (``from config import settings`` then
``settings.lr = 0.5``, ``settings.tags.append(x)``).

Not followed: a change inside a function or class body (``def setup(): config.X = 1``), an attribute of a
notebook object (its own state is kept with it), and an attribute set to a module (importing gives it). An
undo sets the checkpoint's values again; one first changed after the checkpoint keeps its value, as for the
IPython configuration (shellconfig.py).
"""

from __future__ import annotations

import ast
import copy
import importlib
import os
import re
import site
import sys
import sysconfig
import types
from collections.abc import Iterator
from typing import Any

from . import serialize
from .cellcode import MUTATORS, parsed

SET = "set"  # assigned: set again as the value kept (the very object the notebook's variables hold)
IN_PLACE = "in place"  # a project module's list, dict or set changed in place: its contents are put back


def merged(kept: dict[str, str], source: str) -> dict[str, str]:
    """``kept`` with the attributes a cell that ran without error changes, by how (``SET`` once one was
    assigned). Returns a new dict."""
    out = dict(kept)
    for name, how in _changed(source):
        if out.get(name) != SET:
            out[name] = how
    return out


def read(namespace: dict[str, Any], kept: dict[str, str], main: str) -> dict[str, Any]:
    """The values of the attributes ``kept`` whose first part is an importable module, or a class of another
    module than ``main`` (the notebook's), as the namespace holds them now; those gone or not such are left out.
    Of one changed in place, a copy of a project module's list, dict or set: its contents as they are now."""
    values = {}
    for name, how in kept.items():
        root, *path = name.split(".")
        owner = namespace.get(root)
        # A module made in the notebook is skipped, and its attributes with it: replay makes it again with them.
        if not (
            (isinstance(owner, types.ModuleType) and serialize.importable(owner))
            or (isinstance(owner, type) and owner.__module__ != main)
            or _held_by_module(owner)
        ):
            continue
        top = owner
        try:
            for part in path:
                owner = getattr(owner, part)
        except AttributeError:  # deleted since, or assigned on a path this cell's code never made
            continue
        if how == SET and not isinstance(owner, types.ModuleType):
            values[name] = owner
        elif how == IN_PLACE and isinstance(owner, _CONTAINERS) and _in_project(top):
            values[name] = copy.copy(owner)
    return values


def _held_by_module(owner: Any) -> bool:
    """Whether ``owner`` is an object a module holds (``from config import settings``), which is saved as that
    module's and comes back as the module makes it: ``settings.lr = 0.5`` in a cell was lost, as a module's own
    attribute was."""
    return not isinstance(owner, (type, types.ModuleType)) and serialize.by_reference(owner)


def places(namespace: dict[str, Any], kept: dict[str, str]) -> list[tuple[str, str]]:
    """Of the attributes ``kept``, those assigned to a module itself, as (module, attribute): the places in a
    module whose value is the notebook's (``serialize.assigned_by_notebook``)."""
    found = []
    for name, how in kept.items():
        root, *path = name.split(".")
        module = namespace.get(root)
        if how == SET and len(path) == 1 and isinstance(module, types.ModuleType):
            found.append((module.__name__, path[0]))
    return found


def apply(namespace: dict[str, Any], values: dict[str, Any], kept: dict[str, str]) -> dict[str, str]:
    """Set the attributes kept again, on what the namespace's names hold now (the contents of those changed in
    place, into the object the module holds); returns those that failed, with why."""
    failed = {}
    for name, value in values.items():
        root, *path = name.split(".")
        try:
            owner = namespace[root]
            for part in path[:-1]:
                owner = getattr(owner, part)
            current = getattr(owner, path[-1], None)
            if kept.get(name) == IN_PLACE and type(current) is type(value):
                _refill(current, value)
            else:
                setattr(owner, path[-1], value)
        except Exception as e:  # a module changed since, a read-only attribute: the others are set
            failed[name] = f"not set again: {type(e).__name__}: {e}"
    return failed


_CONTAINERS = (list, dict, set)


def _refill(current: Any, value: Any) -> None:
    if isinstance(current, list):
        current[:] = value
    else:
        current.clear()
        current.update(value)


def aliases(variables: dict[str, Any]) -> dict[str, str]:
    """The variables bound to a list, dict or set that one of the project's own modules holds (``from config
    import PARAMS``), with where: ``"config:PARAMS"``. Read by the writer, not in the kernel's pause."""
    held: dict[int, str] = {}
    for module in _PROJECT.modules():
        for attr, value in list(vars(module).items()):
            if isinstance(value, _CONTAINERS):
                held.setdefault(id(value), f"{module.__name__}:{attr}")
    return {name: held[id(v)] for name, v in variables.items() if isinstance(v, _CONTAINERS) and id(v) in held}


def rebind(namespace: dict[str, Any], where: dict[str, str], values: dict[str, Any]) -> dict[str, str]:
    """Put the contents restored of each variable ``where`` names back into the object its project module holds,
    and bind the variable to that object again; returns those that could not be, with why (they keep the copy)."""
    failed = {}
    for name, place in where.items():
        if name not in values:
            continue
        module, _, attr = place.partition(":")
        try:
            current = getattr(importlib.import_module(module), attr)
            if type(current) is not type(values[name]):
                raise TypeError(f"{place} is a {type(current).__name__} now")
            _refill(current, values[name])
            namespace[name] = current
        except Exception as e:  # a module gone or changed: the variable is the copy restored
            failed[name] = f"restored as a copy, not {place} itself: {type(e).__name__}: {e}"
    return failed


def _library_directories() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")} | set(site.getsitepackages())
    return tuple({os.path.join(form(d), "") for d in found for form in (os.path.abspath, os.path.realpath)})


_LIBRARIES = _library_directories()


def _in_project(owner: Any) -> bool:
    """Whether a module (or a class's module) is the project's own, not the standard library's nor an installed
    package's: only such a module's containers are changed in place again (never ``sys.path`` or
    ``sys.modules``, which others keep, nor a library's registry)."""
    module = owner if isinstance(owner, types.ModuleType) else sys.modules.get(getattr(owner, "__module__", ""))
    file = getattr(module, "__file__", None)
    return isinstance(file, str) and not os.path.abspath(file).startswith(_LIBRARIES)


class _Project:
    """The project's own modules imported now, looked for again only once more modules were imported."""

    def __init__(self) -> None:
        self.known: dict[str, bool] = {}
        self.count = 0

    def modules(self) -> list[types.ModuleType]:
        if len(sys.modules) != self.count:
            for name, module in list(sys.modules.items()):
                if name not in self.known:
                    self.known[name] = isinstance(module, types.ModuleType) and _in_project(module)
            self.count = len(sys.modules)
        return [m for name, ours in self.known.items() if ours and (m := sys.modules.get(name)) is not None]


_PROJECT = _Project()


def index_project() -> None:
    """Find the project's modules among those imported since the last look (``_Project``). The kernel calls it
    while idle, so that the writers it forks inherit what it found instead of each looking again."""
    _PROJECT.modules()


# What any such change has in its text, at a line's start: a cell without it (most) is not parsed, at its end,
# in the pause. (``self.x = ...`` in a method is not: a class's cell is parsed only if it changes something else.)
_DOTTED = r"(?!self\.|cls\.)[A-Za-z_]\w*\.[\w.]*"
_MAYBE = re.compile(  # a.b = ..., a.b[k] += ..., a.b: T = ..., a.b, c.d = ...; del a.b[k]; a.b.append(...)
    rf"^[ \t]*{_DOTTED}(?:\[[^\n]*\]|[ \t]*[:,][^=\n]*)?[ \t]*(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=)"
    rf"|^[ \t]*del[ \t]+{_DOTTED}\[|^[ \t]*{_DOTTED}\.(?:{'|'.join(sorted(MUTATORS))})\("
    r"|\bsetattr\(",
    re.MULTILINE,
)


def _changed(source: str) -> list[tuple[str, str]]:
    """The dotted attributes a cell's statements assign (``a.b = ...``, ``a.b += ...``, ``setattr(a, "b", ...)``)
    or change in place (``a.b[k] = ...``, ``del a.b[k]``, ``a.b.append(...)``), with how."""
    tree = parsed(source) if _MAYBE.search(source) else None
    if tree is None:
        return []
    found: list[tuple[str, str]] = []
    for node in _statements(tree.body):
        targets: list[ast.AST] = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = [t for target in node.targets for t in ast.walk(target)]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Expr) and _is_setattr(node.value):
            call: Any = node.value
            targets = [ast.Attribute(call.args[0], call.args[1].value, ast.Store())]
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            func = node.value.func
            if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
                targets = [ast.Subscript(func.value, ast.Constant(0), ast.Store())]  # as ``a.b[...] = ...``
        for target in targets:  # what is stored into or deleted, not what is read on the way (``a.b`` of ``a.b[k]``)
            if isinstance(target, ast.Attribute) and isinstance(target.ctx, ast.Store):
                how, dotted = SET, _dotted(target)
            elif isinstance(target, ast.Subscript) and isinstance(target.ctx, (ast.Store, ast.Del)):
                how, dotted = IN_PLACE, _dotted(_container(target))
            else:
                continue
            if dotted is not None:
                found.append((dotted, how))
    return found


def _container(node: ast.Subscript) -> ast.AST:
    """What ``a.b[k][j]`` changes in place: ``a.b``."""
    inner: ast.AST = node
    while isinstance(inner, ast.Subscript):
        inner = inner.value
    return inner


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
