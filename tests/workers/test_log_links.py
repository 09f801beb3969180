"""Seat logs are written and quoted by the worker as itself, often root, in folders an operator names, and `--logs
logs/` in a stranger's bot folder is the documented habit: a review's bot folder held links named as its seat
logs, and the checker appended the bot's output to files of the bot's choice, created others, and quoted root's
files and its own environment, the admin token in it, into its report (helper-87). No link is followed."""

from __future__ import annotations

from pathlib import Path

import pytest

from workers import launcher
from workers.checks import output_tail
from workers.logs import LogFolderError, own_log_folder


def test_a_logs_folder_through_a_link_is_refused_and_a_plain_one_is_made(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "bot").mkdir()
    (tmp_path / "bot" / "logs").symlink_to(elsewhere)
    with pytest.raises(LogFolderError, match="goes through a link"):
        own_log_folder(tmp_path / "bot" / "logs")
    with pytest.raises(LogFolderError):
        own_log_folder(tmp_path / "bot" / "logs" / "persistent")  # a link further up counts too
    made = own_log_folder(tmp_path / "bot" / "plain" / "persistent")
    assert made.is_dir() and made == tmp_path / "bot" / "plain" / "persistent"


def test_a_seat_log_named_by_a_link_is_not_written_through_it(tmp_path: Path) -> None:
    target = tmp_path / "root_owned.sh"
    target.write_text("# root's file\n")
    link = tmp_path / "01-defaults-seat0-bot.log"
    link.symlink_to(target)
    log = launcher._CappedLog(link, 1000)
    log.write(b"ssh-ed25519 AAAA attacker@evil\n")
    log.close()
    assert target.read_text() == "# root's file\n", "the bot's output went through the link"
    missing = tmp_path / "created_by_the_link"
    (tmp_path / "01-defaults-seat2-bot.log").symlink_to(missing)
    log = launcher._CappedLog(tmp_path / "01-defaults-seat2-bot.log", 1000)
    log.write(b"anything\n")
    log.close()
    assert not missing.exists(), "a file of the bot's choosing was created through the link"


def test_a_seat_log_named_by_a_link_is_not_quoted(tmp_path: Path) -> None:
    secret = tmp_path / "shadow"
    secret.write_text("root:$y$j9T$HASH:19000:0:99999:7:::\n")
    link = tmp_path / "01-defaults-seat0-bot.log"
    link.symlink_to(secret)
    assert output_tail(link) == (), "a report quoted the file a link named"
    plain = tmp_path / "01-defaults-seat2-bot.log"
    plain.write_text("Traceback (most recent call last):\nValueError: the bot's own error\n")
    assert any("the bot's own error" in line for line in output_tail(plain)), "the worker's own logs are quoted"
