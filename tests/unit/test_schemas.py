from adlrec.schemas import Baseline, DeviceSpec, GpuInfo, Hardware, Profile, ProfilePoint


def make_profile(throughputs=(10.0, 20.0, 15.0), device=DeviceSpec("emulate", 5.0)) -> Profile:
    hw = Hardware("Test CPU", 8, 4, 31.9, (GpuInfo("H200", 139.8),), "2.13.0", "Linux", "host")
    pts = tuple(
        ProfilePoint(
            workers=w, throughput=t, rse=0.01, batches=50, seconds=1.0, stable=True, wait_fraction=0.1,
            stall_fraction=0.2, prep_share=0.2, fetch_share=0.0, prep_rate=t * 2, cpu_util=0.5,
            worker_uss_mb=10.0 if w else 0.0, worker_pss_mb=12.0 if w else 0.0, main_rss_mb=300.0,
        )
        for w, t in enumerate(throughputs)
    )
    base = Baseline(25.0, 0.01, 12.0, 1e-4, 1e-5, 4096.0, "posix_fadvise(DONTNEED) per file")
    return Profile("w", "abc", {"batch_size": 8, "n": 3}, 8, device, hw, base, pts, 1.0, 0.05, "adlrec profile w.py", "2026-12-02T00:00:00+00:00")


def test_profile_round_trips_through_dict():
    p = make_profile()
    assert Profile.from_dict(p.to_dict()) == p


def test_best_point_and_device_labels():
    p = make_profile()
    assert p.best.workers == 1
    assert p.to_dict()["device"] == {"kind": "emulate", "step_ms": 5.0, "label": "emulate:5", "emulated": True}


def test_fingerprint_ignores_hostname_and_versions_but_not_cores():
    a = make_profile().hardware
    b = Hardware(a.cpu_model, a.logical_cores, a.physical_cores, a.memory_gb, a.gpus, "9.9", "Other", "other-host")
    c = Hardware(a.cpu_model, 16, a.physical_cores, a.memory_gb, a.gpus, a.torch_version, a.platform, a.hostname)
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != c.fingerprint


def test_fetch_extra_is_never_negative():
    b = Baseline(1.0, 0.0, 1.0, fetch_cold_s=1e-5, fetch_cached_s=2e-5, fetch_bytes=1.0, fetch_method="x")
    assert b.fetch_extra_s == 0.0
