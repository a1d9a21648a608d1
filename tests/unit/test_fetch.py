import pytest

from adlrec.profile.fetch import FetchCost, measure_fetch, spread


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
