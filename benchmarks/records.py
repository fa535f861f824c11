"""Records of a notebook class: how long a group of them takes to pickle and to load.

A notebook that keeps its data as instances of classes it defines (a dataclass per row, a class per
order) has its groups pickled with the class: jupyter-ckpt's ``hybrid`` pickler (the classes by dill, the
records by the C pickler) against its dill path (what it used before, ``serialize.dump_with("dill")``)
and ``dill.dumps`` itself, on the same objects, alternated, median of ``--repeat`` rounds. A list of
dicts of the same fields, which the C pickler takes alone, is the floor.

    .venv/bin/python benchmarks/records.py [--records 100000] [--repeat 3]   # writes results/records.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import textwrap
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dill

from jupyter_ckpt import serialize

RESULTS = Path(__file__).resolve().parent / "results"

NOTEBOOK = """
from dataclasses import dataclass, field

class Order:
    def __init__(self, i):
        self.id, self.customer, self.amount, self.items = i, f"c{i % 997}", i * 0.5, [i, i + 1]

@dataclass
class Row:
    id: int
    customer: str
    amount: float
    items: list = field(default_factory=list)

@dataclass(frozen=True)
class Key:
    id: int
    customer: str
    amount: float

orders = [Order(i) for i in range(N)]
rows = [Row(i, f"c{i % 997}", i * 0.5, [i, i + 1]) for i in range(N)]
keys = [Key(i, f"c{i % 997}", i * 0.5) for i in range(N)]
dicts = [{"id": i, "customer": f"c{i % 997}", "amount": i * 0.5, "items": [i, i + 1]} for i in range(N)]
"""
GROUPS = {"class": ("Order", "orders"), "dataclass": ("Row", "rows"), "frozen dataclass": ("Key", "keys")}


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    module = types.ModuleType("__main__")
    with serialize.as_main(module):
        exec(textwrap.dedent(NOTEBOOK).replace("range(N)", f"range({args.records})"), module.__dict__)
        rows: dict[str, dict[str, list[float]]] = {}
        for name, (cls, records) in [*GROUPS.items(), ("dicts (floor)", (None, "dicts"))]:
            group = {n: module.__dict__[n] for n in (cls, records) if n is not None}
            times: dict[str, list[float]] = {}
            for _ in range(args.repeat):  # alternated: each round runs every way once
                took, packed = timed(lambda group=group: serialize.dumps(group, module))
                times.setdefault(f"jupyter-ckpt ({packed.serializer}) dump", []).append(took)
                times.setdefault("jupyter-ckpt load", []).append(timed(lambda p=packed: serialize.loads(p, module))[0])
                if cls is None:
                    continue
                took, by_dill = timed(lambda group=group: serialize.dump_with("dill", group, module))
                times.setdefault("dill path dump", []).append(took)
                times.setdefault("dill path load", []).append(timed(lambda p=by_dill: serialize.loads(p, module))[0])
                times.setdefault("dill.dumps", []).append(timed(lambda group=group: dill.dumps(group))[0])
            rows[name] = times
    per_record = {
        name: {way: statistics.median(t) / args.records * 1e6 for way, t in times.items()}
        for name, times in rows.items()
    }
    report = {"records": args.records, "repeat": args.repeat, "us_per_record": per_record}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "records.json").write_text(json.dumps(report, indent=1) + "\n")
    for name, ways in per_record.items():
        print(name + ": " + ", ".join(f"{way} {us:.1f} us" for way, us in ways.items()))


if __name__ == "__main__":
    main()
