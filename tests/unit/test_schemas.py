from adlrec.schemas import Baseline, Hardware, Profile
from tests.factories import make_profile


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
