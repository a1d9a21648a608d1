import os
import shutil
import subprocess

import pytest

from adlrec.profile.fetch import FetchCost, _evict, _read_all, measure_fetch, spread


def twenty_files_of_10_kb(folder):
    for i in range(20):
        (folder / f"{i}.bin").write_bytes(b"x" * 10_000)
    return [folder / f"{i}.bin" for i in range(20)]


def test_spread_keeps_order_and_reaches_the_end():
    items = list(range(10))
    assert spread(items, 20) == items
    assert spread(items, 5) == [0, 2, 4, 6, 8]


def test_fetch_reads_real_files_and_scales_to_samples(tmp_path):
    files = twenty_files_of_10_kb(tmp_path)
    cost = measure_fetch(files, samples=40, max_files=8)
    assert cost.bytes_per_sample == 20 * 10_000 / 40
    assert cost.cold_s > 0 and cost.cached_s > 0
    assert "posix_fadvise" in cost.method


def test_fetch_without_files_says_why():
    cost = measure_fetch([], samples=10)
    assert (cost.cold_s, cost.cached_s) == (0.0, 0.0)
    assert cost.method.startswith("not measured: model.py defines no raw_files")


def test_fetch_with_a_missing_file_says_which(tmp_path):
    cost = measure_fetch([tmp_path / "gone.bin"], samples=1)
    assert "raw file not found" in cost.method and "gone.bin" in cost.method


def test_fetch_with_a_directory_says_it_is_not_a_file(tmp_path):
    cost = measure_fetch([tmp_path], samples=1)
    assert cost.method == f"not measured: raw file is a directory, not a file: {tmp_path}"


def test_read_times_scale_from_the_files_read_to_one_sample_of_the_whole_dataset(tmp_path):
    files = twenty_files_of_10_kb(tmp_path)
    ticks = iter([0.0, 2.0, 2.0, 2.5])  # the cold read takes 2 s, the cached one 0.5 s
    cost = measure_fetch(files, samples=40, max_files=8, clock=lambda: next(ticks))
    # 8 of the 20 files read (80 kB of 200 kB): the dataset takes 2.5 times as long, over 40 samples
    assert cost.cold_s == pytest.approx(2.0 * 2.5 / 40)  # 0.125 s per sample
    assert cost.cached_s == pytest.approx(0.5 * 2.5 / 40)
    assert cost.extra_s == pytest.approx(1.5 * 2.5 / 40)


def test_a_cold_read_measured_faster_than_cached_adds_no_negative_fetch_cost():
    """Noise can make the cold read the faster one; decompose refuses a negative fetch cost."""
    assert FetchCost(cold_s=1e-5, cached_s=2e-5, bytes_per_sample=100.0, method="m").extra_s == 0.0


def test_fetch_of_empty_files_says_so(tmp_path):
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for f in files:
        f.write_bytes(b"")
    assert measure_fetch(files, samples=2) == FetchCost(0.0, 0.0, 0.0, "not measured: raw files are empty")


def test_empty_files_among_others_are_not_all_that_is_read(tmp_path):
    # every other file empty, and two picked of four: the pick was the two empty ones, "raw files are empty"
    files = [tmp_path / f"{i}.bin" for i in range(4)]
    for i, f in enumerate(files):
        f.write_bytes(b"x" * 10240 * (i % 2))
    cost = measure_fetch(files, samples=4, max_files=2)
    assert not cost.method.startswith("not measured"), cost.method
    assert cost.bytes_per_sample == 20480 / 4 and cost.cold_s > 0


def test_a_missing_file_anywhere_in_the_list_is_named_not_only_the_first(tmp_path):
    files = twenty_files_of_10_kb(tmp_path)
    files[7].unlink()
    cost = measure_fetch(files, samples=20, max_files=4)  # 7 is not among the 4 read: still named
    assert cost.method == f"not measured: raw file not found: {files[7]}"


def _resident_bytes(path) -> int:
    out = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(path)], capture_output=True)
    return int(out.stdout)


@pytest.mark.skipif(shutil.which("fincore") is None, reason="fincore (util-linux) shows the page cache")
def test_the_cold_read_starts_from_files_out_of_the_page_cache_and_reads_them_whole(tmp_path):
    """A file just written is in the page cache, dirty; eviction flushes and drops it, a read brings all of it back."""
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for f in files:
        f.write_bytes(os.urandom(3 * 2**20))  # three of _read_all's 1 MiB chunks
    assert all(_resident_bytes(f) > 0 for f in files)
    assert _evict(files) == "posix_fadvise(DONTNEED) per file"
    assert [_resident_bytes(f) for f in files] == [0, 0]
    _read_all(files)
    assert [_resident_bytes(f) for f in files] == [3 * 2**20] * 2


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="/proc/self/io counts the bytes a process reads")
def test_the_sampled_files_are_read_twice_once_cold_once_cached(tmp_path):
    # rchar: bytes this process read through read(2); reading the files twice is what both figures rest on
    files = twenty_files_of_10_kb(tmp_path)

    def read_bytes() -> int:
        return int(dict(line.split(": ") for line in open("/proc/self/io").read().splitlines())["rchar"])

    before = read_bytes()
    measure_fetch(files, samples=20)
    read = read_bytes() - before
    assert 2 * 200_000 <= read < 3 * 200_000
