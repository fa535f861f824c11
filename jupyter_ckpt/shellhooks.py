"""What the cells registered with IPython itself: magics, event callbacks, transformers, exception handlers.

A notebook can extend its shell: ``@register_line_magic`` (and ``_cell_``, ``_line_cell_``) on a function,
``get_ipython().register_magics(Magics)``, ``get_ipython().events.register("post_run_cell", f)``,
``get_ipython().input_transformers_cleanup.append(f)`` (``_post``, ``ast_transformers``),
``get_ipython().set_custom_exc((ValueError,), handler)``. The shell keeps those, not a variable, and a fresh
kernel has none: after a restore ``%mymagic`` was "not found", and a callback no longer ran. A whole restore
makes them again (``apply``) from the signed cells that ran without error, read (``ast``) and never run again,
with the objects the restore brought back under the names the cells gave them. One registered with an object
no name holds (a lambda written in the call), or whose name the checkpoint lacks, is named in the restore's
report with the cell to run again. ``%alias`` and ``%config`` lines are configuration (``shellconfig.py``).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
from collections.abc import Iterable
from typing import Any

# The decorators that register a notebook's function as a magic, with the kind of magic each makes.
_MAGIC_DECORATORS = {
    "register_line_magic": "line",
    "register_cell_magic": "cell",
    "register_line_cell_magic": "line_cell",
}
# The shell's lists of transformers a cell appends to, and what each holds.
_TRANSFORMERS = {
    "input_transformers_cleanup": "an input transformer",
    "input_transformers_post": "an input transformer",
    "ast_transformers": "an AST transformer",
}
_CUSTOM_EXC = "set_custom_exc"
# A cell that registers anything with the shell holds one of these.
_WORDS = ("register", _CUSTOM_EXC, *_TRANSFORMERS)


def apply(shell: Any, cells: Iterable[tuple[int | None, str]]) -> dict[str, str]:
    """Register again in ``shell`` what the cells (execution count, source; those that ran without error, oldest
    first) registered with it, with the objects its namespace holds now; returns what was not, with why."""
    failed: dict[str, str] = {}
    for count, source in cells:
        if not any(word in source for word in _WORDS):  # most cells: not parsed
            continue
        try:  # the cell as it ran: through the transformers registered in the cells before it
            tree = ast.parse(shell.transform_cell(source))
        except Exception:  # a cell that never parsed registered nothing
            continue
        where = f"cell [{count}]" if count is not None else "a cell"
        made: set[int] = set()  # the transformer lists reached by a call made again
        for node in ast.walk(tree):
            try:
                if isinstance(node, ast.FunctionDef):
                    for decorator in node.decorator_list:
                        _magic(shell, node.name, decorator, where, failed)
                elif isinstance(node, ast.Call):
                    _call(shell, node, where, failed, made)
            except Exception as e:  # one the shell refuses: named, the others made
                failed[f"what {where} registered"] = f"not registered again: {type(e).__name__}: {e}"
        for node in ast.walk(tree):  # reached otherwise (``+= [f]``): run again by the user
            if isinstance(node, ast.Attribute) and node.attr in _TRANSFORMERS and id(node) not in made:
                failed[f"{_TRANSFORMERS[node.attr]} ({where})"] = _again(where)
    return failed


def _again(where: str) -> str:
    return f"not registered again by a restore: run {where} again"


def _name(node: ast.expr) -> str | None:
    """The last name of ``f``, ``m.f`` or ``f(...)``."""
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else None


def _magic(shell: Any, function: str, decorator: ast.expr, where: str, failed: dict[str, str]) -> None:
    kind = _MAGIC_DECORATORS.get(_name(decorator) or "")
    if kind is None:
        return
    magic = function
    if isinstance(decorator, ast.Call) and decorator.args and isinstance(decorator.args[0], ast.Constant):
        magic = str(decorator.args[0].value)  # @register_line_magic("name")
    found = shell.user_ns.get(function)
    if not callable(found):
        failed[f"%{magic} ({where})"] = _again(where)
        return
    shell.register_magic_function(found, kind, magic)


def _call(shell: Any, call: ast.Call, where: str, failed: dict[str, str], made: set[int]) -> None:
    """``register_magics(Name)``, ``events.register("event", name)``, ``<transformers>.append(name)`` and
    ``set_custom_exc((Error, ...), name)``, made again with the objects named."""
    method, ns = _name(call.func), shell.user_ns
    on = _name(call.func.value) if isinstance(call.func, ast.Attribute) else None
    named = [ns.get(a.id) if isinstance(a, ast.Name) else None for a in call.args]
    if method == "register_magics" and len(call.args) == 1:
        if named[0] is None:
            failed[f"magics ({where})"] = _again(where)
            return
        shell.register_magics(named[0])
    elif method == "register" and on == "events" and len(call.args) == 2:
        event = call.args[0]
        if not (isinstance(event, ast.Constant) and isinstance(event.value, str)):
            return
        if not callable(named[1]):
            failed[f"a {event.value} callback ({where})"] = _again(where)
            return
        for old in [f for f in shell.events.callbacks.get(event.value, []) if _same(f, named[1])]:
            with contextlib.suppress(ValueError):  # the one it replaces, in the kernel it ran in
                shell.events.unregister(event.value, old)
        shell.events.register(event.value, named[1])
    elif method in ("append", "insert") and on in _TRANSFORMERS and call.args:
        assert isinstance(call.func, ast.Attribute)  # ``on`` is its value's name
        made.add(id(call.func.value))
        found = named[-1]
        if found is None:
            failed[f"{_TRANSFORMERS[on]} ({where})"] = _again(where)
            return
        transformers = getattr(shell, on)
        transformers[:] = [f for f in transformers if not _same(f, found)]
        transformers.append(found)
    elif method == _CUSTOM_EXC and len(call.args) == 2:
        kinds = call.args[0].elts if isinstance(call.args[0], ast.Tuple) else [call.args[0]]
        types = [ns.get(k.id, getattr(builtins, k.id, None)) if isinstance(k, ast.Name) else None for k in kinds]
        if not callable(named[1]) or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
            failed[f"a custom exception handler ({where})"] = _again(where)
            return
        shell.set_custom_exc(tuple(types), named[1])


def _same(registered: Any, found: Any) -> bool:
    """Whether a registered callback or transformer is the notebook's of the same name (the one a restore in the
    kernel it ran in replaces)."""

    def who(thing: Any) -> tuple[Any, str]:
        return getattr(thing, "__module__", None), getattr(thing, "__qualname__", None) or type(thing).__qualname__

    return registered is found or (who(registered)[0] == "__main__" and who(registered) == who(found))
