"""What the magics, the CLI and the kernel's progress line print: sizes, ages, the timeline table."""

from __future__ import annotations

import datetime
import time
from typing import Any

from .retention import Usage
from .store import CheckpointRecord
from .timeline import Thinned
from .units import human_bytes


def _when(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts).strftime("%H:%M:%S")


def format_table(records: list[CheckpointRecord], head: int | None, numbered: dict[int, int]) -> str:
    """The timeline as a plain-text table, each checkpoint with its number in the session (``#N``) and its
    store-wide id; ``*`` marks where the namespace is now, ``>`` where a kernel started."""
    if not records:
        return "no kernel checkpoints yet"
    rows = [("", "#", "id", "time", "cell", "trigger", "status", "new bytes", "changed", "tag")]
    for r in records:
        changed = ", ".join(r.changed[:6]) + (" ..." if len(r.changed) > 6 else "")
        rows.append(
            (
                ("*" if r.id == head else "") + (">" if r.kernel_start else ""),
                f"#{numbered[r.id]}",
                str(r.id),
                _when(r.time),
                "" if r.cell is None else str(r.cell),
                r.trigger,
                r.status,
                human_bytes(r.new_bytes),
                changed,
                r.tag or "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    legend = [("*", "* where the namespace is now"), (">", "> a new kernel started here")]
    marks = "".join(row[0] for row in rows)
    return "\n".join([table, *(text for mark, text in legend if mark in marks)])


def describe_policy(policy: dict[str, Any]) -> str:
    if not policy["auto"]:
        return "off"
    if not policy["every"] and not policy["interval"]:
        return "after every cell, within the overhead budget"
    parts = []
    if policy["every"]:
        parts.append("after every cell" if policy["every"] == 1 else f"after every {policy['every']} cells")
    if policy["interval"]:
        parts.append(f"every {policy['interval']:g} s")
    return " or ".join(parts)


def describe_usage(usage: dict[str, Any]) -> str:
    """A store's size against its budget, from ``Checkpointer.status()["usage"]``."""
    return Usage(**usage).describe()


def format_thinned(
    thinned: Thinned, size: int, max_size: int | None, keep_last: int, notebook: str | None = None
) -> str:
    """What a gc did: ``removed 6 checkpoint(s) of a.ipynb (6) and 9 file(s), freed 1.2 GiB``, and why the store
    (or, from a ``notebook``, that notebook's own checkpoints, which are what ``max_size`` bounds there) is still
    over ``max_size`` if it is (``size``)."""
    where = ", ".join(f"{key} ({n})" for key, n in sorted(thinned.sessions.items()))
    done = (
        f"removed {thinned.checkpoints} checkpoint(s){f' of {where}' if where else ''} and {thinned.files} file(s), "
        f"freed {human_bytes(thinned.freed)}"
    )
    if max_size is not None and notebook is not None and size <= max_size:
        bounded = "--max-size bounds them; with --all, the store"
        return f"{done}; {notebook}'s checkpoints hold {human_bytes(size)} ({bounded})"
    if max_size is None or size <= max_size:
        return done
    held = "the store is still" if notebook is None else f"{notebook}'s checkpoints still hold"
    return (
        f"{done}; {held} {human_bytes(size)}, over --max-size {human_bytes(max_size)}: the newest "
        f"{keep_last} of each notebook (--keep-last), tagged checkpoints and the newest good states stay"
    )


def age(seconds: float) -> str:
    """How long ago, as a person says it: 40 s, 12 min, 3.5 h, 2 days."""
    if seconds < 60:
        return f"{max(0, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{round(seconds / 86400)} days"


def previous_session_line(offer: dict[str, Any]) -> str:
    """The line a kernel shows when it starts on a notebook with history (``Timeline.resume_offer``)."""
    cell = "" if offer["cell"] is None else f" after cell [{offer['cell']}]"
    return (
        f"jupyter-ckpt: this notebook has {offer['checkpoints']} kernel checkpoint(s) from earlier kernels; the last "
        f"good one is #{offer['number']}{cell}, {age(time.time() - offer['time'])} ago, {offer['variables']} "
        "variable(s). Get it back with: %checkpoint restore previous"
    )
