"""Bots: hosted programs versioned by content, remote bots with a hashed token, removal while needed."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from referee.service.lobby import token_sha256 as lobby_token_sha256
from tests.db.factories import COMMAND, add_bots, bot_folder, finish, make_league
from workers.db import repo
from workers.db.errors import Conflict, InvalidInput, NotFound
from workers.db.models import LeagueStatus
from workers.db.repo import bots
from workers.db.session import session_scope

PROJECT = Path(__file__).resolve().parents[2]


def test_adding_a_bot_creates_it_with_version_1(engine: Engine, tmp_path: Path) -> None:
    folder = bot_folder(tmp_path, "alpha")
    with session_scope(engine) as session:
        version = repo.add_bot(session, "alpha", command=COMMAND, folder=folder, language="python")
    assert version.number == 1
    assert version.command == COMMAND
    assert version.folder == str(folder.resolve())
    assert version.content_hash == repo.content_hash(COMMAND, folder)
    with session_scope(engine) as session:
        info = repo.get_bot(session, "alpha")
    assert info.bot.language == "python"
    assert not info.bot.remote
    assert info.current == version
    assert info.bot.created_at.utcoffset() is not None


def test_adding_the_same_program_again_keeps_the_version(engine: Engine, tmp_path: Path) -> None:
    folder = bot_folder(tmp_path, "alpha")
    with session_scope(engine) as session:
        first = repo.add_bot(session, "alpha", command=COMMAND, folder=folder, language="python")
    with session_scope(engine) as session:
        again = repo.add_bot(session, "alpha", command=COMMAND, folder=folder, language="python")
        assert [v.number for v in repo.get_bot(session, "alpha").versions] == [1]
    assert again.id == first.id


def test_a_changed_command_is_a_new_version(engine: Engine, tmp_path: Path) -> None:
    folder = bot_folder(tmp_path, "alpha")
    with session_scope(engine) as session:
        repo.add_bot(session, "alpha", command=COMMAND, folder=folder, language="python")
        second = repo.add_bot(session, "alpha", command=[*COMMAND, "--bold"], folder=folder, language="python")
    assert second.number == 2


def test_content_hash_covers_file_contents_and_names_but_not_caches(tmp_path: Path) -> None:
    folder = bot_folder(tmp_path, "alpha")
    original = repo.content_hash(COMMAND, folder)
    assert repo.content_hash(COMMAND, folder) == original

    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "bot.cpython-311.pyc").write_bytes(b"\x00compiled")
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    assert repo.content_hash(COMMAND, folder) == original

    (folder / "helpers.py").rename(folder / "helpers2.py")
    assert repo.content_hash(COMMAND, folder) != original
    (folder / "helpers2.py").rename(folder / "helpers.py")
    (folder / "data").mkdir()
    (folder / "data" / "book.txt").write_text("opening book\n")
    assert repo.content_hash(COMMAND, folder) != original


def test_content_hash_reads_files_and_counts_links_by_where_they_point_but_never_enters_a_linked_folder(
    tmp_path: Path,
) -> None:
    """What the hash reads, as `os.walk` finds it: nested files, a link to a file by its bytes (out of the folder,
    where it points too: the sandbox may show that file, a program's is bound in), a linked folder or a broken
    link by where it points only (never entered: it could be anything on the host), never a fifo or the caches.
    A review repointed a linked folder within the bot's and the hash did not move (stop 39)."""
    folder = bot_folder(tmp_path, "alpha")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not the bot's\n")
    (folder / "lib" / "deep").mkdir(parents=True)
    (folder / "lib" / "deep" / "table.txt").write_text("rows\n")
    (folder / "lib" / "v2").mkdir()
    (folder / "linked.txt").symlink_to(outside / "secret.txt")
    (folder / "linked_folder").symlink_to(outside)
    (folder / "current").symlink_to("lib/deep")
    (folder / "broken").symlink_to(tmp_path / "nowhere")
    os.mkfifo(folder / "pipe")
    (folder / "lib" / "__pycache__").mkdir()
    (folder / "lib" / "__pycache__" / "x.pyc").write_bytes(b"\x00")
    files = {relative: (link, content) for relative, _, link, content in bots._bot_files(folder)}
    assert files["lib/deep/table.txt"] == (None, True)
    assert files["linked.txt"] == (str(outside / "secret.txt"), True)
    assert files["linked_folder"] == (str(outside), False) and files["current"] == ("lib/deep", False)
    assert files["broken"] == (str(tmp_path / "nowhere"), False)
    assert not [name for name in files if name.startswith(("pipe", "lib/__pycache__", "linked_folder/"))]
    assert list(files) == sorted(files)
    before = repo.content_hash(COMMAND, folder)
    (outside / "secret.txt").write_text("changed out of the folder\n")
    assert repo.content_hash(COMMAND, folder) != before, "a linked file's bytes are the bot's"
    after = repo.content_hash(COMMAND, folder)
    (outside / "other.txt").write_text("beside it, in the linked folder\n")
    assert repo.content_hash(COMMAND, folder) == after, "a linked folder is not read"
    (folder / "current").unlink()
    (folder / "current").symlink_to("lib/v2")
    assert repo.content_hash(COMMAND, folder) != after, "a linked folder pointed elsewhere is another version"


RENAMED_HASH = f"""
import ctypes, sys
from pathlib import Path
from workers.db import repo
ctypes.CDLL(None).prctl(15, b"another-name", 0, 0, 0)
print(Path("/proc/self/comm").read_text().strip())
print(repo.content_hash({list(COMMAND)!r}, sys.argv[1]))
"""
"""`repo.content_hash` of a folder in a process named otherwise."""


def test_a_link_in_the_folder_counts_by_its_bytes_and_a_link_out_of_it_reads_the_same_in_every_process(
    tmp_path: Path,
) -> None:
    """A review linked its bot's `comm.txt` to /proc/self/comm: `mus bot add` read "mus", the league's worker
    "python", and every match of the bot was refused as changed since it was added, charged to nobody (stop 39).
    A link within the folder still counts by the bytes it shows."""
    folder = bot_folder(tmp_path, "alpha")
    (folder / "comm.txt").symlink_to("/proc/self/comm")
    (folder / "out.txt").symlink_to("/proc/self/fd/1")  # a file to one process, a pipe to another (a review's)
    (folder / "self").symlink_to("/proc/self")
    (folder / "through.txt").symlink_to("self/comm")  # through a linked folder
    (folder / "book.txt").write_text("opening book\n")
    (folder / "same_book.txt").symlink_to(folder / "book.txt")
    renamed = subprocess.run(  # another name (PR_SET_NAME) and its stdout a pipe, as a worker beside `mus bot add`
        [sys.executable, "-c", RENAMED_HASH, str(folder)], capture_output=True, text=True, check=True, cwd=PROJECT
    )
    with (tmp_path / "stdout.txt").open("w") as stdout:  # and this one's stdout a file
        subprocess.run([sys.executable, "-c", RENAMED_HASH, str(folder)], stdout=stdout, check=True, cwd=PROJECT)
    assert renamed.stdout.splitlines() == ["another-name", repo.content_hash(COMMAND, folder)]
    assert (tmp_path / "stdout.txt").read_text() == renamed.stdout
    before = repo.content_hash(COMMAND, folder)
    (folder / "book.txt").write_text("another book\n")
    assert repo.content_hash(COMMAND, folder) != before


def test_content_hash_does_not_depend_on_where_the_folder_is(tmp_path: Path) -> None:
    here = bot_folder(tmp_path / "here", "alpha")
    there = bot_folder(tmp_path / "there", "alpha")
    assert repo.content_hash(COMMAND, here) == repo.content_hash(COMMAND, there)


def test_the_current_content_hash_reads_a_folder_again_only_when_a_file_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker checks a hosted bot's folder before every match; it reads the files again only when one of them
    changed since, even if the change kept the file's size and modification time (its change time moves)."""
    folder = bot_folder(tmp_path, "alpha")
    monkeypatch.setattr(bots, "RACY_S", 0.0)  # the files were just written: no need to wait out the racy window
    reads: list[Path] = []
    content_hash = bots.content_hash

    def counted(command: Sequence[str], where: str | Path | None) -> str:
        reads.append(Path(str(where)))
        return content_hash(command, where)

    monkeypatch.setattr(bots, "content_hash", counted)
    original = repo.content_hash(COMMAND, folder)
    assert repo.current_content_hash(COMMAND, folder) == original
    assert repo.current_content_hash(COMMAND, folder) == original
    assert len(reads) == 1, "the second check reads no file"
    assert repo.current_content_hash([*COMMAND, "--bold"], folder) != original, "the command is part of the key"

    helper = folder / "helpers.py"
    times = helper.stat()
    helper.write_text(helper.read_text().replace("0", "1"))  # same size
    os.utime(helper, ns=(times.st_atime_ns, times.st_mtime_ns))  # same modification time
    changed = repo.current_content_hash(COMMAND, folder)
    assert changed != original and changed == repo.content_hash(COMMAND, folder)
    (folder / "data").mkdir()
    (folder / "data" / "book.txt").write_text("opening book\n")
    assert repo.current_content_hash(COMMAND, folder) == repo.content_hash(COMMAND, folder) != changed


def test_a_folder_changed_just_before_its_check_is_read_again_at_the_next(tmp_path: Path) -> None:
    """Within RACY_S of a change the file system's clock may not have moved on (git's racily clean files): such a
    folder's hash is not kept."""
    folder = bot_folder(tmp_path, "alpha")
    key = (tuple(COMMAND), str(folder.resolve()))
    first = repo.current_content_hash(COMMAND, folder)
    assert key not in bots._HASHED
    assert repo.current_content_hash(COMMAND, folder) == first
    assert key not in bots._HASHED


def test_a_missing_folder_is_reported(tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="not a directory"):
        repo.content_hash(COMMAND, tmp_path / "nowhere")


@pytest.mark.parametrize("name", ["", "has space", "-dash-first", "x" * 65, "semi;colon", "bot@2"])
def test_invalid_bot_names_are_refused(engine: Engine, tmp_path: Path, name: str) -> None:
    with session_scope(engine) as session, pytest.raises(InvalidInput, match="invalid bot name"):
        repo.add_bot(session, name, command=COMMAND, folder=None, language="python")


def test_a_command_must_be_a_list_of_strings(engine: Engine) -> None:
    with session_scope(engine) as session, pytest.raises(InvalidInput, match="list of strings"):
        repo.add_bot(session, "alpha", command="python bot.py", folder=None, language="python")


def test_remote_bot_token_is_stored_only_as_its_sha256(engine: Engine) -> None:
    with session_scope(engine) as session:
        token = repo.add_remote_bot(session, "faraway")
    assert len(token) >= 32
    with engine.connect() as connection:
        stored = [
            str(value)
            for table in ("bot", "bot_version")
            for row in connection.execute(sa.text(f"SELECT * FROM {table}"))
            for value in row
        ]
    assert not any(token in value for value in stored)
    digest = hashlib.sha256(token.encode()).hexdigest()
    assert digest in stored
    assert repo.token_sha256(token) == lobby_token_sha256(token) == digest
    with session_scope(engine) as session:
        found = repo.remote_bot_for_token(session, token)
        assert found is not None and found.name == "faraway" and found.remote
        assert repo.remote_bot_for_token(session, token + "x") is None
        assert repo.get_bot(session, "faraway").current is not None


def test_rotating_a_remote_token_retires_the_old_one(engine: Engine) -> None:
    with session_scope(engine) as session:
        old = repo.add_remote_bot(session, "faraway")
    with session_scope(engine) as session:
        new = repo.rotate_remote_token(session, "faraway")
    with session_scope(engine) as session:
        assert repo.remote_bot_for_token(session, old) is None
        assert repo.remote_bot_for_token(session, new) is not None


def test_hosted_and_remote_bots_do_not_share_names(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha")
        repo.add_remote_bot(session, "faraway")
    with session_scope(engine) as session, pytest.raises(Conflict, match="already exists"):
        repo.add_remote_bot(session, "alpha")
    with session_scope(engine) as session, pytest.raises(Conflict, match="remote"):
        repo.add_bot(session, "faraway", command=COMMAND, folder=None, language="python")


def test_listing_shows_active_bots_by_name(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "charlie", "alpha", "bravo")
        repo.remove_bot(session, "bravo")
    with session_scope(engine) as session:
        assert [info.bot.name for info in repo.list_bots(session)] == ["alpha", "charlie"]
        assert [info.bot.name for info in repo.list_bots(session, include_removed=True)] == [
            "alpha",
            "bravo",
            "charlie",
        ]
        with pytest.raises(NotFound, match="no bot named 'delta'"):
            repo.get_bot(session, "delta")


def test_a_cancelled_league_frees_its_bots(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        make_league(session, "stuck", ["alpha", "bravo"])
    with session_scope(engine) as session:
        repo.cancel_league(session, "stuck")
    with session_scope(engine) as session:
        assert repo.remove_bot(session, "alpha").removed_at is not None


def test_removing_a_bot_is_refused_while_an_unfinished_league_needs_it(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha", "bravo")
        league = make_league(session, "spring", ["alpha", "bravo"])
        league_id = league.id
    assert league_id is not None

    with session_scope(engine) as session, pytest.raises(Conflict, match="spring"):
        repo.remove_bot(session, "alpha")  # created, not started

    with session_scope(engine) as session:
        repo.start_league(session, league_id)
    with session_scope(engine) as session, pytest.raises(Conflict, match="still needed"):
        repo.remove_bot(session, "alpha")  # running

    with session_scope(engine) as session:
        repo.pause_league(session, league_id)
    with session_scope(engine) as session, pytest.raises(Conflict, match="still needed"):
        repo.remove_bot(session, "alpha")  # paused: `mus league run` resumes it

    with session_scope(engine) as session:
        repo.start_league(session, league_id)
    with session_scope(engine) as session:
        for match_id in repo.unfinished_match_ids(session, league_id):
            assert finish(session, match_id)
        assert repo.finish_league_if_complete(session, league_id)
        assert repo.get_league(session, league_id).status is LeagueStatus.FINISHED
    with session_scope(engine) as session:
        removed = repo.remove_bot(session, "alpha")
    assert removed.removed_at is not None
    with session_scope(engine) as session:
        assert len(repo.league_results(session, league_id)) == 2  # its results stay
        with pytest.raises(NotFound, match="alpha"):
            make_league(session, "summer", ["alpha", "bravo"])


def test_removing_a_remote_bot_revokes_its_token(engine: Engine) -> None:
    with session_scope(engine) as session:
        token = repo.add_remote_bot(session, "faraway")
        repo.remove_bot(session, "faraway")
    with session_scope(engine) as session:
        assert repo.remote_bot_for_token(session, token) is None


def test_re_adding_a_removed_bot_restores_it(engine: Engine, tmp_path: Path) -> None:
    with session_scope(engine) as session:
        add_bots(session, tmp_path, "alpha")
        repo.remove_bot(session, "alpha")
    with session_scope(engine) as session:
        version = repo.add_bot(session, "alpha", command=COMMAND, folder=tmp_path / "alpha", language="python")
        assert version.number == 1
        assert repo.get_bot(session, "alpha").bot.removed_at is None


def test_content_hash_is_the_framed_digest_of_each_file_read_by_chunks(tmp_path: Path) -> None:
    """The registered versions' hashes stay valid: each file is framed by its path and length, then its bytes, and
    a file is read a chunk at a time, so one larger than the chunk gives the same digest as one read whole."""
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "bot.py").write_text("print('paso')\n")
    (folder / "weights.bin").write_bytes(bytes(range(256)) * 20_000)  # 5 MB: five chunks and a part
    expected = hashlib.sha256(b"mus-arena/bot-content/v1\0")
    expected.update(json.dumps(list(COMMAND), ensure_ascii=False).encode() + b"\0")
    for name in ("bot.py", "weights.bin"):
        data = (folder / name).read_bytes()
        expected.update(f"{name}\0{len(data)}\0".encode() + data)
    assert repo.content_hash(COMMAND, folder) == expected.hexdigest()


def test_hashing_a_file_larger_than_the_memory_left_works(tmp_path: Path) -> None:
    """A review's bot folder held a 3 GiB sparse file: `mus bot add`, and a worker before each match, took its size in
    memory to hash it, and died of it (helper-87). Hashed here with 256 MiB of data segment left for a 512 MiB file."""
    folder = tmp_path / "bot"
    folder.mkdir()
    (folder / "bot.py").write_text("print('paso')\n")
    with (folder / "huge.bin").open("wb") as huge:
        huge.truncate(512 * 1024 * 1024)
    script = (
        "import resource, sys\n"
        "from workers.db import repo\n"
        "limit = 256 * 1024 * 1024 + resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024\n"
        "resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))\n"
        f"print(repo.content_hash(('python', 'bot.py'), {str(folder)!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and len(done.stdout.strip()) == 64, done.stderr[-2000:]
