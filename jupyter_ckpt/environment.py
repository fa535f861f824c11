"""The environment variables the cells set: ``%env CUDA_VISIBLE_DEVICES=0``,
``os.environ["TOKENIZERS_PARALLELISM"] = "false"``, ``load_dotenv()``.

They live in the process, not in a variable, and the cells after them depend on them: a library reads
its variable as it is imported or called, a ``subprocess`` inherits them. A fresh kernel starts without
them. A checkpoint keeps, as plain data in the manifest, what the session changed of ``os.environ``
since jupyter-ckpt was loaded (``Start``): the variables set to a new value, and those removed.

A value that may be a credential is not kept, only its variable's name (``withheld``): a name with a
part (between underscores) such as ``KEY``, ``TOKEN``, ``SECRET`` or ``PASSWORD`` (``OPENAI_API_KEY``,
``HF_TOKEN``, not ``TOKENIZERS_PARALLELISM``), or a value holding a URL's ``user:password@``. ``load_dotenv()``
moves a project's secrets from a file only its owner reads into the environment, and a checkpoint may be
pushed to an object store others read.

A whole restore (an undo too) makes the environment the restoring kernel's own start with the kept
changes, before it imports or unpickles anything, since a library may read its variable as it is
imported: what this kernel's session set since and the checkpoint does not keep goes back to how it
started. A withheld variable keeps the value it has here; one this kernel lacks is named in the report.
If the restore fails, the environment is put back as it was.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

ENVIRONMENT = "os.environ"  # how the timeline's changed column names it

# The parts of a variable's name that say its value may be a credential, and a URL's user and password.
_CREDENTIAL_PARTS = frozenset(
    ("KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT")
)
_URL_PASSWORD = re.compile(r"://[^/@\s:]*:[^/@\s]*@")


@dataclass(frozen=True)
class Start:
    """The environment a kernel had when jupyter-ckpt was loaded in it."""

    variables: dict[str, str]

    @classmethod
    def now(cls) -> Start:
        return cls(dict(os.environ))


def read(start: Start) -> dict[str, Any]:
    """What the session changed since ``start``: ``set`` (name to value), ``withheld`` (names whose values may
    be credentials) and ``unset`` (names), each only if not empty. Reading it costs about 20 µs for 40
    variables."""
    now = dict(os.environ)
    if now == start.variables:
        return {}
    changed = {name: value for name, value in sorted(now.items()) if start.variables.get(name) != value}
    withheld = [name for name, value in changed.items() if _may_be_a_credential(name, value)]
    found: dict[str, Any] = {}
    if kept := {name: value for name, value in changed.items() if name not in withheld}:
        found["set"] = kept
    if withheld:
        found["withheld"] = withheld
    if removed := sorted(set(start.variables) - set(now)):
        found["unset"] = removed
    return found


@contextlib.contextmanager
def applied(kept: dict[str, Any] | None, start: Start | None) -> Iterator[dict[str, str]]:
    """Inside the block (a whole restore's imports and unpickling) and after it, the environment is ``start``
    with the ``kept`` changes; if the block raises, it is put back as it was. Yields the withheld variables
    this kernel lacks, with why. A checkpoint older than the environment (``kept`` None), or a restore of
    some variables only (``start`` None), leaves it alone."""
    failed: dict[str, str] = {}
    if kept is None or start is None:
        yield failed
        return
    before = dict(os.environ)
    target = {name: value for name, value in start.variables.items() if name not in kept.get("unset", ())}
    target |= kept.get("set", {})
    for name in kept.get("withheld", []):
        if name in before:
            target[name] = before[name]  # whatever this kernel holds: the kept value is not known
        elif name not in target:
            failed[f"os.environ[{name!r}]"] = "not kept, as its value may be a credential: set it again"
    _become(target)
    try:
        yield failed
    except BaseException:
        _become(before)
        raise


def _become(target: dict[str, str]) -> None:
    """Set and remove variables so that ``os.environ`` is ``target``, touching only those that differ."""
    for name in [name for name in os.environ if name not in target]:
        del os.environ[name]
    for name, value in target.items():
        if os.environ.get(name) != value:
            os.environ[name] = value


def _may_be_a_credential(name: str, value: str) -> bool:
    return bool(_CREDENTIAL_PARTS.intersection(name.upper().split("_"))) or bool(_URL_PASSWORD.search(value))
