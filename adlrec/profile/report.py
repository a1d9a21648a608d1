"""Ways to show a profile: a rich table, CSV text, a PNG plot.  No I/O beyond the path given."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import asdict, fields
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from adlrec.schemas import ENOUGH_SHARE, Profile, ProfilePoint
from adlrec.words import count, reaching

__all__ = ["best_line", "curve_csv", "plot_curve", "profile_table"]

_POINT_FIELDS = [f.name for f in fields(ProfilePoint)]


def curve_csv(profile: Profile) -> str:
    """The curve as CSV, one row per worker count, every field of :class:`ProfilePoint`."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_POINT_FIELDS, lineterminator="\n")
    writer.writeheader()
    for p in profile.points:
        writer.writerow({k: _fmt(v) for k, v in asdict(p).items()})
    return buf.getvalue()


def best_line(profile: Profile) -> str:
    """The line under the table: the best worker count, and the fewest that reach 95% of it when fewer do."""
    best, enough = profile.best, profile.enough()
    line = f"best: {count(best.workers, 'worker')}, {best.throughput:,.1f} samples/s"
    if enough.workers != best.workers:
        line += f"; {reaching(enough.workers, ENOUGH_SHARE)} ({enough.throughput:,.1f} samples/s)"
    return line


def _fmt(v: object) -> object:
    return f"{v:.6g}" if isinstance(v, float) else v


def _then(ceiling_end: float | None) -> str:
    return "" if ceiling_end is None else f"; {ceiling_end:,.1f} again after the sweep"


def profile_table(profile: Profile) -> Table:
    b = profile.baseline
    title = escape(f"{profile.workload} on {profile.device.title}: batch {profile.batch_size}")
    caption = (
        f"ceiling {b.ceiling:,.1f} samples/s (no loader{_then(b.ceiling_end)}) · "
        f"in-process loader {b.prep_rate:,.1f} samples/s · "
        f"fetch {b.fetch_cold_s * 1e3:.3f} ms/sample cold, {b.fetch_cached_s * 1e3:.3f} cached "
        f"{escape(f'[{b.fetch_method}]')}\n{escape(profile.hardware.summary)}"
    )
    if profile.device.emulated:
        caption += f"\nEMULATED: each training step is a {profile.device.step_ms:g} ms wait; data loading is real"
    caption += (
        "\nstall = 1 - samples/s / ceiling (warm cache); prep, fetch* = shares of step time, fetch* estimated "
        "for cold data; wait = time blocked on the loader; loader/s = loader alone; MB/worker = USS"
    )
    table = Table(title=title, caption=caption, caption_justify="left")
    for name in (
        "workers",
        "samples/s",
        "±rse",
        "of best",
        "stall",
        "prep",
        "fetch*",
        "wait",
        "loader/s",
        "cpu",
        "MB/worker",
    ):
        table.add_column(name, justify="right", no_wrap=True)
    best = profile.best
    for p in profile.points:
        table.add_row(
            str(p.workers),
            f"{p.throughput:,.1f}",
            (f"{p.rse:.1%}" if math.isfinite(p.rse) else "-") + ("" if p.stable else " !"),  # inf: too few batches
            f"{p.throughput / best.throughput:.0%}",
            f"{p.stall_fraction:.0%}",
            f"{p.prep_share:.0%}",
            f"{p.fetch_share:.0%}",
            f"{p.wait_fraction:.0%}",
            f"{p.prep_rate:,.1f}",
            f"{p.cpu_util:.0%}",
            f"{p.worker_uss_mb:.1f}" if p.workers else "-",
            style="bold" if p is best else None,
        )
    return table


def plot_curve(profile: Profile, path: Path) -> Path:
    """Throughput (and the ceiling) over workers, and the stall shares under it, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ws = [p.workers for p in profile.points]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7, 6.5), sharex=True, height_ratios=[3, 2])
    try:
        ax1.plot(ws, [p.throughput for p in profile.points], "o-", label="training throughput")
        ax1.plot(ws, [p.prep_rate for p in profile.points], "s--", alpha=0.7, label="loader alone")
        ax1.axhline(profile.baseline.ceiling, color="grey", ls=":", label="compute ceiling")
        ax1.set_ylabel("samples/s")
        ax1.set_ylim(bottom=0)
        ax1.legend(loc="best", fontsize=8)
        ax1.set_title(f"{profile.workload} on {profile.device.title}", fontsize=10)
        ax2.stackplot(
            ws,
            [p.prep_share for p in profile.points],
            [p.fetch_share for p in profile.points],
            labels=["prep stall", "fetch stall (est., cold)"],
            alpha=0.7,
        )
        ax2.plot(ws, [p.stall_fraction for p in profile.points], "k.-", label="stall fraction (warm)")
        ax2.set_ylim(0, 1)
        ax2.set_xlabel("DataLoader workers")
        ax2.set_ylabel("share of step time")
        ax2.legend(loc="best", fontsize=8)
        ax2.set_xticks(ws)
        fig.text(0.01, 0.005, profile.hardware.summary, fontsize=6, color="grey")
        fig.tight_layout(rect=(0, 0.02, 1, 1))
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return path
