"""Who else may touch the store: its directories, its catalog and the secret, checked as ssh checks a key.

A store directory or catalog another user can write lets them swap blobs,
checkpoints or the secret; a secret another user can read lets them sign
whatever they like. Either is refused in one line that says what to change.
Nothing here changes a mode: a directory the user gave keeps its own.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from .errors import UnsafePermissions


def check_private(path: Path, what: str, *, secret: bool = False) -> None:
    """Raise UnsafePermissions if ``path`` (when it exists) belongs to another user, or others can write it;
    for a ``secret``, also if others can read it."""
    try:
        info = os.stat(path)
    except OSError:
        return  # missing (made private when it is made) or unreadable (whoever opens it says so)
    if info.st_uid not in (os.geteuid(), 0):
        raise UnsafePermissions(
            f"the {what} {path} belongs to another user (uid {info.st_uid}), who could change it; use one of your own"
        )
    others = 0o077 if secret else 0o022
    if info.st_mode & others:
        can = "read or write" if secret else "write"
        fix = "chmod 600" if secret else "chmod go-w"
        raise UnsafePermissions(
            f"other users can {can} the {what} {path} (mode {stat.filemode(info.st_mode)}); "
            f"it is not used until you run: {fix} {path}"
        )


def check_not_link(path: Path, what: str) -> None:
    """Raise UnsafePermissions if ``path``, a directory or file the store makes for itself, is a symbolic link:
    what the store writes there, and the files it deletes there, would be where the link points (a user's
    project, another application's database)."""
    if path.is_symlink():
        raise UnsafePermissions(
            f"the {what} {path} is a symbolic link (to {os.readlink(path)}), where the store keeps one of its own; "
            "it is not used until the link is removed"
        )


def read_own_file(path: Path, most: int) -> bytes:
    """The bytes of a file one of the store's processes left for another (a writer's result), never followed
    through a link nor waited on (a named pipe put in its place), and OSError unread if it is no regular file or
    longer than ``most``: it is read before its signature is checked."""
    with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > most:
            raise OSError(f"{path} is no file a writer leaves ({stat.filemode(info.st_mode)}, {info.st_size} bytes)")
        return f.read(most + 1)
