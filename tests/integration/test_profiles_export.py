"""Logged profiles read back from a real SQLite MLflow store and exported to a profiles/ folder."""

from __future__ import annotations

import json

from adlrec.cli import main
from adlrec.profile.library import load_profiles
from adlrec.schemas import DeviceSpec
from adlrec.tracking import Tracker
from tests.factories import make_profile


def test_export_writes_newest_per_measurement_with_an_index(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    older = make_profile(throughputs=(1.0, 2.0))
    newer = make_profile(throughputs=(3.0, 4.0))  # same workload, params, device, hardware
    other = make_profile(device=DeviceSpec("cpu"), workload="other")
    for p in (older, newer, other):
        tracker.log_profile(p)

    out = tmp_path / "profiles"
    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(out)]) == 0
    assert "exported 2 profiles" in capsys.readouterr().out
    files = sorted(f.name for f in out.glob("*.json"))
    assert len(files) == 2
    assert files[0].startswith("other-cpu-") and files[1].startswith("w-emulate5-")

    loaded = {p.workload: p for p in load_profiles(out)}
    assert loaded["w"] == newer and loaded["other"] == other
    data = json.loads((out / files[1]).read_text())
    assert data["command"] == "adlrec profile w.py" and data["hardware"]["fingerprint"]
    assert len(data["mlflow_run_id"]) == 32

    index = (out / "README.md").read_text()
    assert "do not edit by hand" in index
    assert "EMULATED accelerator (5 ms/step)" in index and "`adlrec profile other.py`" in index

    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3


def test_export_from_an_empty_store_is_a_clear_error(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'empty.db'}"
    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(tmp_path / "p")]) == 2
    assert "no complete profiles to export" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()
