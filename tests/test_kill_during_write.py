"""SIGKILL at many moments of a checkpoint write never corrupts the store."""

from __future__ import annotations

import contextlib
import os
import signal
import time
import types
from typing import Any

from conftest import cli, descendants

from jupyter_ckpt.restore import restore_namespace
from jupyter_ckpt.store import Store

# Kill moments after the cell starts, spread over the ~0.3 s a 64 MB checkpoint takes to write here.
DELAYS = [0.0, 0.03, 0.06, 0.1, 0.15, 0.2, 0.3, 0.45, 0.7]


def test_sigkill_mid_write_leaves_every_earlier_checkpoint_restorable(kernels: Any, store: Store) -> None:
    orphans_seen = 0
    for i, delay in enumerate(DELAYS):
        k = kernels("killed.ipynb")
        k.ok("%load_ext jupyter_ckpt")
        k.ok(f"import numpy as np\nround_ = {i}")
        k.ok("%checkpoint wait")  # a small checkpoint that is complete
        k.kc.execute(f"big = np.random.default_rng({i}).random(8_000_000)\nround_ = {i} + 0.5")
        time.sleep(delay)
        for pid in [k.pid, *descendants(k.pid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        k.kill()
        for tmp in (store.root / "blobs" / "tmp").iterdir():
            orphans_seen += 1
            assert tmp.stat().st_size >= 0

    assert cli("verify").returncode == 0
    records = store.checkpoints("killed.ipynb")
    rounds = set()
    for record in records:
        module = types.ModuleType("__main__")
        restore_namespace(store.blobs, module, record.id, store.manifest(record.id))
        rounds.add(module.__dict__["round_"])
        if "big" in module.__dict__:
            assert module.__dict__["big"].shape == (8_000_000,)
    assert set(range(len(DELAYS))) <= rounds  # every completed small checkpoint is there and restores
    files, _ = store.gc()
    assert orphans_seen + files > 0, "no kill landed in the middle of a write: the test proved nothing"
    assert cli("verify").returncode == 0
