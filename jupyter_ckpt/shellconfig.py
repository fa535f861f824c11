"""The IPython configuration the cells' magics set: ``%load_ext autoreload``, ``%autoreload 2``,
``%precision 3``, ``%config InlineBackend.figure_format = 'retina'``.

The shell keeps it, not a variable, and a fresh kernel starts without it: after a crash restore, the
modules the notebook edits were no longer reloaded as they changed. The Checkpointer keeps, as plain data
in the manifest, the configuration lines of the cells that ran without error along the session's lineage
(``merged``), one line per setting, where its first line ran:

- ``%load_ext NAME...`` and ``%aimport MODULES`` once each;
- the last ``%autoreload MODE``, ``%precision`` (without an argument it resets), ``%xmode MODE`` and
  ``%pdb on|off``, the last ``%config`` of each option, and the last ``%alias`` of each name (``%unalias``
  takes it away).

Only lines at a cell's top level count; a line that acts rather than configures is not kept: ``%autoreload``
alone or ``now`` (reload now), ``%xmode`` or ``%pdb`` alone (toggle), ``%config`` without ``=`` (show).
``%matplotlib`` is not kept either (the frontend decides the backend, as for matplotlib's settings), nor
``%env`` (environment.py keeps the environment itself).

A whole restore runs the kept lines again in the kernel (``apply``), quietly and in order: an extension
already loaded stays as it is, and a line that fails (an extension this kernel cannot import) is named
with why while the others run. Like an entry added to ``sys.path``, a setting a later cell changed is taken
back by an undo only where the checkpoint's own lines set it.

The core only reads the lines (``merged``); the IPython side runs them (``apply``, given the shell).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator
from typing import Any

CONFIGURATION = "IPython configuration"  # how the timeline's changed column names it

# The magics whose lines configure the shell, and the arguments that make a line act rather than configure.
_CONFIGURING: dict[str, tuple[str, ...]] = {
    "load_ext": ("", "jupyter_ckpt"),  # loading this extension is what made the Checkpointer
    "aimport": ("",),
    "autoreload": ("", "now"),
    "precision": (),
    "config": ("",),
    "xmode": ("",),
    "pdb": ("",),
    "alias": ("",),
    "unalias": ("",),
}


def merged(kept: list[str], source: str) -> list[str]:
    """``kept`` with the configuration lines of a cell that ran without error: a line of a setting kept
    already takes that one's place, any other goes at the end. Returns a new list."""
    out = list(kept)
    for line in _lines(source):
        setting = _setting(line)
        at = next((i for i, other in enumerate(out) if _setting(other) == setting), None)
        if line.startswith("unalias "):  # the alias is gone: nothing to make again
            out = [other for other in out if _setting(other) != setting]
        elif at is None:
            out.append(line)
        else:
            out[at] = line
    return out


def changes(now: list[str], then: list[str]) -> list[str]:
    """How two checkpoints' configurations differ, as the timeline's changed column names it."""
    return [CONFIGURATION] if now != then else []


def apply(shell: Any, lines: list[str]) -> dict[str, str]:
    """Run the kept configuration lines again in ``shell``, quietly; returns those that failed, with why."""
    failed: dict[str, str] = {}
    for line in lines:
        name, _, args = line.partition(" ")
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # "Exception reporting mode: Plain"
                if name == "load_ext":
                    for extension in args.split():  # the manager is quiet about one loaded already
                        shell.extension_manager.load_extension(extension)
                else:
                    shell.run_line_magic(name, args)
        except Exception as e:
            failed[f"%{line}"] = f"not run again: {type(e).__name__}: {e}"
    return failed


def _lines(source: str) -> Iterator[str]:
    for text in source.splitlines():
        if not text.startswith("%") or text.startswith("%%"):
            continue
        name, _, args = text[1:].partition(" ")
        args = args.strip()
        acts = _CONFIGURING.get(name)
        if acts is None or args in acts or (name == "config" and "=" not in args):
            continue
        yield f"{name} {args}".rstrip()


def _setting(line: str) -> str:
    """What a kept line sets: lines of the same setting replace one another."""
    name, _, args = line.partition(" ")
    if name in ("load_ext", "aimport"):
        return line
    if name == "config":
        return f"config {args.partition('=')[0].strip()}"
    if name in ("alias", "unalias"):
        return f"alias {args.split()[0]}"
    return name
