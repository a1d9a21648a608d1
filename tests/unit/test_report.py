"""The profile's table as a user reads it."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from adlrec.profile.report import best_line, curve_csv, plot_curve, profile_table
from adlrec.schemas import DeviceSpec
from tests.factories import make_profile


def _text(profile) -> str:
    console = Console(width=200, record=True)
    console.print(profile_table(profile))
    return console.export_text()


def test_a_point_whose_error_could_not_be_estimated_shows_a_dash_not_inf():
    """A point with too few batches for an error (rse inf) read 'inf% !' (helper-44's review)."""
    profile = make_profile()
    first = dataclasses.replace(profile.points[0], rse=float("inf"), stable=False)
    text = _text(dataclasses.replace(profile, points=(first, *profile.points[1:])))
    assert "inf" not in text
    row = next(line for line in text.splitlines() if line.strip("│ ").startswith("0 "))
    assert "- !" in row
    assert "1.0%" in _text(profile)  # a finite error as before


def _distinct_profile():
    """Three points whose columns all differ, so a column that shows another field's value reads wrong."""
    profile = make_profile(throughputs=(10.0, 40.0, 30.0))  # best: 40 at 1 worker
    points = tuple(
        dataclasses.replace(
            p, prep_share=0.11 + p.workers / 100, fetch_share=0.33, wait_fraction=0.55, cpu_util=0.77, prep_rate=91.0
        )
        for p in profile.points
    )
    return dataclasses.replace(profile, points=points)


def _rows(text: str) -> dict[int, list[str]]:
    """The table's cells by worker count (the caption and title are left out)."""
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if len(cells) == 11 and cells[0].isdigit():
            rows[int(cells[0])] = cells
    return rows


def test_each_column_shows_its_own_field_and_of_best_is_relative_to_the_best_point():
    rows = _rows(_text(_distinct_profile()))
    # workers, samples/s, ±rse, of best, stall, prep, fetch*, wait, loader/s, cpu, MB/worker
    assert rows[0] == ["0", "10.0", "1.0%", "25%", "20%", "11%", "33%", "55%", "91.0", "77%", "-"]
    assert rows[1][3] == "100%"  # 40 / 40: the best, not the last point (30)
    assert rows[2][3] == "75%" and rows[2][5] == "13%"  # 30 / 40; prep share 0.13
    assert rows[1][10] == "10.0"  # workers' USS; in-process (0 workers) has none: "-"


def test_the_best_point_is_bold():
    table = profile_table(_distinct_profile())
    assert [row.style for row in table.rows] == [None, "bold", None]


def test_the_caption_names_both_ceilings_the_in_process_loader_and_an_emulated_step():
    profile = _distinct_profile()  # ceiling 25.0, in-process loader 12.0, emulate:5
    text = _text(profile)
    assert "ceiling 25.0 samples/s (no loader) · in-process loader 12.0 samples/s" in text
    assert "EMULATED: each training step is a 5 ms wait" in text
    # 1e-4 and 1e-5 s per sample, in ms (the caption as written, before the table wraps it)
    assert "fetch 0.100 ms/sample cold, 0.010 cached" in profile_table(profile).caption
    assert "\nTest CPU, 8 logical cores, 32 GB RAM, H200 (140 GB)" in text  # the caption is left-aligned
    again = dataclasses.replace(profile, baseline=dataclasses.replace(profile.baseline, ceiling_end=19.5))
    assert "ceiling 25.0 samples/s (no loader; 19.5 again after the sweep)" in _text(again)
    cpu = dataclasses.replace(profile, device=DeviceSpec("cpu"))
    assert "EMULATED" not in _text(cpu)


def test_the_csv_has_one_row_per_point_with_floats_to_six_significant_digits():
    profile = make_profile(throughputs=(1 / 3, 2.0))
    lines = curve_csv(profile).splitlines()
    assert lines[0].split(",")[:3] == ["workers", "throughput", "rse"]
    assert len(lines) == 3
    assert lines[1].split(",")[:2] == ["0", "0.333333"]  # 1/3 to 6 significant digits, not 0.3333333333333333


def test_the_line_under_the_table_names_the_best_and_the_fewest_workers_that_reach_95_percent_of_it():
    # 10, 97, 100 samples/s: 97 is 97% of the best, so 1 worker is enough; 10, 20, 96, 100: 96%, at 2 workers
    assert best_line(make_profile((10.0, 97.0, 100.0))) == (
        "best: 2 workers, 100.0 samples/s; 1 worker reaches 95% of it (97.0 samples/s)"
    )
    assert best_line(make_profile((10.0, 20.0, 96.0, 100.0))) == (
        "best: 3 workers, 100.0 samples/s; 2 workers reach 95% of it (96.0 samples/s)"
    )
    # the fewest workers that reach it, not the slowest point that does: 99 at 1 worker, though 96 at 2 also reaches
    assert best_line(make_profile((10.0, 99.0, 96.0, 100.0))) == (
        "best: 3 workers, 100.0 samples/s; 1 worker reaches 95% of it (99.0 samples/s)"
    )
    assert best_line(make_profile((10.0, 20.0, 15.0))) == "best: 1 worker, 20.0 samples/s"  # none fewer reach it
    assert best_line(make_profile((2_000.0, 1_500.0))) == "best: 0 workers, 2,000.0 samples/s"


def test_the_plot_is_written_and_its_figure_closed(tmp_path):
    """Every logged run draws one: a figure left open per run would pile up in a process that logs many."""
    import matplotlib.pyplot as plt

    open_before = plt.get_fignums()
    path = plot_curve(make_profile(), tmp_path / "curve.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plt.get_fignums() == open_before
