"""Fault injection: a notebook killed at random moments, restored, and killed again, hundreds of times.

Each cycle:

1. a new kernel loads the extension and restores ``last-good`` (the first one
   sets the notebook up instead);
2. it checks the invariant the namespace carries about itself: ``seal`` is the
   digest (``oracle.py``) of every other variable, taken by the cell that last
   ran, so a namespace mixed from two cells breaks it;
3. it forces one committed checkpoint (``%checkpoint save``);
4. it runs mutating cells, either back to back (every request at once, as Run
   All sends them) or one at a time;
5. at a random moment, SIGKILL: the kernel alone (as the OOM killer does), the
   kernel and its writers (as a power cut does), or a writer child alone (the
   kernel then runs one more cell, and dies alone);
6. ``jupyter ckpt verify`` checks the store, every checkpoint forced so far
   must still be there, and every checkpoint not checked before (this cycle's,
   and those its kernel adopted from the last one's writers) is restored outside
   any kernel and checked against its seal.

Counted over the run: torn states, committed checkpoints lost, restores that
fail, forced saves that name no checkpoint, verify failures; all five must be
zero. A kernel that something other than the harness kills (the out-of-memory
killer, when other programs run memory short) ends its cycle early and is
counted as ``interrupted``, and so is a restore refused for want of memory (``OutOfMemory``); the store is
verified all the same. ``make faults``
runs 200 cycles and writes ``benchmarks/results/faults.json``;
``test_faults.py`` runs a few.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import signal
import sys
import time
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from conftest import Kernel, cli, descendants  # noqa: E402
from oracle import digest  # noqa: E402

from jupyter_ckpt.restore import restore_namespace  # noqa: E402
from jupyter_ckpt.store import Store  # noqa: E402

SESSION = "faults.ipynb"
SEAL = "\nseal = __import__('oracle').digest(globals(), skip=('seal',))"
SETUP = (
    "import random\nimport numpy as np\nrng = np.random.default_rng(0)\nrandom.seed(0)\n"
    "data = rng.random(200_000)\nview = data[3::7]\nobjs = [{'i': i} for i in range(20_000)]\n"
    "labels = rng.integers(0, 100, 700_000)\n"
    "d = {'k': [0]}\nalias = d\ngen = 0\nmeta = {'gen': 0, 'sum': float(data.sum()), 'n': len(objs)}\n"
    # records of a notebook class: the hybrid pickler's groups (the class by dill, the records by the C pickler)
    "class Rec:\n    def __init__(self, i):\n        self.i, self.tags = i, [i]\nrecs = [Rec(i) for i in range(5_000)]"
    + SEAL
)
MUTATIONS = [
    "data[(gen * 7919) % data.size :: 997] += gen",
    "view[gen % 20 :: 101] *= -1.0",
    "labels[(gen * 104_729) % labels.size] += gen",
    "objs.extend({'i': -gen, 's': 'x' * (gen % 50)} for _ in range(2_000))",
    "alias['k'].append(gen)",
    "d = dict(d)",
    "data = data.copy()\nview = data[3::7]",
    "draw = random.random() + float(rng.random())",
    "recs[gen % len(recs)].tags.append(gen)\nrecs.append(Rec(-gen))",
]
KILLS = ("kernel", "group", "writer")


@dataclass
class Tally:
    cycles: int = 0
    torn: int = 0
    lost: int = 0
    failed_restores: int = 0
    failed_saves: int = 0
    verify_failures: int = 0
    interrupted: int = 0
    kills: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KILLS, 0))
    writers_killed: int = 0
    back_to_back: int = 0
    committed: int = 0
    problems: list[str] = field(default_factory=list)

    def bad(self) -> int:
        return self.torn + self.lost + self.failed_restores + self.failed_saves + self.verify_failures

    def note(self, kind: str, text: str) -> None:
        setattr(self, kind, getattr(self, kind) + 1)
        self.problems.append(f"cycle {self.cycles}: {kind}: {text}")


class Unsaved(Exception):
    """A forced save named no checkpoint."""


def kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def mutating_cell(pick: random.Random) -> str:
    body = "\n".join(pick.sample(MUTATIONS, 3))
    return f"gen += 1\n{body}\nmeta = {{'gen': gen, 'sum': float(data.sum()), 'n': len(objs)}}{SEAL}"


def sealed(kernel: Kernel) -> bool:
    return kernel.value("__import__('oracle').digest(globals(), skip=('seal',)) == seal") is True


def restores_outside_a_kernel(store: Store, cid: int) -> bool:
    """Restore one checkpoint into a bare module and check its seal there."""
    module = types.ModuleType("__main__")
    restore_namespace(store.blobs, module, cid, store.manifest(cid))
    return digest(module.__dict__, skip=("seal",)) == module.__dict__["seal"]


def cycle(store: Store, pick: random.Random, tally: Tally, forced: dict[int, str], checked: set[int]) -> None:
    mode = KILLS[tally.cycles % len(KILLS)]
    tally.cycles += 1
    k = Kernel(SESSION, {"PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))})
    try:
        k.ok("%load_ext jupyter_ckpt")
        if forced:
            r = k.run("%checkpoint restore last-good")
            refused = r.error or next((line for line in r.stderr.splitlines() if line.startswith("UsageError")), None)
            if refused and "memory" in refused:  # refused for the memory other programs hold: as an OOM kill
                tally.note("interrupted", refused)
                k.ok(SETUP)
            elif refused:  # a magic's error is a UsageError on stderr, with no error reply
                tally.note("failed_restores", refused)
                k.ok(SETUP)
            elif not sealed(k):
                tally.note("torn", f"last-good restored a mixed namespace: {r.stdout.strip()}")
                k.ok(SETUP)
        else:
            k.ok(SETUP)
        out = k.run("%checkpoint save")
        saved = re.search(r"\(id (\d+)\)", out.stdout)  # "kernel checkpoint #3 (id 12) saved"
        if saved is None:
            raise Unsaved(f"%checkpoint save: {out.error} {out.stdout.strip()[-200:]} {out.stderr.strip()[-300:]}")
        forced[int(saved[1])] = k.value("seal")
        tally.committed += 1
        batch = [mutating_cell(pick) for _ in range(pick.randint(2, 6))]
        if pick.random() < 0.5:
            tally.back_to_back += 1
            for cell in batch:
                k.kc.execute(cell)
        else:
            for cell in batch[:-1]:
                k.ok(cell)
            k.kc.execute(batch[-1])
        time.sleep(pick.uniform(0.0, 0.8))
        tally.kills[mode] += 1
        writers = descendants(k.pid)
        if mode == "group":
            kill([k.pid, *writers])
        elif mode == "writer":
            kill(writers)
            tally.writers_killed += len(writers)
            k.ok(mutating_cell(pick))  # the kernel lives on, and its next checkpoint is whole
            time.sleep(pick.uniform(0.0, 0.3))
            kill([k.pid])
        else:
            kill([k.pid])
    except (Unsaved, TimeoutError, AssertionError) as e:
        if not k.km.is_alive():  # killed by something else mid-cycle: what it committed is checked below
            tally.note("interrupted", f"the kernel died: {type(e).__name__}: {e}"[:500])
        elif isinstance(e, Unsaved):
            tally.note("failed_saves", str(e))
        else:
            raise
    finally:
        with contextlib.suppress(Exception):
            k.kill()
    result = cli("verify")
    if result.returncode != 0:
        tally.note("verify_failures", (result.stdout + result.stderr).strip()[-500:])
    existing = {r.id for r in store.checkpoints(SESSION)}
    for lost in sorted(set(forced) - existing):
        tally.note("lost", f"forced checkpoint {lost} is gone")
        del forced[lost]
    for new in sorted(existing - checked):  # this cycle's, and what its kernel adopted from the last one
        checked.add(new)
        try:
            if not restores_outside_a_kernel(store, new):
                tally.note("torn", f"checkpoint {new} does not match its seal")
        except Exception as e:
            tally.note("failed_restores", f"checkpoint {new}: {type(e).__name__}: {e}")


def run(store: Store, cycles: int, seed: int, progress: bool = False) -> Tally:
    pick = random.Random(seed)
    tally = Tally()
    forced: dict[int, str] = {}
    checked: set[int] = set()
    for _ in range(cycles):
        cycle(store, pick, tally, forced, checked)
        if progress and tally.cycles % 10 == 0:
            print(f"{tally.cycles} cycles, {tally.bad()} bad", file=sys.stderr, flush=True)
    return tally


def main() -> int:
    import tempfile

    from jupyter_ckpt.store import load_secret

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=HERE.parent / "benchmarks" / "results" / "faults.json")
    args = parser.parse_args()
    args.out = args.out.resolve()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)  # the kernels' IPC sockets go here, away from any other run's
        os.environ.update(JUPYTER_DATA_DIR=f"{tmp}/data", JUPYTER_CKPT_DIR=f"{tmp}/store", IPYTHONDIR=f"{tmp}/ipython")
        store = Store(Path(tmp) / "store", load_secret(Path(tmp) / "data" / "ckpt" / "secret"))
        started = time.time()
        tally = run(store, args.cycles, args.seed, progress=True)
        report: dict[str, Any] = {
            "seed": args.seed,
            "seconds": round(time.time() - started),
            "checkpoints": len(store.checkpoints(SESSION)),
            **asdict(tally),
        }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 1 if tally.bad() else 0


if __name__ == "__main__":
    raise SystemExit(main())
