"""The package's modules import each other without cycles (every import counts, in a function or under
TYPE_CHECKING), and the CLI and the server extension load no IPython."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "jupyter_ckpt"


def imports(path: Path, modules: set[str]) -> set[str]:
    """The ``modules`` of the package that a module imports anywhere in its source (``__init__``: the package)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0 and not (node.module or "").startswith("jupyter_ckpt"):
                continue
            parts = (node.module or "").split(".")[1:] if node.level == 0 else (node.module or "").split(".")
            target = parts[0] if parts and parts[0] else None
            if target is None:  # from . import x: x is a module, or a name of the package's __init__
                found |= {a.name if a.name in modules else "__init__" for a in node.names}
            else:
                found.add(target)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "jupyter_ckpt":
                    found.add(parts[1] if len(parts) > 1 else "__init__")
    found.discard(path.stem)
    return found


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, set()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = list(PACKAGE.glob("*.py"))
    return {p.stem: imports(p, {q.stem for q in paths}) for p in paths}


def test_the_import_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "module.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "import jupyter_ckpt.store\n"
        "from . import errors, save\n"
        "if TYPE_CHECKING:\n"
        "    from .server import CkptServerApp\n"
        "def f():\n"
        "    from .magics import CheckpointMagics\n"
        "    from jupyter_ckpt.widget import Timeline\n"
    )
    found = imports(source, {"store", "errors", "server", "magics", "widget"})
    assert found == {"store", "errors", "__init__", "server", "magics", "widget"}
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}, "d": {"d"}}) == [{"a", "b"}]


def test_the_package_has_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cli_and_the_server_extension_do_not_import_ipython() -> None:
    code = "import sys, jupyter_ckpt.cli, jupyter_ckpt.config, jupyter_ckpt.format, jupyter_ckpt.server\n"
    code += "print(sorted(m for m in sys.modules if m.split('.')[0] == 'IPython'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
