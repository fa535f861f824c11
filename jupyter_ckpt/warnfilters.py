"""The warning filters the cells set: ``warnings.filterwarnings("ignore", category=FutureWarning)``,
``warnings.simplefilter("error")``.

A filter lives in the ``warnings`` module, not in a variable, and a fresh kernel starts without the ones
the session set: a restore into one would show every warning the notebook had silenced, or stop raising
the ones it made errors. A checkpoint keeps, as plain data in the manifest, how the session changed the
filters since jupyter-ckpt was loaded (``Start``):

- the filters added, those put before every starting filter apart from the others;
- the starting filters removed (``warnings.resetwarnings()``).

A filter is kept as its action, the pattern of its message, its category's ``module:qualname``, the
pattern of its module and its line. One whose category could not be found again by that name (a class
made inside a function) is not kept.

A whole restore (an undo too) makes the filters what they were at the checkpoint, around the restoring
kernel's own starting filters: a filter set after the checkpoint goes, one a fresh kernel starts with
stays, and so does one for a category a library defines (torch's ``TracerWarning``), which that library
set as it was imported since: an undo leaves it imported. A category the notebook defined is the class
the restore brought back; a filter whose category cannot be found (its module is gone) is reported, and
the others are set.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from typing import Any

from . import serialize

WARNING_FILTERS = "warnings filters"  # how the timeline's changed column names them

# An entry of ``warnings.filters``: (action, message regex or None, category, module regex or None, line).
Entry = tuple[Any, ...]
# The same as plain data: [action, message pattern or None, "module:qualname" of the category, module pattern
# or None, line].
Filter = list[Any]


@dataclass(frozen=True)
class Start:
    """The warning filters a kernel had when jupyter-ckpt was loaded in it."""

    filters: tuple[Entry, ...]

    @classmethod
    def now(cls) -> Start:
        return cls(tuple(warnings.filters))


def read(start: Start, notebook: dict[str, Any]) -> dict[str, Any]:
    """How the session changed the filters since ``start``: ``front`` and ``end`` (added), ``removed``; empty if
    it did not. ``notebook`` is the namespace the cells' own categories are found in. Never raises: filters
    that cannot be read (an entry made by hand of objects that are not a filter's) are not kept."""
    entries = list(warnings.filters)  # compared, never hashed: an entry made by hand may not hash
    found: dict[str, Any] = {}
    try:
        first_kept = next((i for i, f in enumerate(entries) if f in start.filters), len(entries))
        added = [(i < first_kept, _plain(f, notebook)) for i, f in enumerate(entries) if f not in start.filters]
        if any(plain is not None for _, plain in added):
            found["front"] = [plain for front, plain in added if front and plain is not None]
            found["end"] = [plain for front, plain in added if not front and plain is not None]
        removed = [plain for f in start.filters if f not in entries and (plain := _plain(f, notebook)) is not None]
    except Exception:
        return {}
    if removed:
        found["removed"] = removed
    return found


def apply(kept: dict[str, Any] | None, start: Start, notebook: dict[str, Any]) -> dict[str, str]:
    """Make the filters those ``kept`` describes, around this kernel's starting ones (``start``) but those it
    removed, with the notebook's categories found in ``notebook``. Returns the filters that could not be set,
    by label, with why; never raises. A checkpoint older than warning filters (``kept`` None) leaves them
    alone."""
    failed: dict[str, str] = {}
    if kept is None:
        return failed
    made: dict[str, list[Entry]] = {"front": [], "end": []}
    for where, into in made.items():
        for plain in kept.get(where, []):
            try:
                into.append(_entry(plain, notebook))
            except Exception as e:
                failed[label(plain)] = f"not set again: {type(e).__name__}: {e}"
    removed = kept.get("removed", [])
    added = made["front"] + made["end"]
    staying = [f for f in start.filters if f not in added and _plain(f, notebook) not in removed]
    # A library imported since (it stays imported) keeps the filters it set as it was: its newest, so first.
    libraries = [
        f for f in warnings.filters if f not in start.filters and f not in added and _of_a_library(f, notebook)
    ]
    warnings.filters[:] = libraries + made["front"] + staying + made["end"]  # type: ignore[index]  # typed Sequence
    mutated = getattr(warnings, "_filters_mutated", None)  # CPython's: the "once" and "default" registries start again
    if mutated is not None:
        mutated()
    return failed


def _of_a_library(entry: Entry, notebook: dict[str, Any]) -> bool:
    """Whether a filter is for a warning category a library defines (torch's ``TracerWarning``), not Python's
    own (``FutureWarning``) or the notebook's: one that library set as it was imported."""
    category = _category(entry)
    return category is not None and category.__module__ not in ("builtins", "warnings", notebook.get("__name__"))


def label(plain: Filter) -> str:
    """How a kept filter is named in a restore's report: ``warnings filter ignore builtins:FutureWarning``."""
    return f"warnings filter {plain[0]} {plain[2]}"


def _category(entry: Entry) -> type | None:
    """A filter's category, or None for an entry made by hand, and not as ``warnings`` makes them."""
    category = entry[2] if isinstance(entry, tuple) and len(entry) == 5 else None
    return category if isinstance(category, type) else None


def _plain(entry: Entry, notebook: dict[str, Any]) -> Filter | None:
    category = _category(entry)
    path = serialize.path_of(category, notebook) if category is not None else None
    if path is None:
        return None
    action, message, _, module, line = entry
    return [action, _pattern(message), path, _pattern(module), line]


def _pattern(matcher: re.Pattern[str] | str | None) -> str | None:
    # Python's own starting filters match their module by a string, the others by a compiled pattern.
    return matcher.pattern if isinstance(matcher, re.Pattern) else matcher


def _entry(plain: Filter, notebook: dict[str, Any]) -> Entry:
    """The filter ``plain`` describes, compiled as ``warnings.filterwarnings`` compiles it."""
    action, message, path, module, line = plain
    category = serialize.find(path, notebook)
    if not (isinstance(category, type) and issubclass(category, Warning)):
        raise TypeError(f"{path} is not a warning category in this kernel")
    return (
        action,
        re.compile(message, re.I) if message else None,
        category,
        re.compile(module) if module else None,
        line,
    )
