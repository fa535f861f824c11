"""Which process left a file in the store, and whether it still runs: the one liveness check of the package.

Processes of the store (kernels, their forked writers, the server, the command line) name
what they leave for a while in ``blobs/tmp`` (a blob being written, a writer's result, a
lease, a marker) after themselves: ``<what>.<pid>-<start>.<more>``, where ``start`` is when
the process started (clock ticks after boot, ``/proc/<pid>/stat``). A pid alone is not
enough to tell: a later process may have it, and a process that has exited stays in the
process table, a zombie, until its parent reaps it (forever, where PID 1 does not reap
orphans), so ``os.kill(pid, 0)`` counts it alive. A process runs here if ``/proc`` shows it
with the start time its files name, in any state but zombie or dead.

Processes of another PID namespace (a container, another named server on a shared home) or of another boot or
machine share a store too; their pids mean nothing here. Their names carry where they run (``<pid>-<start>-<where>``,
``here``), and a file one of them left is taken for a live process's while it is younger than ``ELSEWHERE_KEPT``:
a gc here took a save in progress in another container for a dead one's, and collected the blobs it had written.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import time
from pathlib import Path

Process = tuple[int, int | None]  # a pid, and its start time where it is known
_OWNER: tuple[int, str] = (-1, "")  # this process's pid and the owner part of its file names, made once per pid
# ``<pid>-<start>-<where>``; ``<pid>-<start>`` or ``<pid>`` in an older version's names.
_NAMED = re.compile(r"([0-9]{1,10})(?:-([0-9]{1,20}))?(?:-([0-9a-f]{8}))?")
# Seconds a file of a process elsewhere (``here``) counts as a live one's: longer than a save takes, and not so long
# that the leases of the saves a reboot cut off (from another boot: elsewhere) keep gc from collecting for long.
ELSEWHERE_KEPT = 3600


@functools.cache
def here() -> str:
    """Where this process's pids mean something: its PID namespace on this boot of this machine (8 hex digits)."""
    try:
        where = Path("/proc/sys/kernel/random/boot_id").read_text().strip() + os.readlink("/proc/self/ns/pid")
    except OSError:  # not Linux: one place
        return "0" * 8
    return hashlib.sha256(where.encode()).hexdigest()[:8]


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
    """This process as the files it leaves name it: ``<pid>-<start>-<where>`` (``here``)."""
    global _OWNER
    pid = os.getpid()
    if _OWNER[0] != pid:  # first call, or a forked child: its own pid and start time
        start = started(pid)
        _OWNER = (pid, str(pid) if start is None else f"{pid}-{start}-{here()}")  # not Linux: the pid alone
    return _OWNER[1]


def process_of(text: str) -> Process | None:
    """The pid and start time (None where the text gives only a pid: a file of an older version) of the process
    an ``owner`` text names; None if it names none."""
    found = _NAMED.fullmatch(text)
    if found is None:
        return None
    return int(found[1]), None if found[2] is None else int(found[2])


def running(text: str, made: float | None = None) -> bool:
    """Whether the process an ``owner`` text names still runs: one elsewhere (``here``) is taken for a live one if
    what it left was ``made`` (seconds since the epoch) less than ``ELSEWHERE_KEPT`` ago, or when unknown."""
    found = _NAMED.fullmatch(text)
    if found is not None and found[3] not in (None, here()):
        return made is None or time.time() - made < ELSEWHERE_KEPT
    process = process_of(text)
    return process is not None and alive(*process)


def owner_alive(name: str, made: float | None = None) -> bool:
    """Whether the process that left the file ``name`` (``<what>.<owner>.<more>``), ``made`` then, still runs
    (``running``)."""
    parts = name.split(".")
    return len(parts) > 1 and running(parts[1], made)
