from adlrec.profile.fetch import measure_fetch, spread


def test_spread_keeps_order_and_reaches_the_end():
    items = list(range(10))
    assert spread(items, 20) == items
    assert spread(items, 5) == [0, 2, 4, 6, 8]


def test_fetch_reads_real_files_and_scales_to_samples(tmp_path):
    files = []
    for i in range(20):
        p = tmp_path / f"{i}.bin"
        p.write_bytes(b"x" * 10_000)
        files.append(p)
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
