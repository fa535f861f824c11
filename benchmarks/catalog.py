"""How long deleting checkpoints holds the catalog's write lock.

While ``Store.delete`` runs, every other writer of the catalog waits: the kernels on the same store
record each finished cell there before they reply to it. A ``gc`` (or the background thinning) deletes
many checkpoints in one transaction. This builds a session of ``--checkpoints`` checkpoints of a
namespace of 60 variables, one changed per checkpoint, and times, in one process:

- ``delete alternate``: every other checkpoint of the oldest ``2 * --delete`` (each has a child that stays);
- ``delete contiguous``: the next ``--delete`` in a row (one child stays, the others go with it).

Usage: ``.venv/bin/python benchmarks/catalog.py [--checkpoints 1500] [--delete 500] [--repeat 3]``; writes
``results/catalog.json``. Each round builds its own store; medians are reported.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import types
from pathlib import Path

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.store import Store, load_secret

RESULTS = Path(__file__).parent / "results"


def one_round(checkpoints: int, delete: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="ckpt-catalog-") as work:
        store = Store(Path(work) / "store", load_secret(Path(work) / "secret"))
        module = types.ModuleType("__main__")
        for i in range(60):
            module.__dict__[f"v{i}"] = list(range(i * 10))
        ckpt = Checkpointer(store, "nb.ipynb", module)
        for i in range(checkpoints):
            module.__dict__[f"v{i % 60}"] = [i]
            ckpt.save()
        ids = [r.id for r in store.checkpoints("nb.ipynb")]
        out = {}
        for name, doomed in (
            ("delete alternate", ids[: 2 * delete : 2]),
            ("delete contiguous", ids[2 * delete : 3 * delete]),
        ):
            start = time.perf_counter()
            store.delete(doomed)
            out[name] = time.perf_counter() - start
        assert not store.verify()  # every checkpoint left is signed with the parent it has now
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=1500, help="checkpoints in the session")
    parser.add_argument("--delete", type=int, default=500, help="checkpoints deleted in each transaction")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.checkpoints < 3 * args.delete:
        parser.error("--checkpoints must be at least three times --delete")
    rounds = [one_round(args.checkpoints, args.delete) for _ in range(args.repeat)]
    result = {
        "checkpoints": args.checkpoints,
        "deleted_per_transaction": args.delete,
        "median_s": {k: round(statistics.median(r[k] for r in rounds), 3) for k in rounds[0]},
        "all_s": {k: [round(r[k], 3) for r in rounds] for k in rounds[0]},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "catalog.json").write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
