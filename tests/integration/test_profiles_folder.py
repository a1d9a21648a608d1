"""The shipped profiles/ folder: every curve loads, says where and how it was measured, and is indexed."""

from __future__ import annotations

from pathlib import Path

from adlrec.predict.evaluate import curves_from_profiles, workload_group
from adlrec.profile.library import load_profiles, profile_key, write_index

PROFILES = Path(__file__).resolve().parents[2] / "profiles"


def test_every_shipped_profile_is_complete_and_indexed():
    profiles = load_profiles(PROFILES)
    assert len(profiles) >= 16
    index = (PROFILES / "README.md").read_text()
    for p in profiles:
        assert p.command.startswith("adlrec profile examples/"), p.command
        assert p.hardware.fingerprint and p.hardware.logical_cores >= 1
        assert [q.workers for q in p.points] == list(range(len(p.points)))
        assert all(q.throughput > 0 for q in p.points)
        assert p.baseline.ceiling > 0
        assert f"`{p.command}`" in index
        if p.device.emulated:
            assert "EMULATED" in p.device.title
    assert len({profile_key(p) for p in profiles}) == len(profiles)


def test_the_index_is_what_the_exporter_writes_and_lists_the_published_tables(tmp_path):
    """profiles/README.md is current: the index the exporter writes for this folder, byte for byte,
    published tables included."""
    import shutil

    copy = tmp_path / "profiles"
    shutil.copytree(PROFILES, copy)
    (copy / "README.md").unlink()
    written = write_index(copy).read_text()
    assert written == (PROFILES / "README.md").read_text()
    for f in (PROFILES / "published").glob("*.json"):
        assert f"| published/{f.name} |" in written


def test_shipped_profiles_cover_enough_distinct_workloads_to_cross_validate():
    profiles = load_profiles(PROFILES)
    assert len({workload_group(p) for p in profiles}) >= 12
    assert len(curves_from_profiles(profiles)) == len(profiles)
