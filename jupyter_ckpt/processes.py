"""Which process left a file in the store, and whether it still runs: the one liveness check of the package.

Processes of the store (kernels, their forked writers, the server, the command line) name
what they leave for a while in ``blobs/tmp`` (a blob being written, a writer's result, a
lease, a marker) after themselves: ``<what>.<pid>-<start>.<more>``, where ``start`` is when
the process started (clock ticks after boot, ``/proc/<pid>/stat``). A pid alone is not
enough to tell: a later process may have it, and a process that has exited stays in the
process table, a zombie, until its parent reaps it (forever, where PID 1 does not reap
orphans), so ``os.kill(pid, 0)`` counts it alive. A process runs here if ``/proc`` shows it
with the start time its files name, in any state but zombie or dead.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

Process = tuple[int, int | None]  # a pid, and its start time where it is known
_OWNER: tuple[int, str] = (-1, "")  # this process's pid and the owner part of its file names, made once per pid
_NAMED = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,20}))?")  # ``<pid>-<start>``, or ``<pid>`` (an older version's)


def started(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, /proc): with its pid, what tells it from a later
    process given the same pid. None if it is gone, or has exited and waits to be reaped (a zombie)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except (OSError, ValueError):
        return None
    return None if fields[0] in ("Z", "X", "x") else int(fields[19])


def alive(pid: int, start: int | None = None) -> bool:
    """Whether process ``pid`` runs (not a zombie), and is the one that started at ``start`` if given. Where /proc
    tells nothing (not Linux), a process with that pid is taken for it."""
    if not Path("/proc/self/stat").exists():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    now = started(pid)
    return now is not None and (start is None or now == start)


def owner() -> str:
    """This process as the files it leaves name it: ``<pid>-<start>``."""
    global _OWNER
    pid = os.getpid()
    if _OWNER[0] != pid:  # first call, or a forked child: its own pid and start time
        start = started(pid)
        _OWNER = (pid, str(pid) if start is None else f"{pid}-{start}")  # not Linux: the pid alone
    return _OWNER[1]


def process_of(text: str) -> Process | None:
    """The pid and start time (None where the text gives only a pid: a file of an older version) of the process
    an ``owner`` text names; None if it names none."""
    found = _NAMED.fullmatch(text)
    if found is None:
        return None
    return int(found[1]), None if found[2] is None else int(found[2])


def owner_of(name: str) -> Process | None:
    """The process that left a file named ``<what>.<owner>.<more>`` (``process_of``)."""
    parts = name.split(".")
    return process_of(parts[1]) if len(parts) > 1 else None


def owner_alive(name: str) -> bool:
    """Whether the process that left the file ``name`` (``<what>.<owner>.<more>``) still runs."""
    found = owner_of(name)
    return found is not None and alive(*found)
