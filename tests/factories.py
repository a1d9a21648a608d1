"""Builders of real records for tests (no mocks: these are the same frozen records the code passes)."""

from __future__ import annotations

from adlrec.schemas import Baseline, DeviceSpec, GpuInfo, Hardware, Profile, ProfilePoint


def make_profile(
    throughputs=(10.0, 20.0, 15.0),
    device: DeviceSpec | None = None,
    workload: str = "w",
    params: dict | None = None,
) -> Profile:
    device = device or DeviceSpec("emulate", 5.0)
    hw = Hardware("Test CPU", 8, 4, 31.9, (GpuInfo("H200", 139.8),), "2.13.0", "Linux", "host")
    pts = tuple(
        ProfilePoint(
            workers=w,
            throughput=t,
            rse=0.01,
            batches=50,
            seconds=1.0,
            stable=True,
            wait_fraction=0.1,
            stall_fraction=0.2,
            prep_share=0.2,
            fetch_share=0.0,
            prep_rate=t * 2,
            cpu_util=0.5,
            worker_uss_mb=10.0 if w else 0.0,
            worker_pss_mb=12.0 if w else 0.0,
            main_rss_mb=300.0,
        )
        for w, t in enumerate(throughputs)
    )
    base = Baseline(25.0, 0.01, 12.0, 1e-4, 1e-5, 4096.0, "posix_fadvise(DONTNEED) per file")
    return Profile(
        workload,
        "abc",
        params or {"batch_size": 8, "n": 3},
        8,
        device,
        hw,
        base,
        pts,
        1.0,
        0.05,
        f"adlrec profile {workload}.py",
        "2026-12-02T00:00:00+00:00",
    )
