"""The manifest: what one checkpoint holds, as the catalog keeps it (signed JSON) and the remote record carries it.

``capture.prepare`` builds it, ``capture.link`` ties it to its parent, ``Store.commit``
signs and stores it, and ``restore``, ``timeline`` and the adapters read it. One
format version covers the manifest, the blob files and the catalog: a store or a
record written with a higher one is refused, never half read. A blob file whose
codec came later says its own higher version (``blobs.BLOB_VERSION``), so that an
older jupyter-ckpt refuses that blob and reads the others.
"""

from __future__ import annotations

import re
import secrets
import time
from typing import Any, NotRequired, TypedDict

from .errors import IntegrityError

FORMAT_VERSION = 1
_UID = re.compile(r"[0-9a-f]{12}-[0-9a-f]{16}")


def new_uid() -> str:
    """A checkpoint's global id: milliseconds since the epoch (so ids sort by time) and 64 random bits,
    so machines writing one remote prefix need no counter between them."""
    return f"{int(time.time() * 1000):012x}-{secrets.token_hex(8)}"


def check_uid(uid: Any) -> str:
    """A global id of the form ``new_uid`` makes, else IntegrityError: the catalog's ``uids`` table is not signed,
    and a uid names objects in the remote store (a planted ``../x`` wrote outside the session's folder)."""
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise IntegrityError(f"the global id {uid!r} in the catalog is not one jupyter-ckpt makes (changed by hand)")
    return uid


class Buffer(TypedDict):
    """An out-of-band buffer (an array's data), stored as content-addressed chunks.

    ``mappable``: the memory of a numpy array, data that nothing unpickles, so a lazy restore
    may map it and verify it afterwards. Any other buffer (a pickle stream) is verified first.
    """

    size: int
    chunks: list[str]
    mappable: NotRequired[bool]


class Group(TypedDict):
    """Variables pickled together (they share objects): one stream and its buffers.

    ``size``: the stream's length, so that a blob file grown longer is refused before it is read. Absent from
    checkpoints older than it.
    """

    key: str
    buffers: list[Buffer]
    names: list[str]
    serializer: str
    size: NotRequired[int]


class RandomState(TypedDict):
    """The global random states, stored as a group of their own."""

    key: str
    buffers: list[Buffer]
    serializer: NotRequired[str]
    names: NotRequired[list[str]]
    size: NotRequired[int]


class Skipped(TypedDict):
    """A variable no pickler could write, and why."""

    reason: str
    type: str
    # The variables written that shared objects with it (``capture.pack``): replay makes those bound after it
    # again with it (``recipes.plan``). Absent where it shared none, and from checkpoints older than it.
    shares: NotRequired[list[str]]


class Manifest(TypedDict, total=False):
    """One checkpoint. ``variables`` maps each name to its group, its content key (``gkey``) and a preview."""

    format: int
    session: str
    time: float
    cell: int | None
    last_cell: int | None
    trigger: str
    status: str
    message: str | None
    tag: str | None
    groups: list[Group]
    variables: dict[str, dict[str, Any]]
    modules: dict[str, Any]
    skipped: dict[str, Skipped]
    random: RandomState
    # A digest of the global random streams alone (capture.streams_digest): capture.link compares them. Absent
    # from checkpoints older than it.
    streams: str
    # A digest of the settings kept with the random states (settings.py), by library ("matplotlib rcParams"):
    # capture.link compares them. Absent from checkpoints older than settings.
    settings: dict[str, str]
    # What the notebook's classes were registered as with imported libraries (registrations.py), by variable
    # name. Absent from checkpoints older than registrations.
    registrations: list[list[str]]
    # The working directory and import path as far as the session changed them (paths.py). Absent from
    # checkpoints older than paths.
    paths: dict[str, Any]
    # The environment variables as far as the session changed them (environment.py). Absent from checkpoints
    # older than the environment.
    environment: dict[str, Any]
    # The IPython configuration lines the cells ran (shellconfig.py). Absent from checkpoints older than them.
    configuration: list[str]
    # Which of the variables are attributes of modules and imported classes the cells changed (attributes.py),
    # named as typed (``config.DEBUG``), with how: "set" or "in place". Absent from checkpoints older than them.
    attributes: dict[str, str]
    # The variables bound to a list, dict or set a project module holds (``from config import PARAMS``), with
    # where: "config:PARAMS" (attributes.aliases). Absent from checkpoints older than them.
    aliases: dict[str, str]
    # The warning filters as far as the session changed them (warnfilters.py). Absent from checkpoints older
    # than warning filters.
    warnings: dict[str, Any]
    # The loggers as far as the session changed them (loggers.py). Absent from checkpoints older than logging.
    logging: dict[str, Any]
    versions: dict[str, str]
    # Set by capture.link when the checkpoint takes its place on the timeline:
    parent: int | None
    changed: list[str]
    removed: list[str]
    # Set by capture (``new_uid``; by Store.commit for a manifest without one), and signed with the rest
    # (store.IDENTITY): whose manifest this is, never committed twice; and the signature of the newest cell it
    # recorded, which chains every cell before it.
    uid: str
    parent_uid: str | None
    history: str | None
