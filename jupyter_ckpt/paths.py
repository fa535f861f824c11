"""Where the session's code finds files and modules: the working directory and the import path.

``os.chdir("data")`` and ``sys.path.insert(0, "../src")`` change the process, not a variable, and the
cells after them depend on it: a relative ``open``, an ``import`` of the project's own package, the
unpickling of an instance of one of its classes. A checkpoint keeps what the session changed of them
since jupyter-ckpt was loaded (``Start``), as plain data in the manifest:

- the working directory, relative to the starting one when it lies inside it (``data``), else absolute;
- the entries added to ``sys.path``, those put before every starting entry apart from the others.

A restore adds the entries ``sys.path`` lacks before it imports or unpickles anything, where they were
(the front, or the end), if they name a directory here; none is ever removed, since a module imported
through one may still need it. Once the namespace is back, a whole restore changes to the working
directory, a relative one taken from the restoring kernel's starting directory: a notebook restored
after it moved, or on another machine, finds its ``data`` beside it. A directory that does not exist is
reported and the working directory stays as it is. If the restore fails, ``sys.path`` is put back.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

WORKING_DIRECTORY = "working directory"


@dataclass(frozen=True)
class Start:
    """The working directory and import path a kernel had when jupyter-ckpt was loaded in it."""

    cwd: str
    sys_path: tuple[str, ...]

    @classmethod
    def now(cls) -> Start:
        return cls(_current() or os.sep, tuple(p for p in sys.path if isinstance(p, str)))


def read(start: Start) -> dict[str, Any]:
    """What the session changed since ``start``: ``cwd`` (if it changed) and the ``sys.path`` entries added."""
    found: dict[str, Any] = {}
    with contextlib.suppress(OSError):  # a working directory removed under the kernel: not kept
        if (cwd := os.getcwd()) != start.cwd:
            relative = os.path.relpath(cwd, start.cwd)
            outside = relative == os.pardir or relative.startswith(os.pardir + os.sep)
            found["cwd"] = cwd if outside else relative
    entries = [p for p in sys.path if isinstance(p, str)]
    first_kept = next((i for i, p in enumerate(entries) if p in start.sys_path), len(entries))
    added = [(i < first_kept, p) for i, p in enumerate(entries) if p not in start.sys_path]
    if added:
        found["sys_path_front"] = [p for front, p in added if front]
        found["sys_path_end"] = [p for front, p in added if not front]
    return found


def changes(now: dict[str, Any], then: dict[str, Any]) -> list[str]:
    """How two checkpoints' paths differ, as the timeline's changed column names it."""
    moved = [WORKING_DIRECTORY] if now.get("cwd") != then.get("cwd") else []
    keys = ("sys_path_front", "sys_path_end")
    return moved + (["sys.path"] if any(now.get(k) != then.get(k) for k in keys) else [])


@contextlib.contextmanager
def applied(kept: dict[str, Any] | None, start: Start | None) -> Iterator[dict[str, str]]:
    """Inside the block (a restore's imports and unpickling), ``sys.path`` has the kept entries it lacks;
    after it, the working directory is the kept one, if ``start`` is given (a whole restore). Yields what
    could not be applied, with why, filled in as the block ends. A checkpoint older than paths (``kept``
    None) leaves both alone; if the block raises, ``sys.path`` is put back as it was.

    An entry relative to a directory (``src``, ``..``) may have been added before the session moved or
    after: inside the block it is the path it names from the directory it is now in, else from the kept one,
    and after it, it is written as the session wrote it.
    """
    failed: dict[str, str] = {}
    if kept is None:
        yield failed
        return
    target = os.path.normpath(os.path.join(start.cwd, kept.get("cwd", os.curdir))) if start is not None else None
    bases = [b for b in (_current(), target) if b is not None]
    added: dict[str, str] = {}  # the path each missing entry names here -> the entry as the session wrote it
    front: list[str] = []
    end: list[str] = []
    for name, into in (("sys_path_front", front), ("sys_path_end", end)):
        for entry in kept.get(name, []):
            where = next((os.path.join(b, entry) for b in bases if os.path.exists(os.path.join(b, entry))), None)
            if entry not in sys.path and where is not None and where not in added:
                added[where] = entry
                into.append(where)
    before = list(sys.path)
    sys.path[:0] = front
    sys.path.extend(end)
    try:
        yield failed
    except BaseException:
        sys.path[:] = before
        raise
    sys.path[:] = [added.get(p, p) for p in sys.path]
    if target is not None:
        try:
            os.chdir(target)
        except OSError as e:
            failed[WORKING_DIRECTORY] = f"{target}: {e.strerror}; it stays {_current() or 'where it is'}"


def _current() -> str | None:
    """The working directory, or None if it was removed."""
    try:
        return os.getcwd()
    except OSError:
        return None
