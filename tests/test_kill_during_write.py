"""SIGKILL at many moments of a checkpoint write never corrupts the store."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import types
from pathlib import Path
from typing import Any

from conftest import cli, descendants

from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.store import Store

# Kill moments: (what to wait for, then how long after it). "start" is the cell's start, spread over the
# ~0.3 s a 64 MB checkpoint takes to write here; "write" is the first blob file in blobs/tmp, so that some
# kills land in the middle of a write however fast or slow this machine is today.
MOMENTS = [("start", 0.0), ("start", 0.06), ("start", 0.15), ("start", 0.3), ("start", 0.7)]
MOMENTS += [("write", 0.0), ("write", 0.005), ("write", 0.02), ("write", 0.05)]


def _writing(tmp: Path, before: set[Path]) -> bool:
    """Whether a blob file that was not in ``before`` is being written (earlier rounds' orphans stay)."""
    return bool(set(tmp.iterdir()) - before)


def _wait_for_a_blob_write(tmp: Path, before: set[Path], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not _writing(tmp, before):
        assert time.monotonic() < deadline, "the checkpoint of `big` never began writing a blob"
        time.sleep(0.001)


def test_sigkill_mid_write_leaves_every_earlier_checkpoint_restorable(kernels: Any, store: Store) -> None:
    tmp = store.root / "blobs" / "tmp"
    mid_write = 0
    for i, (after, delay) in enumerate(MOMENTS):
        k = kernels("killed.ipynb")
        k.ok("%load_ext jupyter_ckpt")
        k.ok(f"import numpy as np\nround_ = {i}")
        k.ok("%checkpoint wait")  # a small checkpoint that is complete
        before = set(tmp.iterdir())
        k.kc.execute(f"big = np.random.default_rng({i}).random(8_000_000)\nround_ = {i} + 0.5")
        if after == "write":
            _wait_for_a_blob_write(tmp, before)
        time.sleep(delay)
        mid_write += _writing(tmp, before)
        for pid in [k.pid, *descendants(k.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        k.kill()

    assert cli("verify").returncode == 0
    records = store.checkpoints("killed.ipynb")
    rounds = set()
    for record in records:
        module = types.ModuleType("__main__")
        restore_namespace(store.blobs, module, record.id, store.manifest(record.id))
        rounds.add(module.__dict__["round_"])
        if "big" in module.__dict__:
            assert module.__dict__["big"].shape == (8_000_000,)
    assert set(range(len(MOMENTS))) <= rounds  # every completed small checkpoint is there and restores
    assert mid_write > 0, "no kill landed in the middle of a write: the test proved nothing"
    files, _ = store.gc()
    assert files > 0  # the killed writers' half-written blobs, which only gc removes
    assert cli("verify").returncode == 0
