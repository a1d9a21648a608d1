"""undone_on_failure: what a failing block added to a folder goes; what was there, or what another
process added while the block waited for the folder's lock, stays."""

from __future__ import annotations

import threading
import time

import pytest

from adlrec.folders import undone_on_failure


def test_a_failing_block_leaves_the_folder_as_it_was(tmp_path):
    (tmp_path / "old").mkdir()
    (tmp_path / "old.bin").write_bytes(b"kept")
    with pytest.raises(RuntimeError), undone_on_failure(tmp_path):
        (tmp_path / "new").mkdir()
        (tmp_path / "new" / "part").write_bytes(b"half")
        (tmp_path / "new.bin").write_bytes(b"half")
        (tmp_path / "link").symlink_to(tmp_path / "old")
        raise RuntimeError("build failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old", "old.bin"]
    with undone_on_failure(tmp_path):  # a block that ends well keeps what it made
        (tmp_path / "made").write_bytes(b"whole")
    assert (tmp_path / "made").exists()
    with pytest.raises(RuntimeError), undone_on_failure(tmp_path / "missing"):
        raise RuntimeError("nothing to watch")


def test_a_block_waits_for_one_building_in_the_same_folder_and_keeps_what_it_built(tmp_path, capsys):
    """Without the lock, the second block saw the first one's new file as its own, and removed it."""
    entered, release = threading.Event(), threading.Event()

    def first() -> None:
        with undone_on_failure(tmp_path):
            entered.set()
            release.wait(60)
            (tmp_path / "first.bin").write_bytes(b"whole")

    def second() -> None:
        with pytest.raises(RuntimeError), undone_on_failure(tmp_path):
            (tmp_path / "second.bin").write_bytes(b"half")
            raise RuntimeError("build failed")

    a = threading.Thread(target=first)
    a.start()
    assert entered.wait(60)
    b = threading.Thread(target=second)
    b.start()
    time.sleep(0.5)  # the second block is waiting for the lock now (without it, it would have run)
    release.set()
    a.join(60)
    b.join(60)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.bin"]
    assert capsys.readouterr().err == f"adlrec: waiting for another process that is generating data in {tmp_path}\n"
