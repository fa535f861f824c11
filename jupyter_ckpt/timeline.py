"""What a user reads about checkpoints, for the REST API, the magics and the widget alike."""

from __future__ import annotations

import time
from typing import Any

from .checkpointer import Checkpointer
from .errors import CheckpointError
from .format import age
from .manifest import Manifest
from .restore import diff_manifests
from .store import Store

_NOTHING: Manifest = {"variables": {}, "modules": {}}


def _preview(info: dict[str, Any]) -> dict[str, Any]:
    """A manifest entry without its storage keys: type, size, shape, repr."""
    return {k: v for k, v in info.items() if k not in ("group", "gkey")}


def cells_between(store: Store, parent: Manifest, manifest: Manifest) -> list[dict[str, Any]]:
    """The cells executed from the parent's state to this checkpoint's, oldest first."""
    cells = store.history(manifest)
    ids = [c["id"] for c in cells]
    start = ids.index(parent["last_cell"]) + 1 if parent.get("last_cell") in ids else 0
    return [{k: c[k] for k in ("count", "source", "status", "duration", "time")} for c in cells[start:]]


def details(store: Store, checkpoint_id: int) -> dict[str, Any]:
    """One checkpoint's record, variable previews, cells and diff to its parent, read from the store alone."""
    record = store.get(checkpoint_id)
    manifest = store.manifest(checkpoint_id)
    try:
        parent = store.manifest(record.parent) if record.parent is not None else _NOTHING
    except CheckpointError:  # a parent deleted meanwhile: compare with nothing
        parent = _NOTHING
    diff = diff_manifests(parent, manifest)
    return {
        **record.as_dict(),
        "variables": {n: _preview(v) for n, v in manifest["variables"].items()},
        "modules": manifest["modules"],
        "skipped": manifest["skipped"],
        "cells": cells_between(store, parent, manifest),
        "diff": {
            "added": {n: _preview(v) for n, v in diff.added.items()},
            "removed": {n: _preview(v) for n, v in diff.removed.items()},
            "changed": {n: {"before": _preview(a), "after": _preview(b)} for n, (a, b) in diff.changed.items()},
        },
    }


def resume_offer(ckpt: Checkpointer) -> dict[str, Any] | None:
    """What a kernel offers to bring back when it starts on a notebook with history: the last good state the
    kernels before it left (the REF ``previous``), until this kernel restores something; else None."""
    previous = ckpt.previous()
    if previous is None or ckpt.restored:
        return None
    return {
        "checkpoint": previous.id,
        "number": ckpt.number(previous.id),
        "cell": previous.cell,
        "time": previous.time,
        "variables": len(ckpt.store.manifest(previous.id)["variables"]),
        "checkpoints": len(ckpt.checkpoints_committed()),
    }


def previous_session(ckpt: Checkpointer) -> str | None:
    """The line a kernel shows when it starts on a notebook with history, or None when it has none."""
    offer = resume_offer(ckpt)
    if offer is None:
        return None
    cell = "" if offer["cell"] is None else f" after cell [{offer['cell']}]"
    return (
        f"jupyter-ckpt: this notebook has {offer['checkpoints']} kernel checkpoint(s) from earlier kernels; the last "
        f"good one is #{offer['number']}{cell}, {age(time.time() - offer['time'])} ago, {offer['variables']} "
        "variable(s). Get it back with: %checkpoint restore previous"
    )
