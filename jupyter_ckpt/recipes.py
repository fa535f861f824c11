"""Rebuilding the variables a checkpoint could not hold by running the recorded cells that made them.

A generator, a database connection or a socket cannot be pickled: a checkpoint
records it as skipped. What can be kept is how it was made. Each recorded cell
is read (its AST) for the names it binds, reads and mutates; the *recipe* of a
skipped variable is the last cell that bound it and every later cell that used
it. Replay runs the recipes of the missing variables after everything else is
restored, in a scratch namespace seeded from the restored state, and takes only
the missing variables from it. Restored variables that a recipe cell mutates
are deep-copied into the scratch namespace first, so replay cannot change what
the restore brought back. A recipe that holds a cell which failed is never run.

Replay re-runs code: its side effects (a row inserted twice, a file written
again) happen again. That is why it asks first unless told otherwise.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import BadArgument

# Method names that change their object in place: a call ``x.append(...)`` mutates ``x``.
MUTATORS = frozenset(
    {"append", "extend", "insert", "update", "pop", "popitem", "remove", "clear", "add", "discard"}
    | {"setdefault", "sort", "reverse", "fill", "resize", "put", "send", "write", "execute", "executemany"}
)
_MAGIC = re.compile(r"^\s*[%!]")
MODES = ("ask", "auto", "never")

RunCell = Callable[[str, dict[str, Any]], None]


def check_mode(mode: str) -> str:
    """The one check of a replay mode, for every surface: returns it, or raises BadArgument."""
    if mode not in MODES:
        raise BadArgument(f"'replay' must be one of {', '.join(MODES)}, not {mode!r}")
    return mode


@dataclass
class CellNames:
    """What one cell's code does with names at the top level of the notebook."""

    bound: set[str] = field(default_factory=set)
    read: set[str] = field(default_factory=set)
    mutated: set[str] = field(default_factory=set)

    def touches(self, name: str) -> bool:
        return name in self.bound or name in self.read or name in self.mutated


def _base(node: ast.AST) -> str | None:
    """The variable at the root of ``a.b[c].d``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


class _Reader(ast.NodeVisitor):
    def __init__(self) -> None:
        self.names = CellNames()
        self._depth = 0  # inside a function, class body, lambda or comprehension: stores are local

    def _scoped(self, node: ast.AST) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if self._depth == 0:
            self.names.bound.add(node.name)
        for stmt in ast.walk(node):
            if isinstance(stmt, ast.Global):  # assigned when the function runs
                self.names.mutated.update(stmt.names)
        self._scoped(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        if self._depth == 0:
            self.names.bound.add(node.name)
        self._scoped(node)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._scoped(node)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_Lambda  # type: ignore[assignment]

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load):
            self.names.read.add(node.id)
        elif self._depth == 0:
            self.names.bound.add(node.id)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        if self._depth == 0:
            for alias in node.names:
                if alias.name != "*":
                    self.names.bound.add(alias.asname or alias.name.split(".")[0])

    visit_ImportFrom = visit_Import

    def _store_into(self, target: ast.AST) -> None:
        if isinstance(target, (ast.Attribute, ast.Subscript)) and (name := _base(target)):
            self.names.mutated.add(name)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            for part in ast.walk(target):
                self._store_into(part)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        name = _base(node.target)
        if name:
            self.names.mutated.add(name)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._store_into(target)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and (name := _base(func.value)):
            inplace = any(k.arg == "inplace" and getattr(k.value, "value", None) is True for k in node.keywords)
            if func.attr in MUTATORS or inplace:
                self.names.mutated.add(name)
        self.generic_visit(node)


def cell_names(source: str) -> CellNames:
    """The names a cell binds, reads and mutates (IPython's ``%`` and ``!`` lines are left out)."""
    if source.lstrip().startswith("%%"):
        return CellNames()  # a cell magic: its body is not Python
    code = "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return CellNames()
    reader = _Reader()
    reader.visit(tree)
    return reader.names


@dataclass
class Recipe:
    """The cells to run again, oldest first, to rebuild ``names``; or why they cannot be."""

    names: list[str]
    cells: list[dict[str, Any]] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)
    mutated: set[str] = field(default_factory=set)  # what those cells change in place

    @property
    def runnable(self) -> list[str]:
        return [n for n in self.names if n not in self.problems]

    def describe(self) -> str:
        counts = ", ".join(f"[{c['count']}]" for c in self.cells)
        return f"{', '.join(self.runnable)} (cells {counts})" if self.runnable else ""


def plan(missing: Iterable[str], cells: list[dict[str, Any]]) -> Recipe:
    """The recipe of each missing variable from the lineage ``cells`` (oldest first, as ``Store.cells`` gives)."""
    recipe = Recipe(sorted(missing))
    read = [cell_names(c["source"]) for c in cells]
    chosen: set[int] = set()
    for name in recipe.names:
        made = [i for i, names in enumerate(read) if name in names.bound]
        if not made:
            recipe.problems[name] = "no recorded cell assigns it"
            continue
        steps = [made[-1]] + [i for i in range(made[-1] + 1, len(cells)) if read[i].touches(name)]
        failed = [cells[i] for i in steps if cells[i]["status"] != "ok"]
        if failed:
            recipe.problems[name] = f"cell [{failed[0]['count']}] that it needs failed; replay never runs a failed cell"
            continue
        chosen.update(steps)
    recipe.cells = [cells[i] for i in sorted(chosen)]
    recipe.mutated = set().union(*(read[i].mutated for i in chosen))
    return recipe


def run_recipe(recipe: Recipe, namespace: dict[str, Any], run_cell: RunCell) -> dict[str, str]:
    """Run a recipe in a scratch copy of ``namespace`` and take the missing variables from it.

    Returns, for each variable the recipe was for, what happened: ``replayed`` or why not.
    """
    wanted = set(recipe.runnable)
    if not wanted:
        return dict(recipe.problems)
    scratch = dict(namespace)
    touched = recipe.mutated - wanted
    outcome = dict(recipe.problems)
    try:
        for name in touched & set(namespace):
            scratch[name] = copy.deepcopy(namespace[name])
        for cell in recipe.cells:
            try:
                run_cell(cell["source"], scratch)
            except Exception as e:
                raise RuntimeError(f"cell [{cell['count']}] failed when run again: {type(e).__name__}: {e}") from e
    except Exception as e:  # a deep copy or a cell: nothing is taken
        outcome.update(dict.fromkeys(wanted, f"not replayed: {e}"))
        return outcome
    for name in sorted(wanted):
        if name in scratch:
            namespace[name] = scratch[name]
            outcome[name] = "replayed"
        else:
            outcome[name] = "the replayed cells did not assign it"
    return outcome


def exec_cell(source: str, namespace: dict[str, Any]) -> None:
    """Run a cell's source as plain Python (the IPython extension runs it through the shell instead)."""
    exec(compile(source, "<replay>", "exec"), namespace)
