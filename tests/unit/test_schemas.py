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


def test_enough_is_the_fewest_workers_within_the_share_of_the_best():
    p = make_profile(throughputs=(10.0, 95.0, 96.0, 100.0, 98.0))
    assert p.best.workers == 3
    assert p.enough().workers == 1  # 95 reaches 95% of 100
    assert p.enough(0.96).workers == 2
    assert p.enough(1.0).workers == 3


def test_enough_share_is_the_precision_points_are_measured_to():
    from adlrec.config import Settings
    from adlrec.schemas import ENOUGH_SHARE

    assert ENOUGH_SHARE == 1 - Settings().rse_target


def test_json_text_is_strict_json_with_null_for_a_non_finite_number():
    import json

    from adlrec.schemas import json_text

    doc = {
        "rse": float("inf"),
        "x": [float("nan"), 1.5, {"y": float("-inf")}],
        "t": (2, float("inf")),
        "ok": True,
        "n": None,
    }
    text = json_text(doc)
    assert "Infinity" not in text and "NaN" not in text
    expected = {"rse": None, "x": [None, 1.5, {"y": None}], "t": [2, None], "ok": True, "n": None}
    assert text == json.dumps(expected, indent=2)  # indented, as profiles/ files are written


def test_a_profile_with_every_optional_field_round_trips_through_its_json():
    import json
    from dataclasses import replace

    from adlrec.schemas import json_text

    p = make_profile()
    p = replace(
        p,
        hardware=replace(p.hardware, physical_cores=None, gpus=(), gpu_note="NVML library not found"),
        baseline=replace(p.baseline, ceiling_rse=float("inf"), ceiling_end=24.0, ceiling_end_rse=0.02),
        points=(replace(p.points[0], rse=float("inf")), *p.points[1:]),
        notes=("the ceiling moved 4% during the sweep",),
    )
    assert Profile.from_dict(json.loads(json_text(p.to_dict()))) == p


def test_enough_and_best_do_not_depend_on_the_order_of_the_points():
    from dataclasses import replace

    p = make_profile(throughputs=(10.0, 95.0, 96.0, 100.0, 98.0))
    backwards = replace(p, points=p.points[::-1])  # a checked profile's points need only be distinct
    assert backwards.best.workers == 3 and backwards.enough().workers == 1
