"""Bad input of every class, at every surface that takes it: the command line, the REST API, the magic.

One row per class of input. Each surface must answer with one clear line: the CLI
on stderr with its exit code, the REST API as JSON with its status, the magic as a
``UsageError``. And nothing on disk changes: the store's files, their modes and
the catalog's rows are the same after the row as before it, but for the
execution history, which records the failed cell the user ran. README's guarantees
list these classes.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import cli

pytest_plugins = ("pytest_jupyter.jupyter_server", "conftest_server")

Damage = Callable[[Path, dict[str, Any]], Callable[[], None]]


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))


def _damaged_blob(how: Callable[[Path], None]) -> Damage:
    """Damage the blob holding ``n`` in the middle checkpoint; returns how to put it back."""

    def damage(root: Path, ids: dict[str, Any]) -> Callable[[], None]:
        manifest = ids["manifest"]
        key = manifest["groups"][manifest["variables"]["n"]["group"]]["key"]
        path = root / "blobs" / key[:2] / key
        original = path.read_bytes()
        how(path)
        return lambda: path.write_bytes(original)

    return damage


def _newer_format(root: Path, ids: dict[str, Any]) -> Callable[[], None]:
    def set_format(value: str) -> None:
        with sqlite3.connect(root / "catalog.sqlite") as db:
            db.execute("UPDATE meta SET value=? WHERE key='format'", (value,))
        db.close()

    set_format("7")
    return lambda: set_format("1")


def _sql(root: Path, sql: str, *args: Any) -> Any:
    """One statement on the catalog, as someone without the secret could run it; its first row."""
    with sqlite3.connect(root / "catalog.sqlite") as db:
        row = db.execute(sql, args).fetchone()
    db.close()
    return row


def _edited_cell(root: Path, ids: dict[str, Any]) -> Callable[[], None]:
    """The source of the last cell checkpoint b recorded, changed by one character."""
    cell, source = _sql(
        root, "SELECT c.id, c.source FROM cells c JOIN checkpoints k ON k.last_cell = c.id AND k.id=?", ids["b"]
    )
    _sql(root, "UPDATE cells SET source=? WHERE id=?", source + " ", cell)
    return lambda: _sql(root, "UPDATE cells SET source=? WHERE id=?", source, cell)


def _moved_manifest(root: Path, ids: dict[str, Any]) -> Callable[[], None]:
    """Checkpoint a's manifest and its valid signature, copied into checkpoint b's row."""
    original = _sql(root, "SELECT manifest, mac FROM checkpoints WHERE id=?", ids["b"])
    _sql(
        root,
        "UPDATE checkpoints SET (manifest, mac) = (SELECT manifest, mac FROM checkpoints WHERE id=?) WHERE id=?",
        ids["a"],
        ids["b"],
    )
    return lambda: _sql(root, "UPDATE checkpoints SET manifest=?, mac=? WHERE id=?", *original, ids["b"])


def _blobs_made_a_file(root: Path, ids: dict[str, Any]) -> Callable[[], None]:
    """The store's ``blobs`` directory moved away and a file put in its place: every blob read fails with ENOTDIR,
    which no surface turned into its one line (a traceback in the cell and from the CLI)."""
    blobs, aside = root / "blobs", root.parent / "blobs-aside"
    blobs.rename(aside)
    blobs.write_bytes(b"")
    blobs.chmod(0o600)

    def undo() -> None:
        blobs.unlink()
        aside.rename(blobs)

    return undo


def _open_to_others(root: Path, ids: dict[str, Any]) -> Callable[[], None]:
    mode = root.stat().st_mode & 0o777
    root.chmod(0o777)
    return lambda: root.chmod(mode)


@dataclass(frozen=True)
class Bad:
    """A class of bad input, as each surface takes it. ``{a}``/``{b}`` are checkpoint ids, ``{absent}`` a
    path that does not exist (and must not after), ``{dir}`` an existing directory."""

    what: str
    cli: tuple[tuple[str, ...], int, str] | None = None  # arguments, exit code, in the message
    rest: tuple[str, str, dict[str, Any], int, str] | None = None  # method, path under api/ckpt, kwargs, status
    magic: tuple[str, str] | None = None  # the line, in the UsageError
    damage: Damage | None = None


ROWS = [
    Bad(
        "an unknown checkpoint id",
        cli=(("show", "999"), 1, "no checkpoint 999"),
        rest=("GET", "checkpoints/999", {}, 404, "no checkpoint 999"),
        magic=("%checkpoint restore 999", "no checkpoint 999 in session"),
    ),
    Bad(
        "a REF that only looks like a number",
        cli=(("show", "\u00b2"), 1, "no checkpoint or tag '\u00b2'"),
        rest=("GET", "checkpoints/\u00b2", {}, 400, "not a checkpoint id"),
        magic=("%checkpoint restore \u00b2", "no checkpoint or tag '\u00b2'"),
    ),
    Bad(
        "a step back of none",
        cli=(("show", "-0", "--session", "{session}"), 1, "-0 is no step back"),
        magic=("%checkpoint restore -0", "-0 is no step back"),
    ),
    Bad(
        "an unknown session or tag",
        cli=(("list", "nope"), 1, "no session 'nope'"),
        rest=("GET", "checkpoints", {"params": {"session": "nope.ipynb"}}, 404, "no session 'nope.ipynb'"),
        magic=("%checkpoint restore nosuchtag", "no checkpoint or tag 'nosuchtag'"),
    ),
    Bad(
        "a path that climbs out of the store",
        cli=(("list", "../../etc/passwd"), 1, "no session"),
        rest=("GET", "checkpoints", {"params": {"session": "../../etc/passwd"}}, 404, "no session"),
    ),
    Bad(
        "a malformed size or number",
        cli=(("gc", "--max-size", "huge"), 1, "'huge' is not a size"),
        rest=("GET", "events", {"params": {"since": "yesterday"}}, 400, "'since' must be a number"),
        magic=("%checkpoint gc --max-size lots", "'lots' is not a size"),
    ),
    Bad(  # a traceback: "OverflowError: cannot convert float infinity to integer"
        "a size too large for a number",
        cli=(("gc", "--max-size", "9" * 400), 1, "is too large a size"),
        magic=("%checkpoint gc --max-size " + "9" * 400 + "G", "is too large a size"),
    ),
    Bad(  # taken for no --max-size at all: gc thinned as if it had not been given
        "an empty size",
        cli=(("gc", "--max-size", ""), 1, "'' is not a size"),
        magic=('%checkpoint gc --max-size ""', "'' is not a size"),
    ),
    Bad(  # taken for no --session: gc thinned every notebook's checkpoints, list listed every session
        "an empty session name",
        cli=(("gc", "--session", "", "--keep-last", "0"), 1, "a session name needs at least one character"),
    ),
    Bad("an empty session to list", cli=(("list", ""), 1, "a session name needs at least one character")),
    Bad(  # read as an option: "--max-size: expected one argument"
        "a negative size",
        cli=(("gc", "--max-size", "-5G"), 1, "'-5G' is a negative size: give 0 or more"),
        magic=("%checkpoint gc --max-size -5G", "'-5G' is a negative size: give 0 or more"),
    ),
    Bad(
        "a number that is not finite, to the REST API",
        rest=("GET", "events", {"params": {"since": "nan"}}, 400, "'since' must be a number"),
    ),
    Bad(
        "an unknown command or option",
        cli=(("list", "--frobnicate"), 2, "unrecognized arguments: --frobnicate"),
        rest=("PATCH", "checkpoints/{a}", {"body": "{not json"}, 400, "not valid JSON"),
        magic=("%checkpoint frobnicate", "unknown %checkpoint command 'frobnicate'"),
    ),
    Bad(
        "a value outside its choices",
        magic=("%checkpoint auto sometimes", "usage: %checkpoint auto on|off"),
    ),
    Bad("a number that is not finite", magic=("%checkpoint auto on --interval nan", "--interval must be a positive")),
    Bad("an option its command ignores", magic=("%checkpoint auto off --every 3", "go with %checkpoint auto on")),
    Bad("a quoted empty tag", magic=('%checkpoint save -t ""', "a tag needs at least one character")),
    Bad("an unbalanced quote", magic=('%checkpoint restore "unterminated', "No closing quotation")),
    Bad("a variable the checkpoint does not hold", magic=("%checkpoint restore {a} --only nothere", "no variable")),
    Bad("a session name that is a directory", magic=("%checkpoint session {dir}", "is a directory, not a notebook")),
    Bad("two session names", magic=("%checkpoint session a b", "%checkpoint session takes one NAME")),
    Bad("an unknown tag of the store's one session", cli=(("show", "nosuchtag"), 1, "no checkpoint or tag")),
    Bad(  # a notebook's path, made absolute as a kernel makes it: the error names what was looked for
        "a session the store does not hold",
        cli=(("gc", "--session", "nope.ipynb"), 1, f"no session '{os.path.realpath('nope.ipynb')}'"),
    ),
    Bad(
        "an export into the store",
        cli=(("export", "{a}", "{store}/blobs/state.pkl"), 1, "is inside the checkpoint store"),
    ),
    Bad("a negative count", cli=(("gc", "--keep-last", "-3"), 1, "--keep-last cannot be negative")),
    # gc took them: a remote blob younger than -5 s, or than nan s, is none, so a writer's upload in flight went.
    Bad("a negative grace", cli=(("gc", "--grace", "-5"), 1, "--grace must be a number of seconds, 0 or more")),
    Bad("a grace that is no number", cli=(("gc", "--grace", "nan"), 1, "--grace must be a number of seconds")),
    # The last one won: ``gc --max-size 1G --max-size 5G`` thinned to 5G.
    Bad("an option given twice", cli=(("gc", "--max-size", "1K", "--max-size", "5G"), 2, "--max-size is given twice")),
    # Each was ignored: ``save --replay`` saved, ``list --only x`` listed, ``restore -m`` restored.
    Bad(
        "an option of another command",
        magic=("%checkpoint save --replay", "--replay does not go with %checkpoint save"),
    ),
    Bad(
        "an option of list to restore",
        magic=("%checkpoint restore {a} -n 3", "-n does not go with %checkpoint restore"),
    ),
    Bad("an option to a command that takes none", magic=("%checkpoint undo --all", "which takes no options")),
    Bad("options that contradict", magic=("%checkpoint list -n 1 --all", "takes -n N (the last N) or --all, not both")),
    # The last one won: ``--only x --only y`` restored y alone, ``-t a -t b`` tagged b.
    Bad("an option given twice", magic=("%checkpoint restore {a} --only n --only m", "--only is given 2 times")),
    Bad("arguments to timeline", magic=("%checkpoint timeline {a}", "%checkpoint timeline takes no arguments")),
    Bad(
        "a tag that is a REF word",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "latest"}}, 400, "cannot be a tag"),
        magic=("%checkpoint tag {a} -t last-good", "'last-good' cannot be a tag"),
    ),
    Bad(
        "a tag that reads as an option",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "-x"}}, 400, "starts with '-'"),
        magic=("%checkpoint tag {a} -t=-x", "starts with '-'"),
    ),
    Bad(
        "a tag too long",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "x" * 101}}, 400, "at most 100 characters"),
        magic=("%checkpoint tag {a} -t " + "x" * 101, "a tag has at most 100 characters"),
    ),
    Bad(
        "a tag already used",
        rest=("PATCH", "checkpoints/{b}", {"body": {"tag": "start"}}, 400, "'start' is already used by checkpoint {a}"),
        magic=("%checkpoint tag {b} -t start", "tag 'start' is already used by checkpoint {a}"),
    ),
    Bad(  # it broke the tables that list it
        "a tag with a control character",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "a\nb"}}, 400, "control character"),
        magic=("%checkpoint tag {a} -t a\x1bb", "control character"),
    ),
    Bad(  # taken: a line break to str.splitlines(), and to a terminal
        "a tag with a Unicode line break",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "a\u2028b"}}, 400, "control character"),
    ),
    Bad(
        "a tag with a C1 control (next line)",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "a\x85b"}}, 400, "control character"),
    ),
    Bad(  # ignored: the reply was 200 and the checkpoint as it was, so a misspelt field looked done
        "a field the request does not take",
        rest=("PATCH", "checkpoints/{a}", {"body": {"tag": "t", "tags": "u"}}, 400, "unknown field 'tags'"),
    ),
    Bad(  # the checkpoint failed once its data was written: "checkpoint failed: 'utf-8' codec can't encode"
        "a message that is not text (a lone surrogate)",
        rest=(
            "POST",
            "checkpoints",
            {"body": {"session": "bad.ipynb", "kernel_id": "{kernel}", "message": "\udc80 note"}},
            400,
            "'message' must be valid text (it holds a lone surrogate)",
        ),
    ),
    Bad(  # stored, and sent with every checkpoint of the timeline: a 2 MB message made each listing 2 MB longer
        "a message too long",
        rest=(
            "POST",
            "checkpoints",
            {"body": {"session": "bad.ipynb", "kernel_id": "{kernel}", "message": "m" * 4097}},
            400,
            "'message' has at most 4096 characters, not 4097",
        ),
        magic=("%checkpoint save -m " + "m" * 4097, "a message has at most 4096 characters, not 4097"),
    ),
    Bad(
        "a tag that is not text (a lone surrogate)",
        rest=("PATCH", "checkpoints/{a}", {"body": '{"tag": "\\ud800"}'}, 400, "lone surrogate"),
    ),
    Bad(
        "a kernel that does not run",
        rest=("POST", "checkpoints/{a}/restore", {"body": {"kernel_id": "no-such"}}, 404, "no running kernel"),
    ),
    Bad(
        "a tampered blob",
        cli=(("export", "{b}", "{absent}"), 3, "checkpoint {b}: blob "),
        rest=("POST", "checkpoints/{b}/restore", {"body": {"kernel_id": "{kernel}"}}, 409, "signature"),
        magic=("%checkpoint restore {b}", "(id {b}): blob "),
        damage=_damaged_blob(_flip_last_byte),
    ),
    Bad(
        "a truncated blob",
        cli=(("export", "{b}", "{absent}"), 3, "checkpoint {b}: blob "),
        rest=("POST", "checkpoints/{b}/restore", {"body": {"kernel_id": "{kernel}"}}, 409, "(id {b}): blob "),
        magic=("%checkpoint restore {b}", "truncated"),
        damage=_damaged_blob(lambda path: path.write_bytes(path.read_bytes()[:-100])),
    ),
    Bad(
        "a recorded cell edited in the catalog",
        rest=("GET", "checkpoints/{b}", {}, 409, "fails its signature check"),
        magic=("%checkpoint history {b}", "fails its signature check"),
        damage=_edited_cell,
    ),
    Bad(
        "a manifest moved to another checkpoint",
        cli=(("show", "{b}"), 3, "signed for another checkpoint"),
        rest=("POST", "checkpoints/{b}/restore", {"body": {"kernel_id": "{kernel}"}}, 409, "signed for another"),
        magic=("%checkpoint restore {b}", "signed for another checkpoint"),
        damage=_moved_manifest,
    ),
    Bad(
        "a store whose blobs cannot be read",
        cli=(("export", "{b}", "{absent}"), 3, "cannot be read: Not a directory"),
        rest=("POST", "checkpoints/{b}/restore", {"body": {"kernel_id": "{kernel}"}}, 409, "cannot be read"),
        magic=("%checkpoint restore {b}", "cannot be read: Not a directory"),
        damage=_blobs_made_a_file,
    ),
    Bad(
        "a store whose blob directory cannot be listed",
        cli=(("gc",), 3, "in the checkpoint store: Not a directory"),
        magic=("%checkpoint gc", "in the checkpoint store: Not a directory"),
        damage=_blobs_made_a_file,
    ),
    Bad(
        "a store others can write",
        cli=(("list",), 3, "it is not used until you run: chmod go-w"),
        damage=_open_to_others,
    ),
    Bad(
        "a store of a newer format",
        cli=(("list",), 4, "newer jupyter-ckpt"),
        damage=_newer_format,
    ),
    Bad("no store at the path", cli=(("--store", "{absent}", "list"), 1, "no checkpoint store at")),
    Bad("a file as the store", cli=(("--store", "/dev/null", "list"), 1, "no checkpoint store at /dev/null")),
    Bad("an export nowhere", cli=(("export", "{a}", "{absent}/state.pkl"), 1, "cannot write")),
    Bad("an export onto a directory", cli=(("export", "{a}", "{dir}"), 1, "cannot write")),
    Bad("an export to no file", cli=(("export", "{a}", ""), 1, "export needs a FILE to write the checkpoint to")),
]


def on_disk(root: Path) -> dict[str, Any]:
    """Every file and directory of the store with its mode and content, and the catalog's rows."""
    seen: dict[str, Any] = {}
    for path in [root, *sorted(root.rglob("*"))]:
        if path.name.startswith("catalog.sqlite"):
            continue  # its rows below: SQLite may fold its journal in on any read
        info = os.stat(path)
        content = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        seen[str(path.relative_to(root))] = (oct(info.st_mode), content)
    db = sqlite3.connect(f"file:{root / 'catalog.sqlite'}?mode=ro", uri=True)
    seen["catalog"] = list(db.iterdump())
    db.close()
    return seen


async def test_bad_input_gets_one_clear_line_everywhere_and_changes_nothing(
    notebook: Any, api: Any, ckpt_app: Any, tmp_path: Path
) -> None:
    nb = await notebook("bad.ipynb")
    # %load_ext: the server may not have loaded it yet. No cell adds to the timeline, only these saves.
    await nb.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt")
    a, b, _ = [await nb.value(f"(n := {n}, jupyter_ckpt.save())[1]") for n in (1, 2, 3)]
    await nb.ok(f"%checkpoint wait\n%checkpoint tag {a} -t start")
    root = ckpt_app.store.root
    absent, directory = tmp_path / "absent", tmp_path
    ids = {"a": a, "b": b, "manifest": ckpt_app.store.manifest(b)}
    session = ckpt_app.service.session_keys("bad.ipynb")[1]
    fill = {
        "a": a,
        "b": b,
        "absent": absent,
        "dir": directory,
        "kernel": nb.kernel_id,
        "session": session,
        "store": root,
    }

    for row in ROWS:
        undo = row.damage(root, ids) if row.damage else None
        before = on_disk(root)
        if row.cli:
            args, code, message = row.cli
            message = message.format(**fill)
            r = cli(*(arg.format(**fill) for arg in args))
            assert r.returncode == code and message in r.stderr + r.stdout, (row.what, r)
            assert r.stderr.count("\n") == 1 and r.stderr.startswith("jupyter ckpt: error: "), (row.what, r.stderr)
        if row.rest:
            method, path, kwargs, status, message = row.rest
            message = message.format(**fill)
            if isinstance(kwargs.get("body"), dict):
                kwargs = {**kwargs, "body": {k: v.format(**fill) for k, v in kwargs["body"].items()}}
            got = await api.error(method, "api", "ckpt", *path.format(**fill).split("/"), **kwargs)
            assert got[0] == status and message in got[1], (row.what, got)
        if row.magic:
            line, message = row.magic
            message = message.format(**fill)
            result = await nb.run(line.format(**fill))
            assert result.stderr.startswith("UsageError: ") and message in result.stderr, (row.what, result)
            assert result.stderr.count("\n") == 1, (row.what, result)
        after = on_disk(root)
        assert {k: v for k, v in after.items() if k != "catalog"} == {k: v for k, v in before.items() if k != "catalog"}
        changed = set(after["catalog"]) ^ set(before["catalog"])
        # The execution history records every cell the user ran, a failed %checkpoint line too.
        assert {r for r in changed if not r.startswith('INSERT INTO "cells"')} == set(), row.what
        assert len(changed) == (1 if row.magic else 0), row.what
        assert not absent.exists(), row.what
        if undo:
            undo()
    assert await nb.value("n") == 3  # no failed restore touched the namespace


def test_exclude_include_and_delete_say_what_they_did_with_a_name_they_did_not_expect(kernels: Any) -> None:
    """``exclude`` of a name not defined (a typo?) and ``include`` of one never excluded said nothing of it, and
    ``delete`` of a savepoint did not say that it was one."""
    k = kernels()
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nx = 1")
    assert k.ok("%checkpoint exclude x tpyo").splitlines() == [
        "excluded: tpyo, x",
        "not defined now: tpyo (kept out of checkpoints once defined)",
    ]
    assert k.ok("%checkpoint include x typo").splitlines() == [
        "excluded: tpyo",
        "not excluded before: typo (nothing changed for it)",
    ]
    cid = k.value("__import__('jupyter_ckpt').save(tag='keep')")
    assert k.ok("%checkpoint delete keep").strip() == (
        f"kernel checkpoint (id {cid}) tagged 'keep' deleted (its data goes at the next gc)"
    )


def test_the_python_api_refuses_a_message_too_long_and_a_tag_that_is_no_text(kernels: Any) -> None:
    """``save(message=...)`` took a message of any length (2 MB was stored and listed, as over REST and from the
    magic, whose rows are above); one of the limit's length is kept whole. A tag that is no text was refused as
    one that "needs at least one character that is not a space"."""
    k = kernels()
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt\nx = 1")
    refused = k.run("jupyter_ckpt.save(message='m' * 2_000_000)")
    assert refused.error == "BadArgument: a message has at most 4096 characters, not 2000000", refused
    assert k.run("jupyter_ckpt.save(tag=5)").error == "BadArgument: a tag must be text, not int"
    assert k.value("len(jupyter_ckpt.list())") == 0
    k.ok("jupyter_ckpt.save(message='line\\n' * 819 + 'x')")  # 4096 characters, over several lines
    assert k.run("jupyter_ckpt.tag('latest', 2.5)").error == "BadArgument: a tag must be text, not float"
    assert k.value("[(len(r.message), r.tag) for r in jupyter_ckpt.list()]") == [(4096, None)]


def test_the_magic_takes_refs_and_names_after_its_options_too(kernels: Any) -> None:
    """``%checkpoint tag -t best 1`` and ``restore --only x start`` were refused ("unrecognized arguments: 1"):
    the REF had to come before the options."""
    k = kernels()
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto off\nimport jupyter_ckpt\nx, y = 1, 2")
    first = k.value("jupyter_ckpt.save()")
    k.ok("x, y = 3, 4")
    assert k.ok(f"%checkpoint tag -t start {first}").strip() == f"kernel checkpoint #1 (id {first}) tagged 'start'"
    assert "restored kernel checkpoint #1" in k.ok("%checkpoint restore --only x start")
    assert k.value("(x, y)") == (1, 4)
    # The start, and the state the restore replaced in part (x = 3), kept on the timeline first.
    assert k.value("[(r.trigger, r.changed) for r in jupyter_ckpt.list()]") == [
        ("manual", ["jupyter_ckpt", "x", "y"]),
        ("cell", ["x", "y"]),
    ]


def test_a_store_path_that_is_a_file_is_named_as_one(kernels: Any, tmp_path: Path) -> None:
    """``%load_ext`` with the store's path (or a folder on it) a file said "File exists" or "Not a directory"."""
    file = tmp_path / "notes.txt"
    file.write_text("mine")
    for store, said in [(file, "it is a file"), (file / "store", f"{file} is a file")]:
        k = kernels(JUPYTER_CKPT_DIR=str(store))
        loaded = k.run("%load_ext jupyter_ckpt")
        assert loaded.error == f"BadArgument: cannot keep checkpoints in {store}: {said}, not a directory", loaded
    assert file.read_text() == "mine"


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        ("not json", "the automatic policy remembered for this notebook is damaged"),
        ("[1]", "the automatic policy remembered for this notebook is damaged"),
        ('{"auto": true, "every": "x"}', "the automatic policy remembered for this notebook is damaged"),
        ('{"auto": false, "every": null, "interval": null, "exclude": [], "later": 1}', None),
    ],
)
def test_a_remembered_policy_damaged_or_from_a_newer_version_lets_the_extension_load(
    kernels: Any, policy: str, said: str | None
) -> None:
    """The policy a notebook's session remembers is a row of the catalog. One changed by hand, or one a newer
    version wrote with a field this one lacks, made ``%load_ext jupyter_ckpt`` end in a TypeError or a
    JSONDecodeError: no checkpoint was taken in that notebook. A damaged one is said in one line and the default
    policy applies; one with more fields keeps those it knows."""
    k = kernels("policy.ipynb")
    k.ok("%load_ext jupyter_ckpt\n%checkpoint auto on --every 2\nx = 1\n%checkpoint wait")
    k.close()
    with sqlite3.connect(Path(os.environ["JUPYTER_CKPT_DIR"]) / "catalog.sqlite", isolation_level=None) as db:
        db.execute("UPDATE sessions SET policy=?", (policy,))
    fresh = kernels("policy.ipynb")
    loaded = fresh.run("%load_ext jupyter_ckpt")
    assert loaded.error is None, loaded
    status = fresh.ok("%checkpoint status")
    if said is None:
        assert "policy: off" in status and "damaged" not in loaded.stderr
    else:
        assert said in loaded.stderr and loaded.stderr.count(said) == 1, loaded
        assert "policy: after every cell, within the overhead budget" in status, status
