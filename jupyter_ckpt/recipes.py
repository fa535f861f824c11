"""Rebuilding the variables a checkpoint could not hold by running the recorded cells that made them.

A generator, a database connection or a socket cannot be pickled: a checkpoint
records it as skipped. What can be kept is how it was made. Each recorded cell
is read (its AST) for the names it binds, reads and mutates; the *recipe* of a
skipped variable is the last cell that bound it and every later cell that used
it, directly or through a notebook function it called (``next_batch()`` advances
the generator the function reads: the cell that defined the function is run
again too), and, for each of those cells that uses another missing variable, that
variable's recipe up to that cell (a cursor needs its connection). So does a
restored variable such a cell read that it or a later cell bound again: the
restore holds the later value, and the cell is run on the one it read
(``gen = iter(range(n))`` before ``n = 10``; ``total`` before ``total += 1``).

Replay runs the recipes after everything else is restored, each on its own: one
that cannot run is reported with why, and the others still run. Recipes that
share a cell are one *part* (a cell runs once, and two names one cell made stay
one object), and each part runs in a scratch namespace of its own, seeded from
the restored state; only the missing variables are taken from it, and what its
cells made again holding a rebuilt variable's objects (the optimizer of a model
rebuilt), unless a cell replay does not run uses it later. What it rebuilds is
made an instance of the restored notebook class that its cells defined again,
not of the class they made. Restored
variables that a part's cells mutate are deep-copied into its scratch namespace
first, so replay cannot change what the restore brought back; an open file it
reads is reopened at its position, and one it writes to is written through the
kernel's own handle (see ``_copy``). An object no deep copy can copy is copied as
a checkpoint would save and restore it; one that cannot be copied at all stops
only the variables whose cells change it. Inside a part, a cell that fails when
run again stops only the variables that need it. A recipe that holds a cell which
failed is never run.

Replay re-runs code: its side effects (a row inserted twice, a line written to a
log again) happen again. That is why it asks first unless told otherwise.
"""

from __future__ import annotations

import ast
import bisect
import builtins
import contextlib
import copy
import enum
import gc
import io
import os
import stat
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import serialize
from .capture import Partition, sharing
from .cellcode import MUTATORS, parsed
from .errors import BadArgument
from .store import Cell

# What ``_adopt`` does not walk into: atoms, code, and classes and modules (their dicts hold the notebook's code).
_NOT_WALKED = (int, float, str, bytes, type, types.ModuleType, types.FunctionType, types.CodeType, types.FrameType)
# Open files: one replay writes to is shared, one it reads is reopened (``_copy``).
_FILES = (io.TextIOWrapper, io.BufferedReader, io.BufferedWriter, io.BufferedRandom, io.FileIO)
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
    # Read or mutated by a statement before any earlier one bound it: the value the cell needs from before it.
    needs: set[str] = field(default_factory=set)
    # The functions it defines, each with the global names its body reads and those it changes in place.
    functions: dict[str, tuple[set[str], set[str]]] = field(default_factory=dict)
    # The notebook functions it calls (``_through_calls``), each with every global name it reaches.
    calls: dict[str, set[str]] = field(default_factory=dict)


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
        declared = {name for stmt in ast.walk(node) if isinstance(stmt, ast.Global) for name in stmt.names}
        self.names.mutated |= declared  # assigned when the function runs
        if self._depth == 0:
            self.names.bound.add(node.name)
            self.names.functions[node.name] = _globals_of(node, declared)
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


def _globals_of(function: ast.FunctionDef | ast.AsyncFunctionDef, declared: set[str]) -> tuple[set[str], set[str]]:
    """The global names a function's body reads, and those it changes in place (or assigns, ``declared``
    global): read as a cell is, without its own names (its parameters, what it assigns)."""
    arguments = function.args
    own = {a.arg for a in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]}
    own |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    body = _names_of(function.body)
    own |= body.bound - declared
    return body.read - own, (body.mutated - own) | declared


def _through_calls(read: list[CellNames]) -> None:
    """Add to each cell the names of the notebook functions it calls, as they were defined then: a cell that
    runs ``next_batch()`` advances the generator the function reads as much as ``next(gen)`` would."""
    functions: dict[str, tuple[set[str], set[str]]] = {}
    for names in read:
        for name in names.bound:  # a name bound again is that function no more, or another one
            functions.pop(name, None)
        functions.update(names.functions)  # those the cell defines, as it calls them after
        reached: set[str] = set()
        todo = [name for name in names.read if name in functions]
        while todo:
            if (name := todo.pop()) not in reached:
                reached.add(name)
                todo.extend(other for other in functions[name][0] if other in functions)
        through = set().union(*(functions[name][0] for name in reached)) - reached
        changed = set().union(*(functions[name][1] for name in reached))
        names.needs |= (through | changed) - names.bound
        names.read |= through
        names.mutated |= changed
        names.calls = {name: through | changed for name in reached}


def cell_names(source: str) -> CellNames:
    """The names a cell binds, reads and mutates (IPython's ``%`` and ``!`` lines are left out)."""
    tree = parsed(source)
    return CellNames() if tree is None else _names_of(tree.body)


def _names_of(statements: list[ast.stmt]) -> CellNames:
    """What statements run one after another (a cell's, a function's body) do with the names at their top level."""
    names = CellNames()
    for statement in statements:
        reader = _Reader()
        reader.visit(statement)
        found = reader.names
        names.needs |= (found.read | found.mutated) - names.bound
        names.bound |= found.bound
        names.read |= found.read
        names.mutated |= found.mutated
        names.functions.update(found.functions)
    return names


@dataclass
class Part:
    """Recipes that share cells, run together in one scratch namespace: ``cells`` oldest first, and for each
    variable the positions in ``cells`` of those it needs."""

    names: list[str]
    cells: list[Cell]
    needs: dict[str, set[int]]
    mutated: set[str]  # what those cells change in place
    # For each cell, what it reads that the restore holds as it read it, bound last by a cell the part does not
    # run: set back before it runs, in case a cell of the part bound it again for a cell before (``_Index.stale``).
    current: list[set[str]]
    # For each cell, what it reads that no cell had bound yet but a later one binds (``sum = 0`` after a cell
    # that called ``sum``): taken out of its namespace before it runs, so that it reads the builtin it read.
    unbound: list[set[str]]
    # What else the cells bind, each with the first later cell the part does not run that uses it (None: none
    # does). One that the cells made sharing a rebuilt variable's objects (the optimizer of a model made
    # anew) is taken with it where no such cell follows (``_companions``).
    also: dict[str, int | None] = field(default_factory=dict)
    # What the cells bind that no later cell binds again: a notebook class among them is the class the restore
    # holds, made by the same cell, and what the part makes of it is made an instance of that one (``_adopt``).
    final: set[str] = field(default_factory=set)


@dataclass
class Recipe:
    """The cells to run again, oldest first, to rebuild ``names``; or why they cannot be."""

    names: list[str]
    cells: list[Cell] = field(default_factory=list)  # every cell replay would run, oldest first
    problems: dict[str, str] = field(default_factory=dict)
    mutated: set[str] = field(default_factory=set)  # what those cells change in place
    parts: list[Part] = field(default_factory=list)  # run one after another, each on its own

    @property
    def runnable(self) -> list[str]:
        return [n for n in self.names if n not in self.problems]

    def describe(self) -> str:
        counts = ", ".join(f"[{c['count']}]" for c in self.cells)
        return f"{', '.join(self.runnable)} (cells {counts})" if self.runnable else ""


class _Index:
    """Where each name is bound and touched in a lineage, for the lookups of ``needed``."""

    def __init__(self, read: list[CellNames], missing: set[str]) -> None:
        self.end = len(read)
        self.bound: dict[str, list[int]] = {}
        self.touched: dict[str, list[int]] = {}
        # What each cell reads that it or a later cell binds again: the restore holds a later value than the one
        # it read (``n = 10`` after ``gen = iter(range(n))``), so it is rebuilt as it was, as a missing one is.
        self.stale: list[set[str]] = []
        later: set[str] = set()
        for names in reversed(read):
            later = later | names.bound
            self.stale.append(names.needs & later)
        self.stale.reverse()
        # The variables each needs from before it that the restore does not hold as it read them; and the
        # functions it calls that reach one: made again with the cells, they look it up in replay's namespace.
        self.uses = [
            names.needs & (missing | stale) | {f for f, reached in names.calls.items() if reached & missing}
            for names, stale in zip(read, self.stale, strict=True)
        ]
        for i, names in enumerate(read):
            for name in names.bound:
                self.bound.setdefault(name, []).append(i)
            for name in names.bound | names.read | names.mutated:
                self.touched.setdefault(name, []).append(i)

    def binding(self, name: str, before: int) -> int | None:
        """The last cell before cell ``before`` that bound ``name``, if any."""
        bound = self.bound.get(name, [])
        at = bisect.bisect_left(bound, before) - 1
        return bound[at] if at >= 0 else None

    def needed(self, name: str) -> set[int]:
        """The cells (by index) that rebuild ``name``: its recipe, and that of each missing variable one of those
        cells uses, as it was before that cell (the binding before it, and the cells that used it since)."""
        chosen: set[int] = set()
        covered: dict[tuple[str, int], int] = {}  # (variable, the cell that bound it): up to which cell it is in
        todo = [(name, self.end)]
        while todo:
            var, end = todo.pop()
            made = self.binding(var, end)
            if made is None:
                continue  # not made before that cell: it fails when run again (NameError), and says so
            if covered.get((var, made), -1) >= end:
                continue
            covered[(var, made)] = end
            touched = self.touched[var]
            for i in touched[bisect.bisect_left(touched, made) : bisect.bisect_left(touched, end)]:
                if i not in chosen:
                    chosen.add(i)
                    todo.extend((other, i) for other in self.uses[i])
        return chosen


def plan(missing: Iterable[str], cells: list[Cell], shared: dict[str, set[str]] | None = None) -> Recipe:
    """The recipe of each missing variable from the lineage ``cells`` (oldest first, as ``Store.cells`` gives).

    ``shared`` maps restored variables to the missing ones they shared objects with when checkpointed. One bound
    after them (``params = list(net.parameters())``, then ``opt = SGD(params)`` in cells that do not name ``net``)
    was made from them: its cells run with theirs, so that a cell that uses it runs on it made again, and it is
    taken with them (``_companions``). Where that would stop a recipe (one of its cells failed), it is not.
    """
    read = [cell_names(c["source"]) for c in cells]
    _through_calls(read)
    names = sorted(set(missing))
    index = _Index(read, set(names))
    along = {
        s
        for s, partners in (shared or {}).items()
        if s in index.bound and any(p in index.bound and index.bound[s][-1] > index.bound[p][-1] for p in partners)
    }
    recipe = _plan(names, read, cells, index, set())
    if along:
        fuller = _plan(names, read, cells, _Index(read, set(names) | along), along)
        if fuller.problems == recipe.problems:
            return fuller
    return recipe


def _plan(names: list[str], read: list[CellNames], cells: list[Cell], index: _Index, along: set[str]) -> Recipe:
    """``plan`` with an ``index`` of ``read`` (the ``cells``), the cells of the variables ``along`` run too."""
    recipe = Recipe(names)
    absent = set(names) | along
    needs: dict[str, set[int]] = {}
    for name in [*names, *sorted(along)]:
        if name not in index.bound:
            recipe.problems[name] = "no recorded cell assigns it"
            continue
        steps = index.needed(name)
        failed = [cells[i] for i in sorted(steps) if cells[i]["status"] != "ok"]
        if failed:
            if name in names:
                recipe.problems[name] = (
                    f"cell [{failed[0]['count']}] that it needs failed; replay never runs a failed cell"
                )
            continue
        needs[name] = steps
    # Recipes that share a cell are one part.
    partition = Partition(needs)
    owner: dict[int, str] = {}
    for name, steps in needs.items():
        for i in steps:
            partition.join(name, owner.setdefault(i, name))
    for group in partition.groups(sorted(needs, key=lambda n: min(needs[n]))):  # in the order of their first cells
        if not (made := sorted(set(group) - along)):
            continue  # only variables made along with a missing one: nothing to rebuild
        indices = sorted(set().union(*(needs[n] for n in group)))
        position = {i: p for p, i in enumerate(indices)}
        recipe.parts.append(
            Part(
                made,
                [cells[i] for i in indices],
                {n: {position[i] for i in needs[n]} for n in group},
                set().union(*(read[i].mutated for i in indices)),
                [
                    {n for n in read[i].needs - index.stale[i] - absent if index.binding(n, i) not in position}
                    for i in indices
                ],
                [{n for n in index.stale[i] - absent if index.binding(n, i) is None} for i in indices],
                _also(made, indices, read, index, cells),
                {n for i in indices for n in read[i].bound if index.bound[n][-1] in position},
            )
        )
    chosen = sorted(set().union(*(needs[n] for p in recipe.parts for n in p.needs)))
    recipe.cells = [cells[i] for i in chosen]
    recipe.mutated = set().union(*(read[i].mutated for i in chosen))
    return recipe


def _also(
    names: list[str], indices: list[int], read: list[CellNames], index: _Index, cells: list[Cell]
) -> dict[str, int | None]:
    """``Part.also``: what the cells at ``indices`` bind besides ``names``, each with the count of the first later
    cell that uses it and is not one of them (None: there is none)."""
    also: dict[str, int | None] = {}
    for name in set().union(*(read[i].bound for i in indices)) - set(names):
        last = max(i for i in indices if name in read[i].bound)
        after = [i for i in index.touched[name] if i > last and i not in indices]
        also[name] = cells[after[0]]["count"] if after else None
    return also


def _companions(
    part: Part, made: dict[str, Any], rebuilt: list[str], restored: dict[str, Any], stopped: dict[str, str]
) -> dict[str, str]:
    """The restored variables the part's cells ``made`` again sharing objects with a ``rebuilt`` one, directly or
    through each other (an optimizer on a model's parameters, its scheduler), with what becomes of each: taken
    from the replay with it, unless a later cell that replay does not run uses it (then it is kept as restored,
    and no longer shares them). Where a rebuilt variable holds one of them itself (the frame a generator reads),
    they are all kept as restored, as every restored variable is; so is one a cell of its own ``stopped``."""
    fresh = {
        n: v
        for n, v in made.items()
        if n in part.also
        and n in restored
        and n not in stopped
        and v is not restored[n]
        and not isinstance(v, type)  # see ``_adopt``
    }
    found = sharing({n: made[n] for n in rebuilt}, fresh, made) if rebuilt and fresh else None
    if found is None:
        return {}
    held, groups = found
    outcome = {}
    for names in groups:
        partners = ", ".join(n for n in names if n in rebuilt)
        if not partners or held.intersection(names):
            continue
        for name in (n for n in names if n in fresh):
            later = part.also[name]
            outcome[name] = (
                f"replayed with {partners} (they share objects)"
                if later is None
                else f"kept as restored, no longer sharing objects with {partners}: cell [{later}] uses it after"
                " the cells replay ran"
            )
    return outcome


def _adopt(values: Iterable[Any], classes: dict[type, type], namespaces: Iterable[dict[str, Any]]) -> None:
    """Make each object ``values`` hold that is an instance of a key of ``classes`` an instance of the class it maps
    to: the class a replayed cell defined again is the restored one, so that ``isinstance(net, Net)`` holds and
    pickle finds ``net``'s class as ``__main__.Net``. The walk does not enter ``namespaces``, code or classes."""
    seen = {id(n) for n in namespaces}
    stack = list(values)
    while stack:
        o = stack.pop()
        if id(o) in seen or isinstance(o, _NOT_WALKED):
            continue
        seen.add(id(o))
        cls = classes.get(type(o))
        if cls is not None:
            with contextlib.suppress(TypeError):  # a layout that differs after all: it stays as it was made
                o.__class__ = cls
        stack.extend(gc.get_referents(o))


def _round_trip(value: Any) -> Any:
    """A copy of ``value`` as a checkpoint saves and restores it (an open file: reopened at its position)."""
    main = sys.modules["__main__"]  # the notebook's module in a kernel: its functions are pickled by value
    return serialize.loads(serialize.dumps({"value": value}, main), main)["value"]


def _copy(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Copies of ``values`` for replay to change; and why those that cannot be copied cannot.

    One deep copy of them all keeps what they share shared. An open file that is
    written is not copied: replay writes through the kernel's own handle (writing
    again is a side effect like any other, and a second handle on the file would
    write over what the first writes next); one that is read is reopened at its
    position. Where the deep copy fails, each is copied alone, by a deep copy or
    else as a checkpoint saves and restores it.
    """
    seed: dict[int, Any] = {}
    failed: dict[str, str] = {}
    for name, value in values.items():
        if type(value) in _FILES and not value.closed:
            try:
                seed[id(value)] = value if value.writable() else _round_trip(value)
            except Exception as e:  # the file is gone
                failed[name] = f"{type(e).__name__}: {e}"
    rest = {n: v for n, v in values.items() if n not in failed}
    with contextlib.suppress(Exception):
        return copy.deepcopy(rest, dict(seed)), failed
    copies = {}
    for name, value in rest.items():
        try:
            copies[name] = copy.deepcopy(value, dict(seed))
            continue
        except Exception as e:
            why = f"{type(e).__name__}: {e}"
        try:
            copies[name] = _round_trip(value)
        except Exception:
            failed[name] = why
    return copies, failed


def _run_part(part: Part, restored: dict[str, Any], namespace: dict[str, Any], run_cell: RunCell) -> dict[str, str]:
    """Run one part in a scratch copy of the ``restored`` namespace; put in ``namespace`` the variables whose
    cells all ran."""
    reads = [cell_names(c["source"]) for c in part.cells]
    stopped: dict[str, str] = {}  # variable: why it is not replayed
    copies, uncopyable = _copy({n: restored[n] for n in sorted(part.mutated) if n in restored})
    files = [_files_named(cell, reads[p], restored) for p, cell in enumerate(part.cells)]
    for name in part.needs:
        for p in sorted(part.needs[name]):
            gone = sorted(reads[p].mutated & set(uncopyable))
            if gone:
                stopped[name] = (
                    f"not replayed: cell [{part.cells[p]['count']}] changes {gone[0]}, which cannot be copied "
                    f"({uncopyable[gone[0]]}), and replay never changes the kernel's own"
                )
                break
    seed = {**restored, **copies}
    scratch = dict(seed)
    for p, cell in enumerate(part.cells):
        users = [n for n in part.needs if p in part.needs[n] and n not in stopped]
        if not users:
            continue  # every variable that needs it is stopped already
        scratch.update({n: seed[n] for n in part.current[p] if n in seed})
        for name in part.unbound[p]:
            scratch.pop(name, None)
        try:
            run_cell(cell["source"], scratch)
        except Exception as e:
            why = f"not replayed: cell [{cell['count']}] failed when run again: {type(e).__name__}: {e}"
            stopped.update(dict.fromkeys(users, why))
    made = dict(scratch)
    # What a function or generator the cells made looks up when it runs later: the restored namespace, as it
    # looked up the kernel's then, not the older values the part bound for its cells.
    scratch.update(restored)
    outcome: dict[str, str] = {}
    for name in part.names:
        if name in stopped:
            outcome[name] = stopped[name]
        elif name in made:
            outcome[name] = "replayed" + "".join(
                f"; cell [{count}] read {path}, which changed since it ran: the value may not be the checkpoint's"
                for count, path in _changed_since(part, part.needs[name], files)[:1]
            )
        else:
            outcome[name] = "the replayed cells did not assign it"
    rebuilt = [n for n in part.names if rebuilt_by(outcome[n])]
    outcome.update(_companions(part, made, rebuilt, restored, stopped))
    classes = {
        made[n]: restored[n]
        for n in part.final & restored.keys() & made.keys()
        if isinstance(restored[n], type)
        and isinstance(made[n], type)
        and made[n] is not restored[n]
        # An Enum's members are its instances: one made again is not the restored member, whatever its class.
        and not isinstance(made[n], enum.EnumMeta)
    }
    if classes:
        taken = [made[n] for n, what in outcome.items() if rebuilt_by(what) or what.startswith("replayed with")]
        _adopt(taken, classes, (scratch, restored, made, vars(builtins)))
    for name, what in outcome.items():
        if rebuilt_by(what) or what.startswith("replayed with"):
            namespace[name] = scratch[name] = made[name]
    return outcome


def rebuilt_by(outcome: str) -> bool:
    """Whether a replay's outcome for a variable is that its cells rebuilt it (``replayed``, with a note or not)."""
    return outcome == "replayed" or outcome.startswith("replayed; ")


def _files_named(cell: Cell, names: CellNames, namespace: dict[str, Any]) -> dict[str, float]:
    """The files a cell names, with when each was last written: a path in its code, or one a variable it reads
    holds (``pd.read_csv(path)``)."""
    tree = parsed(cell["source"])
    if tree is None:
        return {}
    named: set[Any] = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    named.update(os.fspath(v) for n in names.read if isinstance(v := namespace.get(n), (str, os.PathLike)))
    found = {}
    for path in named:
        try:
            info = os.stat(path)
        except (OSError, ValueError, TypeError):  # no such file, a string that is no path
            continue
        if stat.S_ISREG(info.st_mode):
            found[os.path.abspath(path)] = info.st_mtime
    return found


def _changed_since(part: Part, needed: set[int], files: list[dict[str, float]]) -> list[tuple[int | None, str]]:
    """The files the cells ``needed`` of a part read that were written after the last of them ran, with the cell
    that reads each: run again, they read what those files hold now, which the variable they rebuild may show. A
    file one of these cells wrote itself (a database a later one of them inserted into) is not one."""
    ran = [part.cells[p].get("time") for p in needed]
    if not ran or None in ran:
        return []
    last = max(t for t in ran if t is not None)
    return [(part.cells[p]["count"], f) for p in sorted(needed) for f, at in sorted(files[p].items()) if at > last]


def run_recipe(recipe: Recipe, namespace: dict[str, Any], run_cell: RunCell) -> dict[str, str]:
    """Run each part of a recipe in a scratch copy of ``namespace`` and take the missing variables from it.

    Returns, for each variable the recipe was for, what happened: ``replayed`` or why not.
    """
    parts = recipe.parts
    if not parts and recipe.runnable:  # a recipe made by hand: one part, every variable needing every cell
        everything = set(range(len(recipe.cells)))
        needs = dict.fromkeys(recipe.runnable, everything)
        none = [set[str]() for _ in recipe.cells]
        parts = [Part(recipe.runnable, recipe.cells, needs, recipe.mutated, none, none)]
    outcome = dict(recipe.problems)
    restored = dict(namespace)  # what each part starts from: never what another part rebuilt
    for part in parts:
        outcome.update(_run_part(part, restored, namespace, run_cell))
    return outcome


def exec_cell(source: str, namespace: dict[str, Any]) -> None:
    """Run a cell's source as plain Python (the IPython extension runs it through the shell instead)."""
    exec(compile(source, "<replay>", "exec"), namespace)
