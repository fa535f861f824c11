"""One error hierarchy for every surface.

The core raises these; each adapter translates them once: the magics into
``UsageError``, the REST handlers into ``HTTPError`` with the status below, the
command line into a one-line message and an exit code.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


class CheckpointError(Exception):
    """Base class of every error jupyter-ckpt reports to a user."""

    http_status = 400
    exit_code = 1

    def _render_traceback_(self) -> list[str]:
        """How IPython shows one that reaches a cell (``%load_ext`` refusing a store, a call to the Python API):
        one line, as a ``UsageError``, for it is the user's to act on and no bug to trace (``%debug`` still can)."""
        return [f"{type(self).__name__}: {self}"]


class UnknownCheckpoint(CheckpointError):
    """A REF (id, tag, ``latest``, ``-N``) that names no checkpoint of the session."""

    http_status = 404


class NoStore(CheckpointError):
    """A path that holds no checkpoint store, given to a command that creates none (the CLI)."""

    http_status = 404


class UnknownSession(CheckpointError):
    """A session key with no checkpoints in the store."""

    http_status = 404


class BadArgument(CheckpointError):
    """A malformed argument: a bad REF, size, interval or variable name."""

    http_status = 400


class IntegrityError(CheckpointError):
    """A blob or manifest whose signature does not verify, or that is truncated."""

    http_status = 409
    exit_code = 3


@contextlib.contextmanager
def naming(checkpoint: str) -> Iterator[None]:
    """An IntegrityError raised reading a checkpoint's blobs (``blob 06e1... is truncated``) says which checkpoint
    it refuses."""
    try:
        yield
    except IntegrityError as e:
        raise type(e)(f"checkpoint {checkpoint}: {e}") from None


class CheckpointFailed(CheckpointError):
    """A checkpoint asked for was not written, for a reason that is not the request's: the store refused a file (gone
    read-only), a writer failed or was stopped for memory. The kernel's or the server's failure, not the caller's."""

    http_status = 500


class StoreUnreadable(CheckpointError):
    """A file of the store the system will not open or read (a directory where a file belongs, no permission, an
    I/O error): the store is damaged or its disk is failing, and nothing was changed."""

    http_status = 500
    exit_code = 3


@contextlib.contextmanager
def reading_store(root: str | os.PathLike[str]) -> Iterator[None]:
    """An ``OSError`` on a file inside the store ``root`` (``blobs`` made a file, a blob made unreadable) becomes a
    ``StoreUnreadable`` naming the file: one line at every surface instead of a traceback. An ``OSError`` on any
    other file (the user's, in a replayed cell) passes through unchanged."""
    try:
        yield
    except OSError as e:
        if not isinstance(e.filename, (str, bytes, os.PathLike)) or not _inside(e.filename, root):
            raise
        raise StoreUnreadable(f"cannot read {os.fsdecode(e.filename)} in the checkpoint store: {e.strerror}") from None


def _inside(path: str | bytes | os.PathLike[str] | os.PathLike[bytes], root: str | os.PathLike[str]) -> bool:
    top = Path(os.path.realpath(root))
    return Path(os.path.realpath(os.fsdecode(path))).is_relative_to(top)


class StoreReadOnly(CheckpointError):
    """The store cannot be written (a disk mounted read-only, an archive, a snapshot): a change asked for (a tag, a
    delete, a gc) was not made, and nothing was changed. The store's condition, not the request's fault."""

    http_status = 500
    exit_code = 3


class UnsafePermissions(IntegrityError):
    """A store directory, catalog or secret that other users can write (or, for the secret, read)."""


class StoreVersionError(CheckpointError):
    """A store written by a newer version of jupyter-ckpt."""

    http_status = 409
    exit_code = 4


class StoreBusy(CheckpointError):
    """The catalog stayed locked by another process (a kernel committing a checkpoint, a ``gc``) for longer than a
    write waits for it; nothing was changed, and trying again later works."""

    http_status = 503
    exit_code = 7


class OutOfMemory(CheckpointError):
    """A restore would need more memory than is left before the out-of-memory killer runs: it was refused, and
    nothing was changed. The kernel's condition, which freeing memory or a new kernel ends."""

    http_status = 503


class StoreFullError(CheckpointError):
    """The disk under the store is full; nothing was written."""

    http_status = 507
    exit_code = 5


class RemoteError(CheckpointError):
    """The remote store cannot be reached or used: down, wrong credentials, no bucket, no client installed."""

    http_status = 502
    exit_code = 6
