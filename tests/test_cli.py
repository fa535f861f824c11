"""``jupyter ckpt`` on a store written by a real checkpointer."""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import sqlite3
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import dill
import pytest
from conftest import cli

from jupyter_ckpt.checkpointer import Checkpointer
from jupyter_ckpt.store import LOCK_WAIT, Store


@pytest.fixture
def written(store: Store) -> tuple[Store, list[int]]:
    module = types.ModuleType("__main__")
    ckpt = Checkpointer(store, "work/analysis.ipynb", module)
    exec("import math\nrows = [1, 2, 3]\ndef area(r):\n    return math.pi * r * r", module.__dict__)
    first = ckpt.save(tag="start")
    exec("rows.append(4)\ntotal = sum(rows)", module.__dict__)
    return store, [first, ckpt.save()]


def test_list_show_diff(written: tuple[Store, list[int]]) -> None:
    store, (first, second) = written
    sessions = cli("list")
    assert sessions.returncode == 0 and sessions.stdout.startswith("work/analysis.ipynb  2 checkpoint(s)")
    assert f"store {store.root}: " in sessions.stdout and " budget (" in sessions.stdout
    table = cli("list", "work/analysis.ipynb").stdout.splitlines()
    # Numbered from 1 in the session, beside the store-wide ids; the first is where a kernel started.
    assert table[1].split()[:3] == [">", "#1", str(first)] and table[2].split()[:2] == ["#2", str(second)]
    assert table[-1] == "> a new kernel started here"
    assert cli("show", "#2", "--session", "work/analysis.ipynb").stdout == cli("show", str(second)).stdout
    shown = cli("show", str(second)).stdout
    assert "rows: list" in shown and "[1, 2, 3, 4]" in shown and "math: module math" in shown
    assert f"\nwritten by python {platform.python_version()}" in shown  # the versions it was taken under
    manifest = json.loads(cli("show", "start", "--session", "work/analysis.ipynb", "--json").stdout)
    assert manifest["variables"]["rows"]["repr"] == "[1, 2, 3]"
    diff = cli("diff", str(first), str(second)).stdout
    assert "+ total: int" in diff and "~ rows: list" in diff


def test_the_command_line_names_sessions_and_refs_as_a_kernel_does(store: Store, tmp_path: Path) -> None:
    """A kernel keys a notebook by its absolute path: the command line took a path relative to the working
    directory as a session of its own ("no session", or "no checkpoints yet" with --session), and the kernel's
    REF ``previous`` as the newest checkpoint."""
    notebook = tmp_path / "work" / "analysis.ipynb"
    notebook.parent.mkdir()
    module = types.ModuleType("__main__")
    module.x = 1
    cid = Checkpointer(store, str(notebook), module).save()
    listed = cli("list", "analysis.ipynb", cwd=notebook.parent)
    assert listed.returncode == 0 and listed.stdout.splitlines()[1].split()[:3] == [">", "#1", str(cid)], listed
    shown = cli("show", "latest", "--session", "work/analysis.ipynb", cwd=tmp_path)
    assert shown.returncode == 0 and "x: int" in shown.stdout, shown
    unknown = cli("show", "latest", "--session", "elsewhere.ipynb", cwd=tmp_path)
    assert unknown.returncode == 1 and "no session" in unknown.stderr and "elsewhere.ipynb" in unknown.stderr
    previous = cli("show", "previous", "--session", str(notebook))
    assert previous.returncode == 1 and "in a kernel only" in previous.stderr, previous


def test_output_read_only_in_part_ends_without_a_traceback(written: tuple[Store, list[int]]) -> None:
    """``jupyter ckpt show ... | head`` printed a BrokenPipeError traceback once head had what it wanted."""
    _, (_, second) = written
    with subprocess.Popen(
        [sys.executable, "-m", "jupyter_ckpt.cli", "show", str(second)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as shown:
        assert shown.stdout is not None and shown.stderr is not None
        shown.stdout.close()  # the reader is gone before anything is written
        said = shown.stderr.read().decode()
        assert shown.wait(timeout=120) == 141 and said == "", said


def test_export_is_a_dill_session_file(written: tuple[Store, list[int]], tmp_path: Path) -> None:
    _, (_, second) = written
    out = tmp_path / "state.pkl"
    assert cli("export", str(second), str(out)).returncode == 0
    module = dill.load_module_asdict(str(out))
    assert module["rows"] == [1, 2, 3, 4] and module["total"] == 10
    assert round(module["area"](1), 5) == 3.14159 and module["math"].__name__ == "math"


def test_verify_finds_tampering(written: tuple[Store, list[int]]) -> None:
    store, (first, _) = written
    assert cli("verify").returncode == 0
    key = store.manifest(first)["groups"][0]["key"]
    path = store.root / "blobs" / key[:2] / key
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    bad = cli("verify")
    assert bad.returncode == 3 and f"blob {key} fails its signature check" in bad.stdout


def test_gc_and_enable_disable(written: tuple[Store, list[int]], jupyter_dirs: Path) -> None:
    store, _ = written
    orphan = store.blobs.put(b"nobody uses this" * 100)
    r = cli("gc", "--keep-last", "1")
    assert r.returncode == 0 and "removed 0 checkpoint(s) and 1 file(s)" in r.stdout  # the tagged one stays
    assert r.stdout.startswith("thinned 1 session(s): work/analysis.ipynb\n")  # it says what it thinned
    assert not (store.root / "blobs" / orphan.key[:2] / orphan.key).exists()

    config = Path(os.environ["IPYTHONDIR"]) / "profile_default" / "ipython_config.json"
    assert cli("enable").returncode == 0
    assert json.loads(config.read_text())["InteractiveShellApp"]["extensions"] == ["jupyter_ckpt"]
    assert cli("disable").returncode == 0
    assert json.loads(config.read_text())["InteractiveShellApp"]["extensions"] == []
    config.write_text("{not json")  # a profile the user broke: said in one line, left as it is
    r = cli("enable")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and f"cannot read the IPython profile's {config}" in r.stderr
    assert config.read_text() == "{not json"


def test_the_store_and_an_export_are_private_to_their_owner(written: tuple[Store, list[int]], tmp_path: Path) -> None:
    store, ids = written
    assert all((p.stat().st_mode & 0o777) == 0o700 for p in (store.root, store.root / "blobs"))
    assert cli("export", str(ids[0]), str(tmp_path / "state.pkl")).returncode == 0
    assert (tmp_path / "state.pkl").stat().st_mode & 0o777 == 0o600


def test_a_lost_catalog_is_reported_and_no_command_deletes_the_blobs(written: tuple[Store, list[int]]) -> None:
    store, _ = written
    blobs = sorted(p for p in (store.root / "blobs").rglob("*") if p.is_file())
    for suffix in ("-wal", "-shm"):
        Path(f"{store.root / 'catalog.sqlite'}{suffix}").unlink(missing_ok=True)
    (store.root / "catalog.sqlite").write_bytes(b"")  # emptied by a bad copy or a full disk
    verify = cli("verify")
    assert verify.returncode == 3 and "missing or empty" in verify.stderr and "Traceback" not in verify.stderr
    gc = cli("gc")
    assert gc.returncode == 3 and "missing or empty" in gc.stderr
    assert sorted(p for p in (store.root / "blobs").rglob("*") if p.is_file()) == blobs  # not one deleted
    assert (store.root / "catalog.sqlite").stat().st_size == 0  # and no new catalog in its place


@pytest.mark.parametrize(
    ("url", "said", "code"),
    [
        ("ftp://127.0.0.1:1/x", "the checkpoint store ftp://127.0.0.1:1/x cannot be used: ", 6),
        ("s3://", "'s3://' names no bucket: give one, as in s3://bucket/prefix", 6),
        (
            "s3:/bucket/prefix",
            "'s3:/bucket/prefix' is a URL with one slash after its scheme: write 's3://bucket/prefix'",
            1,
        ),
    ],
)
def test_a_store_url_that_names_no_store_is_one_line_and_creates_nothing(
    jupyter_dirs: Path, url: str, said: str, code: int
) -> None:
    """A client that connects as it is made and cannot, a bucket left out, a slash left out (which made a local
    directory named ``s3:`` where the command ran)."""
    r = subprocess.run(
        [sys.executable, "-m", "jupyter_ckpt.cli", "--store", url, "list"],
        capture_output=True,
        text=True,
        cwd=jupyter_dirs,
        timeout=120,
    )
    assert r.returncode == code and r.stderr.startswith(f"jupyter ckpt: error: {said}"), r
    assert r.stderr.count("\n") == 1
    assert not (jupyter_dirs / "s3:").exists()


def test_a_kernel_whose_store_url_cannot_be_used_checkpoints_locally(kernels: Any) -> None:
    k = kernels("ftp.ipynb", JUPYTER_CKPT_URL="ftp://127.0.0.1:1/x")
    loaded = k.run("%load_ext jupyter_ckpt\nx = 1")
    assert loaded.error is None
    assert "cannot be used: " in loaded.stderr and "checkpoints are kept locally only" in loaded.stderr
    k.ok("%checkpoint save -t here\nx = 2\n%checkpoint restore here")
    assert k.value("x") == 1


def test_an_export_that_cannot_be_written_whole_changes_nothing(store: Store, tmp_path: Path) -> None:
    """A full disk, or a file size limit, while the export was written: a traceback, a truncated file, and an
    existing file at that path emptied first."""
    module = types.ModuleType("__main__")
    module.rows = list(range(100_000))  # about 370 KB exported
    cid = Checkpointer(store, "work/analysis.ipynb", module).save()
    full = cli("export", str(cid), "/dev/full")
    assert (
        full.returncode == 1 and full.stderr == "jupyter ckpt: error: cannot write /dev/full: No space left on device\n"
    )

    kept = tmp_path / "out" / "state.pkl"
    kept.parent.mkdir()
    kept.write_bytes(b"an earlier export")
    limited = subprocess.run(  # files this process writes stop at 100 KiB (EFBIG: Python ignores SIGXFSZ)
        [sys.executable, "-m", "jupyter_ckpt.cli", "export", str(cid), str(kept)],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100 << 10, 100 << 10)),
    )
    assert limited.returncode == 1, limited
    assert limited.stderr == f"jupyter ckpt: error: cannot write {kept}: File too large; nothing was changed\n"
    assert kept.read_bytes() == b"an earlier export" and list(kept.parent.iterdir()) == [kept]
    assert cli("export", str(cid), str(kept)).returncode == 0  # and without the limit, the export replaces it
    assert dill.load_module_asdict(str(kept))["rows"] == module.rows


def test_enable_on_a_full_disk_leaves_the_profile_as_it_was(jupyter_dirs: Path) -> None:
    """``jupyter ckpt enable`` rewrote the IPython profile's config in place: out of room, the user's settings were
    cut short and a traceback shown."""
    config = Path(os.environ["IPYTHONDIR"]) / "profile_default" / "ipython_config.json"
    config.parent.mkdir(parents=True)
    settings = {"InteractiveShell": {"banner1": "x" * (200 << 10)}}  # larger than the limit below
    config.write_text(json.dumps(settings))
    r = subprocess.run(  # files this process writes stop at 100 KiB (EFBIG: Python ignores SIGXFSZ)
        [sys.executable, "-m", "jupyter_ckpt.cli", "enable"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100 << 10, 100 << 10)),
    )
    assert r.returncode == 1, r
    assert r.stderr == (
        f"jupyter ckpt: error: cannot write the IPython profile's {config}: File too large; nothing was changed\n"
    )
    assert json.loads(config.read_text()) == settings and list(config.parent.iterdir()) == [config]


def test_a_catalog_another_process_keeps_locked_is_said_so_and_changes_nothing(
    written: tuple[Store, list[int]],
) -> None:
    """A process that holds the catalog's write lock past the wait (a stuck writer, a long gc elsewhere): ``gc``
    said "the catalog could not be written: database is locked", exit 3, as for a damaged store."""
    store, ids = written
    holder = sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        assert cli("list", "work/analysis.ipynb").returncode == 0  # reading needs no lock
        thinned = cli("gc", "--keep-last", "0")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    catalog = store.root / "catalog.sqlite"
    assert thinned.returncode == 7 and thinned.stderr == (
        f"jupyter ckpt: error: the catalog {catalog} stayed locked by another process (a kernel committing a "
        f"checkpoint, a gc) for {LOCK_WAIT} s; nothing was changed. Try again.\n"
    )
    assert [r.id for r in store.checkpoints("work/analysis.ipynb")] == ids


def test_gc_beside_other_gcs_and_past_files_that_are_no_blobs(written: tuple[Store, list[int]]) -> None:
    """Several gc at once (two terminals, a kernel thinning the store beside the command line): one failed with
    "cannot read .../blobs/d6/d678... in the checkpoint store: No such file or directory", exit 3 as for a damaged
    store, when another collected a file it had listed (``test_blobs`` makes that happen every time). A file among
    the blobs that is none (a file browser's ``.DS_Store``) failed every gc: "malformed blob key '.DS_Store'"."""
    store, ids = written
    stray = store.blobs.path(store.manifest(ids[0])["groups"][0]["key"]).with_name(".DS_Store")
    stray.write_bytes(b"Finder")
    for _ in range(3):
        orphans = [store.blobs.put(os.urandom(64)).key for _ in range(2000)]
        runs = [
            subprocess.Popen(
                [sys.executable, "-m", "jupyter_ckpt.cli", "gc"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
            )
            for _ in range(6)
        ]
        said = [(run.wait(timeout=120), run.communicate()[1].decode()) for run in runs]
        assert said == [(0, "")] * 6, said
        assert not [key for key in orphans if store.blobs.has(key)]
    assert stray.read_bytes() == b"Finder"
    assert [r.id for r in store.checkpoints("work/analysis.ipynb")] == ids and cli("verify").returncode == 0


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("changed", "{"),
        ("changed", "5"),
        ("time", "noon"),
        ("time", 4102444800.0),
        ("status", b"ok"),
        ("manifest", b"\0"),
    ],
)
def test_a_catalog_row_damaged_by_hand_is_named_in_one_line_and_the_others_stay_usable(
    written: tuple[Store, list[int]], column: str, value: Any
) -> None:
    """The catalog is a file anyone who can write the store can edit. A value of another type in a row made ``list``,
    ``show`` and ``verify`` end in a traceback. A column beside the manifest changed by hand is read from the signed
    manifest instead (``verify`` names it); a manifest that fails its check is refused when it is read."""
    store, (first, second) = written
    with sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None) as db:
        db.execute(f"UPDATE checkpoints SET {column}=? WHERE id=?", (value, first))
    listed = cli("list", "work/analysis.ipynb")
    assert listed.returncode == 0 and listed.stderr == "", listed
    rows = re.findall(r"#\d+ +(\d+) ", listed.stdout)  # each row's id, after its number
    assert rows == [str(first), str(second)], listed.stdout  # a manifest is read when the checkpoint is shown
    shown = cli("show", str(first))
    if column == "manifest":
        assert shown.returncode == 3 and shown.stderr.count("\n") == 1 and f"checkpoint {first}" in shown.stderr
    else:
        assert shown.returncode == 0 and "ok" in shown.stdout, shown
    assert cli("show", str(second)).returncode == 0
    checked = cli("verify")
    assert checked.returncode == 3 and "Traceback" not in checked.stderr, checked
    assert f"checkpoint {first}: " in checked.stdout and "1 problem(s)" in checked.stdout


def test_a_catalog_another_process_keeps_from_readers_is_said_so_not_called_unreadable(jupyter_dirs: Path) -> None:
    """A process that holds the catalog in exclusive locking mode keeps even readers out: ``list`` said the catalog
    "is unreadable (database is locked)", exit 3, as for a damaged one."""
    write = (  # in a process of its own: a connection left open here would keep the holder below out
        "import types; from jupyter_ckpt.checkpointer import Checkpointer; from jupyter_ckpt.config import open_store; "
        "m = types.ModuleType('__main__'); m.x = 1; Checkpointer(open_store('', create=True), 'nb.ipynb', m).save()"
    )
    subprocess.run([sys.executable, "-c", write], check=True, timeout=120)
    holder = sqlite3.connect(jupyter_dirs / "store" / "catalog.sqlite", isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        listed = cli("list", "nb.ipynb")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert listed.returncode == 7 and listed.stderr.count("\n") == 1, listed
    assert "stayed locked by another process" in listed.stderr and "unreadable" not in listed.stderr
    assert cli("list", "nb.ipynb").returncode == 0


def test_text_from_the_catalog_cannot_send_escape_sequences_to_the_terminal(written: tuple[Store, list[int]]) -> None:
    """A session's key, a tag, a message are the catalog's text: printed as they were, an escape sequence planted
    there acted on the user's terminal (its title, its clipboard, a link). Control characters are printed as
    escapes; the line ends and tabs of the output stay. A tag planted in a checkpoint's row is not its tag (its
    signed manifest's is shown)."""
    store, (first, _) = written
    with sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None) as db:
        db.execute("INSERT INTO sessions (key, created) VALUES (?, 0)", ("\x1b]0;owned\x07other.ipynb",))
        db.execute("UPDATE checkpoints SET tag=? WHERE id=?", ("\x1b[2Jstart", first))
    sessions = cli("list")
    assert sessions.returncode == 0 and "\x1b" not in sessions.stdout and "\x07" not in sessions.stdout
    assert sessions.stdout.startswith("\\x1b]0;owned\\x07other.ipynb  0 checkpoint(s)"), sessions.stdout
    shown = cli("show", str(first))
    assert shown.returncode == 0 and "\x1b" not in shown.stdout and "2Jstart" not in shown.stdout
    refused = cli("show", "\x1b[2Jnothing", "--session", "work/analysis.ipynb")
    assert refused.returncode == 1 and "\x1b" not in refused.stderr and "\\x1b[2Jnothing" in refused.stderr


def test_verify_repair_puts_back_rows_changed_by_hand_and_deletes_what_no_restore_takes(
    written: tuple[Store, list[int]],
) -> None:
    """A row whose parent was changed by hand names another place in the timeline than its signed manifest, and is
    left out of it; a checkpoint whose manifest fails its check is refused by every restore. Neither could be
    deleted: no REF reached the first, and ``verify`` named both at every run. ``verify --repair`` writes the row
    back from its manifest and deletes the checkpoint that no restore takes, a line for each."""
    store, (first, second) = written
    with sqlite3.connect(store.root / "catalog.sqlite", isolation_level=None) as db:
        db.execute("UPDATE checkpoints SET parent=999 WHERE id=?", (second,))
        db.execute("UPDATE checkpoints SET manifest = replace(manifest, 'rows', 'cols') WHERE id=?", (first,))
    assert re.findall(r"#\d+ +(\d+) ", cli("list", "work/analysis.ipynb").stdout) == [str(first)]
    assert cli("verify").returncode == 3
    repaired = cli("verify", "--repair")
    assert repaired.returncode == 0, repaired
    assert repaired.stdout.splitlines()[:2] == [
        f"checkpoint {second}: its row, changed by hand, was written again from its manifest",
        f"checkpoint {first}: deleted, its manifest fails its check",
    ]
    assert "0 problem(s)" in repaired.stdout
    assert re.findall(r"#\d+ +(\d+) ", cli("list", "work/analysis.ipynb").stdout) == [str(second)]
    shown = cli("show", str(second))
    assert shown.returncode == 0 and "total: int" in shown.stdout, shown
    assert cli("verify").returncode == 0


def test_store_may_come_after_the_command_as_before_it(written: tuple[Store, list[int]], tmp_path: Path) -> None:
    store, (first, _) = written
    elsewhere = {**os.environ, "JUPYTER_CKPT_DIR": str(tmp_path / "no-store-here")}
    before = cli("--store", str(store.root), "show", str(first), env=elsewhere)
    after = cli("show", str(first), "--store", str(store.root), env=elsewhere)
    assert before.returncode == after.returncode == 0 and after.stdout == before.stdout
    assert cli("verify", "--store", str(store.root), env=elsewhere).returncode == 0
    twice = cli("--store", str(store.root), "list", "--store", str(tmp_path), env=elsewhere)
    assert twice.returncode == 2 and "--store is given twice" in twice.stderr
