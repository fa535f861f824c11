"""Which session a kernel checkpoints into: its notebook, as each frontend names it.

A session is a notebook's lineage of checkpoints, and a kernel that starts on the
same notebook continues it. Frontends name the notebook in different places; the
key is the first of these that is present:

- ``JPY_SESSION_NAME``: jupyter_server (JupyterLab, Notebook 7) puts the notebook's OS path in the kernel's
  environment. It is the key as it is: the server looks sessions up by that very string
  (``CheckpointService.session_keys``), so it is not normalized here. Where it names no notebook of this
  kernel it is passed over (``_names_this_notebook``): a job started from a notebook's cell inherits its
  notebook's; VS Code on a server names a file of its own, new for every kernel; a console is "Console 1".
- ``__vsc_ipynb_file__``: VS Code starts kernels itself and assigns the notebook's path in the namespace after
  start-up, so a kernel may learn it only at its first cell (the extension re-keys then).
- ``__session__``: the notebook's path as ipykernel puts it in the namespace.
- a name given explicitly: the ``session`` option or ``$JUPYTER_CKPT_SESSION`` (the terminal, papermill and
  nbclient jobs, which pass it in the kernel's environment).

Else a kernel has a key of its own, which no later kernel continues. A name the
user types in the kernel (``%checkpoint session NAME``) wins over all of these.

Paths are normalized (absolute, symbolic links resolved, no ``file://``), so that
a notebook opened from VS Code, from the terminal by path, or through another
link to it is one session. A name without a ``/`` that does not end in
``.ipynb`` is a plain name, kept as it is. Nothing here imports IPython.

Each kernel keeps a record in the store of where it checkpoints (``KernelRecord``: the session, how it was
chosen, its newest checkpoint), under its own key, which a kernel the server restarts after a crash shares
with the one that died (its connection file's name). That kernel goes back to a session the user had named,
and the server restores the dead kernel's own newest good state, not another kernel's on the same notebook.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from .errors import BadArgument, CheckpointError
from .processes import Process, owner, process_of, running

SERVER = "JPY_SESSION_NAME, from jupyter_server"
TYPED = "named with %checkpoint session"
OPTION = "c.Checkpoints.session or $JUPYTER_CKPT_SESSION"
OWN = "this kernel's own"
# Variables a frontend assigns in the namespace to name the notebook, in order of precedence.
NAMESPACE = (("__vsc_ipynb_file__", "set by VS Code"), ("__session__", "set by ipykernel"))
NAME_MAX = 4096  # PATH_MAX: a longer name is no notebook's path
# The most characters of any other text the catalog takes from a user: a checkpoint's message, a field of a REST
# request. As long as a name, so that a request may name any session; a 2 MB message was stored and listed.
TEXT_MAX = NAME_MAX
# Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: each breaks a table's line,
# as str.splitlines() breaks at NEL (\x85) and U+2028.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
KERNELS = "kernels"  # the store's folder of kernel records
# A kernel record this old is a kernel's long gone: no crash restart will ask for it.
RECORD_DAYS = 30
# Seconds after its record was last written that thinning keeps the line of a kernel that died (``kernel_heads``):
# long enough for the server to restart it and restore its state, not so long that dead kernels' states crowd out
# the newest ones of a store at its budget.
DEAD_KERNEL_KEPT = 3600


@dataclass(frozen=True)
class SessionKey:
    """A session's key, and where it came from (as ``%checkpoint session`` and ``status`` say it)."""

    key: str
    source: str

    def describe(self) -> str:
        if self.source != OWN:
            return f"{self.key} ({self.source})"
        return (
            f"{self.key} ({OWN}: no later kernel resumes it; name it with %checkpoint session NAME, "
            "or before the kernel starts with c.Checkpoints.session or $JUPYTER_CKPT_SESSION)"
        )


def session_name(name: str) -> str:
    """A session name given explicitly, checked: a notebook's path normalized, else the name as it is.

    Raises BadArgument, saying why, for a name no notebook could have.
    """
    check_label(name, "a session name", NAME_MAX)
    if not names_a_path(name):
        return name
    path = notebook_path(name)
    if os.path.isdir(path):
        raise BadArgument(f"{name!r} cannot be a session name: it is a directory, not a notebook")
    return path


def check_label(text: str, what: str, most: int) -> None:
    """The rules a session name and a tag share, as text shown on one line of a table: not blank, no space at
    either end, no control character, valid UTF-8, at most ``most`` characters. Raises BadArgument saying why
    not (``what``: "a tag")."""
    if not check_text(text, what, most).strip():  # a tag of 5 needed "at least one character"
        raise BadArgument(f"{what} needs at least one character that is not a space")
    if text != text.strip():
        raise BadArgument(f"{text!r} cannot be {what}: it starts or ends with a space")
    if _CONTROL.search(text):
        raise BadArgument(f"{text!r} cannot be {what}: it holds a control character")


def check_text(text: object, what: str, most: int = TEXT_MAX) -> str:
    """``text``, if it is a string the catalog can store: at most ``most`` characters, valid UTF-8 (no lone
    surrogate); else raise BadArgument saying why, ``what`` naming it ("a message")."""
    if not isinstance(text, str):
        raise BadArgument(f"{what} must be text, not {type(text).__name__}")
    if len(text) > most:
        raise BadArgument(f"{what} has at most {most} characters, not {len(text)}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadArgument(f"{what} must be valid text (it holds a lone surrogate)") from None
    return text


def names_a_path(name: str) -> bool:
    """Whether a session name is a notebook's path (with a folder, or ending in .ipynb) rather than a name."""
    return "/" in name or os.sep in name or name.lower().endswith(".ipynb")


def notebook_path(path: str) -> str:
    """A notebook's path as a session key: absolute, with symbolic links resolved, from a path or a file:// URL."""
    if path.startswith("file://"):
        path = unquote(urlparse(path).path)
    return os.path.realpath(os.path.expanduser(path))


def _unsaved(name: str) -> bool:
    """Whether a frontend names a notebook by a bare name, with no folder: one not saved yet (VS Code's untitled)."""
    return not name.startswith("file://") and not os.path.dirname(os.path.expanduser(name))


def _names_this_notebook(server: str) -> bool:
    """Whether ``JPY_SESSION_NAME`` is the notebook this kernel runs. It is not where it is

    - VS Code's: connected to a server, VS Code names each kernel's session after a file of its own,
      ``<notebook>-jvsc-<uuids>.ipynb``, new every time (the notebook comes in ``__vsc_ipynb_file__``);
    - no notebook: a console, named "Console 1" after the first of each page load, so a console would be given
      another one's state;
    - inherited: the process that started the kernel (``JPY_PARENT_PID``) started with the same value, so the
      kernel is a job run from that notebook's cell (papermill, nbclient, ``!jupyter execute``), whose cells
      would otherwise go into the notebook's timeline and come back in its crash recovery.
    """
    base = os.path.basename(server)
    if "-jvsc-" in base or not (base.lower().endswith(".ipynb") or os.path.isfile(server)):
        return False
    try:
        with open(f"/proc/{int(os.environ.get('JPY_PARENT_PID', ''))}/environ", "rb") as f:
            started_with = f.read().split(b"\0")
    except (ValueError, OSError):  # no parent named, or no /proc: the server's kernel
        return True
    return os.fsencode(f"JPY_SESSION_NAME={server}") not in started_with


def session_key(namespace: Mapping[str, object], name: str, own: str) -> SessionKey:
    """The session a kernel checkpoints into, from its environment and its ``namespace`` (see the module's
    docstring); ``name`` is the session option (empty: none), ``own`` the kernel's own key.

    Raises BadArgument if ``name`` is no session name.
    """
    server = os.environ.get("JPY_SESSION_NAME")
    if server and _names_this_notebook(server):
        return SessionKey(server, SERVER)
    for variable, who in NAMESPACE:
        value = namespace.get(variable)
        if value == server:  # ipykernel's __session__ is JPY_SESSION_NAME again
            continue
        # A bare name ("Untitled-1.ipynb") is a notebook not saved yet: every folder has one of that name.
        if isinstance(value, str) and value.strip() and not _CONTROL.search(value) and not _unsaved(value):
            return SessionKey(notebook_path(value), f"{variable}, {who}")
    if name:
        return SessionKey(session_name(name), OPTION)
    return SessionKey(own, OWN)


@dataclass(frozen=True)
class KernelRecord:
    """Where a kernel checkpoints: its session's key, how that was chosen (``SessionKey.source``), and its
    newest checkpoint (its head; None before its first)."""

    session: str
    source: str
    head: int | None


def _record_path(root: Path, kernel: str) -> Path:
    return root / KERNELS / hashlib.sha256(kernel.encode()).hexdigest()[:32]


def keep_record(root: Path, kernel: str, record: KernelRecord, seal: Callable[[Any], list[str]]) -> None:
    """Keep kernel ``kernel``'s record in the store at ``root``, signed (``Store.seal``), private and written whole,
    with the process that keeps it (``processes.owner``). A store that will not take it takes nothing: the record
    only sharpens a crash recovery and thinning. The first record of a kernel clears those older than
    ``RECORD_DAYS``."""
    path = _record_path(root, kernel)
    with contextlib.suppress(OSError):
        if not path.exists():
            path.parent.mkdir(mode=0o700, exist_ok=True)
            for old in path.parent.iterdir():
                if time.time() - old.lstat().st_mtime > RECORD_DAYS * 86400:
                    old.unlink(missing_ok=True)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        partial.unlink(missing_ok=True)  # made anew: a link planted there is not followed
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        with open(os.open(partial, flags, 0o600), "w") as f:
            json.dump(seal({"kernel": kernel, "owner": owner(), **asdict(record)}), f)
        os.replace(partial, path)


def kept_record(root: Path, kernel: str, unseal: Callable[[Any, str], Any]) -> KernelRecord | None:
    """The record kernel ``kernel`` (or the one it replaces) left in the store at ``root``, if this store's secret
    signed it (``Store.unseal``); None if there is none or it cannot be read."""
    found = _read_record(_record_path(root, kernel), unseal)
    return found[0] if found is not None and found[1].get("kernel") == kernel else None


def _read_record(path: Path, unseal: Callable[[Any, str], Any]) -> tuple[KernelRecord, dict[str, Any]] | None:
    """The kernel record at ``path`` and all it holds, if this store's secret signed it; None if it cannot be read."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            data = unseal(json.loads(f.read(1 << 20)), "a kernel record")
        record = KernelRecord(str(data["session"]), str(data["source"]), data["head"])
    except (CheckpointError, OSError, ValueError, KeyError, TypeError):
        return None
    if not (record.head is None or isinstance(record.head, int)):
        return None
    return record, data


def kernel_records(root: Path, unseal: Callable[[Any, str], Any]) -> list[tuple[KernelRecord, str, float]]:
    """Each kernel record in the store at ``root`` that its secret signed: the record, the process that keeps it
    (``processes.owner``; empty: a record that does not say) and when it last changed."""
    found = []
    with contextlib.suppress(OSError):
        for path in (root / KERNELS).iterdir():
            read = None if path.name.startswith(".") else _read_record(path, unseal)  # not one being written
            with contextlib.suppress(OSError):
                if read is not None:
                    found.append((read[0], str(read[1].get("owner", "")), path.stat().st_mtime))
    return found


def kernel_heads(root: Path, unseal: Callable[[Any, str], Any]) -> set[int]:
    """The newest checkpoints (heads) of the kernels that checkpoint into the store at ``root`` now, and of those
    that died within ``DEAD_KERNEL_KEPT`` seconds of their record's last change: the lines of work thinning keeps
    each kernel's newest good state of, so that a kernel's crash recovery finds its own state whatever other
    kernels on its notebook did since (``timeline.never_thinned``)."""
    now = time.time()
    return {
        record.head
        for record, process, changed in kernel_records(root, unseal)
        if record.head is not None and (running(process, changed) or now - changed < DEAD_KERNEL_KEPT)
    }


def kernel_head(root: Path, unseal: Callable[[Any, str], Any], process: Process) -> int | None:
    """The newest checkpoint the kernel ``process`` (its pid and start time) recorded in the store at ``root``."""
    return next((r.head for r, kept_by, _ in kernel_records(root, unseal) if process_of(kept_by) == process), None)
