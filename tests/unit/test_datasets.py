"""materialize: a job's data folder, generated once, atomically, and given up to a process that got there first."""

from __future__ import annotations

import stat

import pytest

from adlrec.datasets import materialize


def test_a_folder_is_generated_once_beside_its_place_and_then_used_as_it_is(tmp_path):
    made: list = []
    first = materialize(tmp_path / "data", lambda tmp: (made.append(tmp), (tmp / "x.bin").write_bytes(b"x")))
    again = materialize(tmp_path / "data", lambda tmp: made.append(tmp))
    assert first == again == tmp_path / "data" and len(made) == 1  # generated once, not at every run
    assert made[0].parent == tmp_path  # beside the folder, on its mount: the rename into place is atomic
    assert [p.name for p in tmp_path.iterdir()] == ["data"]


def test_a_generated_folder_is_readable_by_others_sharing_the_data_dir(tmp_path):
    """The temporary folder is made private (0700); the dataset it becomes is not."""
    folder = materialize(tmp_path / "data", lambda tmp: (tmp / "x.bin").write_bytes(b"x"))
    assert stat.S_IMODE(folder.stat().st_mode) == 0o755


def test_a_process_that_lost_the_race_uses_the_winners_folder_and_leaves_no_copy(tmp_path):
    final = tmp_path / "data"

    def generate(tmp):
        (tmp / "mine.bin").write_bytes(b"mine")
        final.mkdir()  # another process renamed its copy into place meanwhile
        (final / "theirs.bin").write_bytes(b"theirs")

    assert materialize(final, generate) == final
    assert [p.name for p in tmp_path.iterdir()] == ["data"] and [p.name for p in final.iterdir()] == ["theirs.bin"]


def test_a_generation_that_fails_is_raised_and_leaves_nothing(tmp_path):
    def generate(tmp):
        (tmp / "half.bin").write_bytes(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left on device"):
        materialize(tmp_path / "data", generate)
    assert list(tmp_path.iterdir()) == []
