from dataclasses import replace

import pytest

from adlrec.predict.features import FEATURE_COLUMNS, ProbeError, ProbeFeatures, features_from_profile
from adlrec.schemas import DeviceSpec
from tests.factories import make_profile

GOOD = dict(
    ceiling=1000.0,
    prep_rate_0=500.0,
    prep_rate_1=400.0,
    prep_rate_2=780.0,
    fetch_extra_s=1e-4,
    batch_size=32,
    cores=8,
    device_kind="emulate",
)


def test_round_trip_and_columns():
    f = ProbeFeatures(**GOOD)
    assert ProbeFeatures.from_dict(f.to_dict()) == f
    assert set(FEATURE_COLUMNS) == set(GOOD)


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("ceiling", -1.0, "probe input ceiling=-1.0: expected a finite rate in samples/s > 0"),
        ("prep_rate_1", float("nan"), "probe input prep_rate_1=nan"),
        ("prep_rate_0", 0.0, "probe input prep_rate_0=0.0: expected a finite rate in samples/s > 0"),
        ("ceiling", float("inf"), "probe input ceiling=inf: expected a finite rate"),
        ("fetch_extra_s", 60.0, "probe input fetch_extra_s=60.0: expected seconds per sample, 0 <= s < 60"),
        ("fetch_extra_s", -0.1, "probe input fetch_extra_s=-0.1: expected seconds per sample"),
        ("cores", 0, "probe input cores=0: expected a whole number >= 1"),
        ("batch_size", True, "probe input batch_size=True"),
        ("device_kind", "tpu", "probe input device_kind='tpu': expected cpu, cuda or emulate"),
    ],
)
def test_bad_probe_input_names_the_field(field, value, message):
    with pytest.raises(ProbeError) as err:
        ProbeFeatures(**(GOOD | {field: value}))
    assert message in str(err.value)


def test_from_dict_reports_missing_and_unparseable_fields():
    with pytest.raises(ProbeError, match="missing ceiling, cores"):
        ProbeFeatures.from_dict({k: v for k, v in GOOD.items() if k not in ("ceiling", "cores")})


@pytest.mark.parametrize(
    "field,value,message",
    [
        ("batch_size", 32.5, "probe input batch_size=32.5: expected a whole number >= 1"),
        ("cores", 7.5, "probe input cores=7.5: expected a whole number >= 1"),
        ("cores", "many", "probe input cores='many': expected a whole number >= 1"),
        ("fetch_extra_s", -0.1, "probe input fetch_extra_s=-0.1: expected seconds per sample, 0 <= s < 60"),
        ("ceiling", "fast", "probe input ceiling='fast': expected a finite rate in samples/s > 0"),
        ("prep_rate_2", None, "probe input prep_rate_2=None: expected a finite rate in samples/s > 0"),
        ("fetch_extra_s", [], "probe input fetch_extra_s=[]: expected seconds per sample, 0 <= s < 60"),
    ],
)
def test_a_value_from_dict_cannot_read_as_a_number_is_named_with_what_was_expected(field, value, message):
    """A value that was no number at all was "probe input: could not convert string to float: 'fast'", which
    named neither the field nor what it expects; a None was a TypeError, not a ProbeError."""
    with pytest.raises(ProbeError) as err:
        ProbeFeatures.from_dict(GOOD | {field: value})
    assert str(err.value) == message


def test_features_from_a_profile_use_its_own_measurements():
    p = replace(make_profile(throughputs=(10.0, 20.0, 30.0, 31.0)), batch_size=16)
    f = features_from_profile(p)
    assert f.ceiling == p.baseline.ceiling
    assert f.fetch_extra_s == pytest.approx(1e-4 - 1e-5) and f.batch_size == 16  # cold minus cached reads
    assert (f.prep_rate_0, f.prep_rate_1, f.prep_rate_2) == (20.0, 40.0, 60.0)
    assert f.cores == p.hardware.logical_cores and f.device_kind == "emulate"
    assert features_from_profile(make_profile(device=DeviceSpec("cpu"))).device_kind == "cpu"
    with pytest.raises(ProbeError, match="no points at workers=\\[2\\]"):
        features_from_profile(make_profile(throughputs=(10.0, 20.0)))
