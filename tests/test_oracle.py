"""Every checkpoint restores to exactly the state its cell left: digests recorded in the kernel at each cell.

The cells mutate arrays in place and through views, frames with ``.loc`` and
``inplace=True``, lists and dicts through aliases, and rebind names to
equal-looking objects. A kernel runs some, is stopped, a new one restores the
last good state (arrays come back read or mapped) and runs more, some sent
back to back. Then every checkpoint is restored in that same kernel (the undo
path, which reads only what changed), in a fresh kernel, and restores of
restores too, and each must give the digest its cell recorded.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from jupyter_ckpt.store import CheckpointRecord, Store

TESTS = Path(__file__).parent
SETUP = """
import random
import numpy as np
import pandas as pd
rng = np.random.default_rng(7)
random.seed(7)
np.random.seed(7)
data = rng.random(3_000_000)
view = data[5::3]
big = np.zeros(9_000_000)
frame = pd.DataFrame({"a": rng.random(2000), "b": np.array(list("xyz"))[rng.integers(0, 3, 2000)]})
shared = [1, 2]
d = {"k": shared, "n": 0}
alias = d
objs = [{"i": i} for i in range(20_000)]
gen = 0
"""
MUTATIONS = [
    "data[(gen * 7919) % data.size :: 997] += gen",
    "view[gen % 50 :: 1001] *= -1.5",
    "big[(gen * 4099) % big.size :: 65537] = gen",
    "frame.loc[gen % 2000, 'a'] = -gen",
    "frame.sort_values('a', inplace=True)",
    "frame.reset_index(drop=True, inplace=True)",
    "alias['k'].append(gen)",
    "shared.append(-gen)\nd['n'] += 1",
    "d = dict(d)",
    "data = data.copy()",
    "objs.extend({'i': -gen} for _ in range(500))",
    "objs[gen % len(objs)]['i'] = 'x' * gen",
    "draw = random.random() + np.random.rand() + rng.random()",
]


def cells(seed: int, n: int, log: Path) -> list[str]:
    """``n`` cells of random mutations, each ending by recording its digest in ``log``."""
    pick = random.Random(seed)
    return [
        "gen += 1\n"
        + "\n".join(pick.sample(MUTATIONS, 3))
        + "\nmeta = {'gen': gen, 'sum': float(data.sum())}"
        + f"\n__import__('oracle').record({str(log)!r}, globals())"
        for _ in range(n)
    ]


def run(kernel: Any, batch: list[str], back_to_back: bool) -> None:
    if back_to_back:  # as Run All does: every request at once
        for cell in batch:
            kernel.kc.execute(cell)
    else:
        for cell in batch:
            kernel.ok(cell)
    kernel.ok("%checkpoint wait")


def restored_digest(kernel: Any, ref: int | str) -> tuple[str, int]:
    out = kernel.ok(f"%checkpoint restore {ref}\nprint(__import__('oracle').digest(globals()), gen)")
    digest, gen = out.strip().splitlines()[-1].split()
    return digest, int(gen)


def test_every_checkpoint_restores_to_the_digest_of_its_cell(kernels: Any, store: Store, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(TESTS)}
    log = tmp_path / "digests.jsonl"
    first = kernels("oracle.ipynb", **env)
    first.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    first.ok(SETUP + f"__import__('oracle').record({str(log)!r}, globals())")
    run(first, cells(1, 3, log), back_to_back=False)
    run(first, cells(2, 4, log), back_to_back=True)
    first.close()

    second = kernels("oracle.ipynb", **env)
    second.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    second.ok("%checkpoint restore last-good")
    run(second, cells(3, 4, log), back_to_back=True)
    run(second, cells(4, 3, log), back_to_back=False)

    recorded = [json.loads(line) for line in log.read_text().splitlines()]
    by_gen = {r["gen"]: r["digest"] for r in recorded}
    assert len(by_gen) == len(recorded) == 15  # every cell ran, each to a state of its own
    records = {r.id: r for r in store.checkpoints("oracle.ipynb")}
    cell_checkpoints = [r.id for r in records.values() if r.trigger == "cell"]
    assert len(cell_checkpoints) >= 8, "too few cells were checkpointed for the test to mean anything"

    def expected(record: CheckpointRecord, digest: str, gen: int) -> None:
        assert digest == by_gen.get(gen), f"checkpoint {record.id} ({record.trigger}) restored a state no cell left"

    def check_all(kernel: Any, order: list[int]) -> None:
        for cid in order:
            digest, gen = restored_digest(kernel, cid)
            expected(records[cid], digest, gen)

    # The same kernel that ran the cells, in random order: the undo path that copies only changed chunks.
    order = random.Random(5).sample(cell_checkpoints, len(cell_checkpoints))
    check_all(second, order)
    # Restores of restores: the entries the loop above put on the timeline.
    records = {r.id: r for r in store.checkpoints("oracle.ipynb")}
    entries = [r.id for r in records.values() if r.trigger == "restore"]
    check_all(second, random.Random(6).sample(entries, len(entries)))
    # A fresh kernel for each of a few, and one fresh kernel through all of them.
    for cid in [order[0], order[-1], entries[-1]]:
        fresh = kernels("oracle.ipynb", **env)
        fresh.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
        check_all(fresh, [cid])
        fresh.close()
    third = kernels("oracle.ipynb", **env)
    third.ok("%load_ext jupyter_ckpt\n%checkpoint auto off")
    check_all(third, random.Random(7).sample(cell_checkpoints, len(cell_checkpoints)))


def test_an_array_in_shared_memory_is_checkpointed_as_each_cell_left_it(
    kernels: Any, store: Store, tmp_path: Path
) -> None:
    k = kernels("shared.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on")
    path = tmp_path / "frames.bin"
    r = k.run(f"import numpy as np\nframes = np.memmap({str(path)!r}, dtype=float, mode='w+', shape=(2_000_000,))")
    # A fork does not copy a shared mapping, so no child could see it as this cell left it: the kernel writes.
    assert "writing checkpoints in the kernel itself" in r.stderr and "frames.bin" in r.stderr
    for gen in range(1, 7):
        k.kc.execute(f"gen = {gen}\nframes[:] = gen")
    k.ok("%checkpoint wait")
    restored = []
    for record in store.checkpoints("shared.ipynb")[1:]:
        out = k.ok(f"%checkpoint restore {record.id}\nprint(gen, float(frames.min()), float(frames.max()))")
        gen, low, high = out.split()[-3:]
        restored.append(int(gen))
        assert float(low) == float(high) == int(gen)
    assert len(restored) >= 3
