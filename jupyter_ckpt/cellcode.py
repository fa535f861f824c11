"""Reading a cell's code: its statements with IPython's lines left out (``parsed``), the method names that
change the object they are called on (``MUTATORS``), and whether it only ran ``%checkpoint`` lines. Replay
(recipes.py) reads from it what each cell binds and changes; attributes.py, which attributes of modules the
cells change; the cell hooks and undo, which cells changed no state."""

from __future__ import annotations

import ast
import re

# Method names that change their object in place: a call ``x.append(...)`` mutates ``x``.
MUTATORS = frozenset(
    {"append", "extend", "insert", "update", "pop", "popitem", "remove", "clear", "add", "discard"}
    | {"setdefault", "sort", "reverse", "fill", "resize", "put", "send", "write", "execute", "executemany"}
    | {"writelines", "read", "readline", "readlines", "seek", "truncate"}
)
_MAGIC = re.compile(r"^\s*[%!]")


def parsed(source: str) -> ast.Module | None:
    """A cell's Python code, with IPython's ``%`` and ``!`` lines left out; None for a cell magic's body or
    code that does not parse."""
    if source.lstrip().startswith("%%"):
        return None  # a cell magic: its body is not Python
    code = "\n".join("" if _MAGIC.match(line) else line for line in source.splitlines())
    try:
        return ast.parse(code)
    except SyntaxError:
        return None


def only_checkpoint_magics(source: str) -> bool:
    """Whether a cell holds nothing but ``%checkpoint`` / ``%ckpt`` lines (and blanks or comments)."""
    lines = [line.strip() for line in source.splitlines()]
    return any(lines) and all(not line or line.startswith(("#", "%checkpoint", "%ckpt")) for line in lines)
