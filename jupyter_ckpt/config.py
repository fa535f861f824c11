"""Configuration shared by the kernel's extension, the server extension and the CLI: where the store is.

``StoreOptions`` names the store; ``Checkpoints`` adds the options of the
IPython extension (``c.Checkpoints.<name>``). Nothing here imports IPython, so
the CLI and the server read options without loading a shell.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Enum, Float, Int, TraitError, Unicode, default, validate
from traitlets.config import Configurable

from .errors import BadArgument, IntegrityError
from .remote import Remote, Replica, is_remote
from .retention import Limits
from .session import names_a_path
from .store import Store, check_catalog, holds_blobs, load_secret
from .units import parse_size

# Set by the server in the environment of a kernel it restarts after a crash: its crash recovery chooses the state to
# bring back (and stops restoring one that keeps killing the kernel), so the kernel restores nothing as it starts.
CRASH_RESTART = "JUPYTER_CKPT_CRASH_RESTART"


def default_store_dir() -> Path:
    return Path(os.environ.get("JUPYTER_CKPT_DIR") or Path(jupyter_data_dir()) / "ckpt")


_ONE_SLASH = re.compile(r"[a-z][a-z0-9+.-]+:/(?!/)")


def store_location(store_url: str = "") -> tuple[Path, str | None]:
    """The local directory and the remote URL (None: local only) that ``store_url`` or the environment names.

    A remote store keeps the local directory as its fast tier: ``$JUPYTER_CKPT_DIR``, else the default.
    """
    url = store_url or os.environ.get("JUPYTER_CKPT_URL", "")
    if is_remote(url):
        return default_store_dir(), url
    if _ONE_SLASH.match(url):  # a local directory named "s3:" is not what anyone means
        raise BadArgument(f"{url!r} is a URL with one slash after its scheme: write {url.replace(':/', '://', 1)!r}")
    return (Path(url.removeprefix("file://")) if url else default_store_dir()), None


def open_store(store_url: str = "", secret_file: str = "", *, create: bool = True) -> Store:
    """The store a kernel, the server and the CLI all open by default (the CLI without ``create``). One that cannot
    be written (a disk mounted read-only, an archive, a snapshot) is read as it is: its timeline is listed and
    restored from, and a change is refused as the store's condition (``StoreReadOnly``)."""
    root, _ = store_location(store_url)
    create = create and (not root.exists() or os.access(root, os.W_OK))
    secret = Path(
        secret_file or os.environ.get("JUPYTER_CKPT_SECRET_FILE") or Path(jupyter_data_dir()) / "ckpt" / "secret"
    )
    if not create:
        check_catalog(root, create=False)  # "no store here" before "no secret"
    if not secret.exists() and holds_blobs(root):  # a new secret would make every checkpoint read as tampered
        raise IntegrityError(
            f"the checkpoint secret {secret} is missing, but the store {root} holds checkpoints signed with it; "
            "nothing was changed. Put the secret back (or name it: c.Checkpoints.secret_file, "
            "$JUPYTER_CKPT_SECRET_FILE), or move the store away to start afresh."
        )
    return Store(root, load_secret(secret, create=create), create=create, secret_path=secret)


def open_replica(store: Store, store_url: str = "", notify: Callable[[str], None] = print) -> Replica | None:
    """The remote tier of ``store`` if ``store_url`` (or ``$JUPYTER_CKPT_URL``) names an object store."""
    _, url = store_location(store_url)
    return Replica(store, Remote(url), notify) if url else None


class StoreOptions(Configurable):
    """Where the store is: options the kernel's extension and the server extension share."""

    store_url = Unicode(
        "",
        help="Where checkpoints are kept: a local directory, or an object store URL (s3://bucket/prefix, gs://, "
        "az://) they are uploaded to in the background from the local directory, which stays the fast tier "
        "($JUPYTER_CKPT_DIR, else <jupyter data dir>/ckpt). Default: $JUPYTER_CKPT_URL, else the local directory. "
        "Credentials and endpoint come from the client's usual places (AWS_ENDPOINT_URL, profiles, roles).",
    ).tag(config=True)
    secret_file = Unicode(
        "",
        help="File holding the HMAC secret that signs checkpoints; machines that restore each other's checkpoints "
        "share it. At least 32 bytes: raw (head -c 32 /dev/urandom) or text (64 hex characters, as the one made "
        "on first use). Default: $JUPYTER_CKPT_SECRET_FILE, else <jupyter data dir>/ckpt/secret.",
    ).tag(config=True)

    # Retention (retention.py). A quarter of the disk lets a session keep many states of a large namespace
    # (checkpoints after the first write only what changed) and leaves the rest to the user; 20 GiB caps it
    # on large disks, where a forgotten store should not grow into hundreds of gigabytes. The floor leaves
    # room for the notebook's autosave and everything else on the disk.
    max_store_share = Float(
        0.25,
        help="Retention: the store keeps at most this share of the filesystem it is on (with max_store_size, "
        "the smaller wins). Past it, old untagged checkpoints are thinned in the background: recent ones dense, "
        "older ones sparse; tagged ones, each notebook's newest good states and each running kernel's are never "
        "thinned.",
    ).tag(config=True)
    max_store_size = Unicode(
        "20G",
        help="Retention: the store keeps at most this many bytes (e.g. 500M, 20G; empty: no cap but max_store_share).",
    ).tag(config=True)
    min_free_share = Float(
        0.1,
        help="Retention: checkpoints never take the store's filesystem below this share of it free (with "
        "min_free, the smaller wins): a small disk keeps a tenth free, a large one min_free. The same share of "
        "its files (inodes) is kept free, at most min_free / 16 KiB of them: each blob is a file.",
    ).tag(config=True)
    min_free = Unicode(
        "2G",
        help="Retention: checkpoints never take the store's filesystem below this much free space "
        "(with min_free_share, the smaller wins).",
    ).tag(config=True)

    def open_store(self) -> Store:
        return open_store(self.store_url, self.secret_file)

    def limits(self) -> Limits:
        """The retention options, checked: a malformed one is a BadArgument naming it."""
        for name in ("max_store_share", "min_free_share"):
            if not 0 < getattr(self, name) <= 1:
                raise BadArgument(f"c.{type(self).__name__}.{name} must be a share above 0 and at most 1")
        return Limits(
            max_store_share=self.max_store_share,
            max_store_size=self._size("max_store_size") if self.max_store_size.strip() else None,
            min_free_share=self.min_free_share,
            min_free=self._size("min_free"),
        )

    def _size(self, name: str) -> int:
        try:
            return parse_size(getattr(self, name))
        except BadArgument as e:
            raise BadArgument(f"c.{type(self).__name__}.{name}: {e}") from None


# What a numeric option says it takes, and whether a value is one of those.
Range = tuple[str, Callable[[float], bool]]


def in_range(owner: Configurable, ranges: dict[str, Range], proposal: dict[str, Any]) -> Any:
    """A traitlets validator's answer: the value proposed for one of ``ranges``, or TraitError saying what the
    option takes. Refused as it is set, in a configuration file or by ``%config``, the option keeps its value."""
    name, value = proposal["trait"].name, proposal["value"]
    what, takes = ranges[name]
    if not takes(value):
        raise TraitError(f"c.{type(owner).__name__}.{name} must be {what}, not {value!r}")
    return value


# The numeric options of ``Checkpoints`` and the values each takes: another (0 for idle_poll, which then looked again
# at once for ever; nan; a negative lag) is refused.
_RANGES: dict[str, Range] = {
    "budget": ("a share of execution time, 0 or more", lambda v: 0 <= v < math.inf),
    "max_lag": ("a number of seconds above 0", lambda v: v > 0),
    "idle_poll": ("a number of seconds above 0", lambda v: 0 < v < math.inf),
    "progress_after": ("a number of seconds, 0 or more", lambda v: v >= 0),
    "interval": ("a number of seconds, 0 or more (0: off)", lambda v: 0 <= v < math.inf),
    "every": ("a number of cells, 0 or more (0: every cell within the budget)", lambda v: v >= 0),
}


class Checkpoints(StoreOptions):
    """Options of the jupyter-ckpt IPython extension (``c.Checkpoints.<name>``; ``%config Checkpoints`` in a kernel)."""

    session = Unicode(
        help="The session (a notebook's lineage of checkpoints) when no frontend names the notebook: the terminal, "
        "papermill or nbclient jobs. A kernel that starts with the same name resumes it. A notebook's path (with "
        "a / or ending in .ipynb) is made absolute, with links resolved (a relative one in $JUPYTER_CKPT_SESSION from "
        "the folder of the shell that set it, $PWD); another name is kept as it is. The "
        "notebook a frontend names comes first (JPY_SESSION_NAME, __vsc_ipynb_file__, __session__), and "
        "%checkpoint session NAME before everything. Default: $JUPYTER_CKPT_SESSION, else a key of the kernel's own.",
    ).tag(config=True)

    restore_on_start = Bool(
        False,
        help="When a kernel starts on a notebook whose session has checkpoints, restore the last good one (not in "
        "a kernel the server restarts after a crash: its crash recovery chooses the state). "
        "Off, the kernel's first cell prints one line: what the earlier kernels left, and the command to restore it.",
    ).tag(config=True)
    auto = Bool(True, help="Checkpoint automatically (after cells and/or periodically) in new sessions.").tag(
        config=True
    )
    every = Int(
        0,
        help="In new sessions, checkpoint after every Nth cell, whatever it costs. 0: every cell within the "
        "overhead budget (a cell followed by idle always gets its checkpoint; back-to-back ones as the budget allows).",
    ).tag(config=True)
    budget = Float(
        0.03,
        help="Under the default policy, the share of execution time that checkpoints of back-to-back cells "
        "(Run All, nbclient) may cost: forks and the pages copied while their writers run.",
    ).tag(config=True)
    max_lag = Float(
        60.0,
        help="Under the default policy, the newest checkpoint is never more than this many seconds of execution "
        "behind: a cell boundary past it is checkpointed whatever the budget says. Inside a longer cell, "
        "jupyter_ckpt.here() takes a milestone at most this often (the policy's interval when one is set).",
    ).tag(config=True)
    interval = Float(0.0, help="In new sessions, also checkpoint once this many seconds have passed (0: off).").tag(
        config=True
    )
    idle_poll = Float(
        1.0,
        help="Seconds between the idle thread's checks (it also looks a quarter second after each cell): commit "
        "finished background writes (also while a cell runs) and, while the kernel is idle, take an owed or "
        "periodic checkpoint, and make writable again the pages a finished writer shared.",
    ).tag(config=True)
    background = Bool(
        True,
        help="Write automatic checkpoints from a forked child so cells never wait for them "
        "(falls back to writing in the kernel where forking is unsafe: no fork(), a live CUDA context, low memory).",
    ).tag(config=True)
    lazy_restore = Bool(
        True,
        help="Restore large arrays stored raw by mapping their chunk files instead of reading them: the prompt "
        "is back at once, pages are read as they are touched, and the chunks are verified in the background "
        "(a damaged one is reported at the next cell). False: read and verify everything before the restore returns.",
    ).tag(config=True)
    progress_after = Float(
        1.0,
        help="Seconds a save or restore runs before it shows its progress (bytes written or read of the total) "
        "in the output of the cell that asked for it, and in the sidebar.",
    ).tag(config=True)
    replay = Enum(
        ["ask", "auto", "never"],
        "ask",
        help="What a restore does with variables the checkpoint could not hold (a generator, a connection): "
        "'ask' names them and the cells that would rebuild them (%checkpoint replay runs those), 'auto' runs "
        "them at once, 'never' only names them. Replay runs code again, with its side effects.",
    ).tag(config=True)

    @validate(*_RANGES)
    def _in_range(self, proposal: dict[str, Any]) -> Any:
        return in_range(self, _RANGES, proposal)

    @default("session")
    def _session_from_environment(self) -> str:
        """``$JUPYTER_CKPT_SESSION``. A relative notebook path in it is taken from the folder of the shell that set
        it (``$PWD``): the kernel may run elsewhere (nbconvert and nbclient start it in the notebook's folder)."""
        name = os.environ.get("JUPYTER_CKPT_SESSION", "")
        shell = os.environ.get("PWD", "")
        relative = names_a_path(name) and not name.startswith("file://") and not os.path.isabs(os.path.expanduser(name))
        if relative and os.path.isabs(shell):
            return os.path.join(shell, name)
        return name
