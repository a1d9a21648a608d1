"""Published curve tables: the shipped Synergy table, interpolation, and clear errors for bad files."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from adlrec.errors import UsageError
from adlrec.simulate import Node, TraceSpec, build_jobs, generate_trace
from adlrec.simulate.published import load_published
from adlrec.simulate.trace import profile_catalog

SHIPPED = Path(__file__).resolve().parents[3] / "profiles" / "published" / "synergy.json"


def table(**over) -> dict:
    doc = {
        "name": "t",
        "cpus_per_gpu": [1, 2, 4],
        "task_share": {"image": 0.5, "text": 0.5},
        "models": {
            "a": {"task": "image", "batch": 100, "iter_time_s": 1.0, "normalised": [0.5, 1.0, 2.0]},
            "b": {"task": "image", "batch": 10, "iter_time_s": 0.5, "normalised": [1, 1, 1]},
            "c": {"task": "text", "batch": 10, "iter_time_s": 1.0, "normalised": [1, 1, 1]},
        },
    }
    return doc | over


def write(tmp_path, doc) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    return path


def test_rate_is_linear_between_grid_points_with_the_main_process_on_one_cpu(tmp_path):
    (name, a), (_, b), (_, c) = load_published(write(tmp_path, table()))
    assert name == "t:a" and a.reference_rate == 100.0 and b.reference_rate == 20.0
    assert [a.rate(w) for w in range(5)] == [50.0, 100.0, 150.0, 200.0, 200.0]  # w workers = w + 1 CPUs
    assert a.workers_to_peak() == 3 and b.workers_to_peak() == 0
    assert (a.share, b.share, c.share) == (0.25, 0.25, 0.5)  # a task's share split over its models


def test_the_shipped_synergy_table(tmp_path):
    models = dict(load_published(SHIPPED))
    assert len(models) == 10 and sum(m.share for m in models.values()) == pytest.approx(1.0)
    res18 = models["synergy:res18"]
    assert res18.reference_rate == pytest.approx(512 / 0.64)
    assert res18.rate(2) == pytest.approx(800.0)  # 3 CPUs per GPU: the fair share, 1.0
    assert res18.rate(6) / 800 == pytest.approx(1.75 + (7 - 6) / (9 - 6) * (2.4 - 1.75))
    assert res18.rate(40) == pytest.approx(2.4 * 800) and res18.workers_to_peak() == 8
    assert models["synergy:gnmt"].workers_to_peak() == 0


def test_published_models_join_the_catalogue_and_build_multi_gpu_curves(tmp_path):
    (tmp_path / "published").mkdir()
    write(tmp_path / "published", table())
    catalog = profile_catalog(tmp_path)
    a = catalog["t:a"]
    spec = TraceSpec(jobs=4, seed=1)
    rows = generate_trace([("t:a", a)], Node(cores=8, gpus=2), spec)
    rows = [replace(r, gpus=2) for r in rows]
    job = build_jobs(rows, catalog, Node(cores=8, gpus=2))[0]
    assert job.curve[:5] == (100.0, 150.0, 200.0, 250.0, 300.0) and job.mem_per_worker_mb == 0


def test_a_trace_draws_models_by_their_shares(tmp_path):
    models = load_published(write(tmp_path, table()))
    rows = generate_trace(models, Node(cores=8, gpus=2), TraceSpec(jobs=4000, seed=7, gpu_mix=((1, 1.0),)))
    counts = Counter(r.profile for r in rows)
    assert counts["t:c"] / 4000 == pytest.approx(0.5, abs=0.03)
    assert counts["t:a"] / 4000 == pytest.approx(0.25, abs=0.03)


@pytest.mark.parametrize(
    "change,message",
    [
        ({"name": ""}, "field name: expected a non-empty name"),
        ({"cpus_per_gpu": [2, 1, 4]}, "field cpus_per_gpu: expected increasing values >= 1"),
        ({"cpus_per_gpu": [1, 2, 2]}, "field cpus_per_gpu: expected increasing values >= 1"),  # a step of 0 CPUs
        ({"cpus_per_gpu": "1,2,4"}, "field cpus_per_gpu: expected a non-empty list of numbers"),
        ({"models": {}}, "field models: expected an object of models"),
        ({"task_share": {"image": 0, "text": 1}}, "expected a share > 0 for 'image'"),
        ({"task_share": {"image": 1}}, "expected a share > 0 for 'text', got None"),
        # the table's name and a model's join with ':' into the name a trace uses
        ({"name": "a:b"}, "field name: expected a non-empty name without ':', got 'a:b'"),
        # w workers are w + 1 CPUs, never fewer than 1: a grid below that has points no rank is at
        ({"cpus_per_gpu": [0.5, 2, 4]}, "field cpus_per_gpu: expected increasing values >= 1, got [0.5, 2.0, 4.0]"),
        ({"cpus_per_gpu": []}, "field cpus_per_gpu: expected a non-empty list of numbers, got []"),
        ({"cpus_per_gpu": [True, 2, 4]}, "field cpus_per_gpu: expected a non-empty list of numbers"),
        ({"cpus_per_gpu": [1, float("nan"), 4]}, "field cpus_per_gpu: expected a non-empty list of numbers"),
        ({"task_share": [0.5, 0.5]}, "field task_share: expected an object of task -> share"),
        ([], "expected a JSON object"),
    ],
)
def test_malformed_tables_name_the_field(tmp_path, change, message):
    with pytest.raises(UsageError, match="published curves .*t.json") as err:
        load_published(write(tmp_path, table(**change) if isinstance(change, dict) else change))
    assert message in str(err.value)


def test_malformed_models_name_the_model_and_field(tmp_path):
    doc = table()
    doc["models"]["b"]["normalised"] = [1, 1]
    with pytest.raises(UsageError, match=r"model 'b', field normalised: expected 3 values >= 0"):
        load_published(write(tmp_path, doc))
    doc["models"]["b"] = {"task": "image", "batch": 0, "iter_time_s": 1, "normalised": [1, 1, 1]}
    with pytest.raises(UsageError, match=r"model 'b': expected batch > 0 and iter_time_s > 0"):
        load_published(write(tmp_path, doc))
    (tmp_path / "t.json").write_text("{not json")
    with pytest.raises(UsageError, match="not JSON"):
        load_published(tmp_path / "t.json")


def test_workers_to_peak_on_a_fractional_grid_rounds_the_cpus_up(tmp_path):
    # the peak at 2.5 CPUs per GPU: 2 workers (3 CPUs) reach it, 1 worker (2 CPUs) does not
    doc = table(cpus_per_gpu=[1, 2.5, 4])
    doc["models"]["a"]["normalised"] = [0.5, 2.0, 2.0]
    (_, a), *_ = load_published(write(tmp_path, doc))
    assert a.workers_to_peak() == 2
    assert a.rate(1) == 150.0 and a.rate(2) == 200.0  # 2 CPUs: 0.5 + (1 / 1.5) x 1.5 = 1.5 of 100/s


@pytest.mark.parametrize(
    "model,message",
    [
        ([1, 2], "model 'b': expected an object"),
        (
            {"batch": 10, "iter_time_s": 1, "normalised": [1, 1, 1]},
            "model 'b', field task: expected a task name, got None",
        ),
        (
            {"task": "image", "batch": 10, "iter_time_s": 1, "normalised": [1, -1, 1]},
            "model 'b', field normalised: expected 3 values >= 0",
        ),
        # a model that trains at no rate at all: its curve would be zero everywhere
        (
            {"task": "image", "batch": 10, "iter_time_s": 1, "normalised": [0, 0, 0]},
            "model 'b', field normalised: expected 3 values >= 0 (one per cpus_per_gpu), not all 0",
        ),
        (
            {"task": "image", "batch": 10, "iter_time_s": 0, "normalised": [1, 1, 1]},
            "expected batch > 0 and iter_time_s > 0",
        ),
    ],
    ids=["not-an-object", "no-task", "negative", "all-zero", "no-iteration-time"],
)
def test_a_malformed_model_is_one_usage_error_naming_it(tmp_path, model, message):
    doc = table()
    doc["models"]["b"] = model
    with pytest.raises(UsageError) as err:
        load_published(write(tmp_path, doc))
    assert message in str(err.value) and "t.json" in str(err.value)


def test_a_published_table_that_cannot_be_read_is_one_usage_error(tmp_path):
    (tmp_path / "t.json").mkdir()  # a folder where a table was expected
    with pytest.raises(UsageError, match=r"^cannot read published curves .*t.json: "):
        load_published(tmp_path / "t.json")
