"""What the cells registered with IPython itself: their magics and event callbacks.

A notebook can extend its shell: ``@register_line_magic`` (and ``_cell_``, ``_line_cell_``) on a function,
``get_ipython().register_magics(Magics)``, ``get_ipython().events.register("post_run_cell", f)``. The shell
keeps those, not a variable, and a fresh kernel has none: after a restore ``%mymagic`` was "not found", and
a callback no longer ran. A whole restore makes them again (``apply``) from the signed cells that ran without
error, read (``ast``) and never run again, with the objects the restore brought back under the names they
were defined as: a function or class the checkpoint does not hold is named, with the cell that made it.

What cannot be made again from a variable is named with the cell to run again: an input or AST transformer
(``input_transformers_cleanup.append(f)``), a custom exception handler (``set_custom_exc``). ``%alias`` and
``%config`` lines are configuration (``shellconfig.py``).
"""

from __future__ import annotations

import ast
import contextlib
from collections.abc import Iterable
from typing import Any

# The decorators that register a notebook's function as a magic, with the kind of magic each makes.
_MAGIC_DECORATORS = {
    "register_line_magic": "line",
    "register_cell_magic": "cell",
    "register_line_cell_magic": "line_cell",
}
# What the shell holds that no variable names again: the attribute (or method) a cell reaches it by.
_NOT_MADE_AGAIN = {
    "input_transformers_cleanup": "an input transformer",
    "input_transformers_post": "an input transformer",
    "ast_transformers": "an AST transformer",
    "set_custom_exc": "a custom exception handler",
}


# A cell that registers anything with the shell holds one of these.
_WORDS = ("register", *_NOT_MADE_AGAIN)


def apply(shell: Any, cells: Iterable[tuple[int | None, str]]) -> dict[str, str]:
    """Register again in ``shell`` what the cells (execution count, source; those that ran without error, oldest
    first) registered with it, with the objects its namespace holds now; returns what was not, with why."""
    failed: dict[str, str] = {}
    for count, source in cells:
        if not any(word in source for word in _WORDS):  # most cells: not parsed
            continue
        try:
            tree = ast.parse(shell.transform_cell(source))
        except SyntaxError:
            continue
        where = f"cell [{count}]" if count is not None else "a cell"
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for decorator in node.decorator_list:
                    _magic(shell, node.name, decorator, where, failed)
            elif isinstance(node, ast.Call):
                _call(shell, node, where, failed)
            if isinstance(node, ast.Attribute) and node.attr in _NOT_MADE_AGAIN:
                what = _NOT_MADE_AGAIN[node.attr]
                failed[f"{what} ({where})"] = f"not registered again by a restore: run {where} again"
    return failed


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
        failed[f"%{magic}"] = f"a magic {where} defined, not registered again: the checkpoint has no {function}"
        return
    shell.register_magic_function(found, kind, magic)


def _call(shell: Any, call: ast.Call, where: str, failed: dict[str, str]) -> None:
    """``register_magics(Name)`` and ``events.register("event", name)``, made again with the objects named."""
    method = _name(call.func)
    on_events = isinstance(call.func, ast.Attribute) and _name(call.func.value) == "events"
    if method == "register_magics" and len(call.args) == 1 and isinstance(call.args[0], ast.Name):
        name = call.args[0].id
        found = shell.user_ns.get(name)
        if found is None:
            failed[f"magics {name}"] = f"registered {where}, not again: the checkpoint has no {name}"
            return
        shell.register_magics(found)
    elif method == "register" and on_events and len(call.args) == 2:
        event, callback = call.args
        if not (isinstance(event, ast.Constant) and isinstance(event.value, str) and isinstance(callback, ast.Name)):
            return
        found = shell.user_ns.get(callback.id)
        if not callable(found):
            failed[f"{event.value} callback {callback.id}"] = (
                f"registered {where}, not again: the checkpoint has no {callback.id}"
            )
            return
        registered = shell.events.callbacks.get(event.value, [])
        for old in [f for f in registered if _same(f, found)]:  # the one it replaces, in the kernel it ran in
            with contextlib.suppress(ValueError):
                shell.events.unregister(event.value, old)
        shell.events.register(event.value, found)


def _same(registered: Any, found: Any) -> bool:
    """Whether a registered callback is the notebook's function of the same name (the one the restore replaced)."""
    return registered is found or (
        getattr(registered, "__module__", None) == "__main__"
        and getattr(registered, "__qualname__", None) == getattr(found, "__qualname__", "")
    )
