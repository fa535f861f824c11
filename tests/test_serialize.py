"""serialize.py on its own: groups of notebook objects written here and read in a new interpreter."""

from __future__ import annotations

import pickle
import subprocess
import sys
import types
from pathlib import Path

from jupyter_ckpt import serialize

REGISTRY = """
class Shape:
    registry = {}
    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        Shape.registry[cls.__name__] = cls
class Square(Shape):
    pass
class Circle(Shape):
    pass
sq = Square()
"""

READ = """
import pickle, sys, __main__
from jupyter_ckpt import serialize
serializer, payload, buffers = pickle.load(open(sys.argv[1], "rb"))
__main__.__dict__.update(serialize.loads(serialize.Packed(serializer, payload, buffers), __main__))
print(all(c is globals()[n] for n, c in Shape.registry.items()), sorted(Shape.registry), isinstance(sq, Shape))
"""


def test_a_subclass_registry_holds_the_restored_classes_whatever_the_order(tmp_path: Path) -> None:
    notebook = types.ModuleType("__main__")
    exec(REGISTRY, notebook.__dict__)
    # the subclasses first: each is then met inside its base's registry before its own stream
    packed = serialize.dumps({n: notebook.__dict__[n] for n in ("Circle", "sq", "Square", "Shape")}, notebook)
    assert packed.serializer == "cloudpickle"  # dill warns on the recursion, and a warning is a failure
    saved = tmp_path / "group.pickle"
    saved.write_bytes(pickle.dumps((packed.serializer, packed.payload, [bytes(b) for b in packed.buffers])))
    read = subprocess.run([sys.executable, "-c", READ, str(saved)], capture_output=True, text=True, check=True)
    assert read.stdout.strip() == "True ['Circle', 'Square'] True"


class Failed(Exception):
    """An exception that keeps other arguments than its ``__init__`` takes (importable: the C pickler's path)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def test_exceptions_come_back_as_they_were_whatever_their_init_takes() -> None:
    notebook = types.ModuleType("__main__")
    kept = {"failed": Failed(5, "bad row"), "missing": FileNotFoundError(2, "gone", "data.csv"), "plain": KeyError("k")}
    packed = serialize.dumps(kept, notebook)
    assert packed.serializer == "pickle"
    back = serialize.loads(packed, notebook)
    assert (type(back["failed"]), back["failed"].code, back["failed"].args) == (Failed, 5, ("bad row",))
    assert (back["missing"].errno, back["missing"].filename, back["plain"].args) == (2, "data.csv", ("k",))
