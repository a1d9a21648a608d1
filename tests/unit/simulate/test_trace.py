"""The CSV trace format, profile names, and the seeded generator."""

import json

import pytest

from adlrec.allocate import fixed
from adlrec.errors import UsageError
from adlrec.profile.library import profile_key
from adlrec.schemas import DeviceSpec
from adlrec.simulate import (
    Node,
    SimConfig,
    TraceSpec,
    build_jobs,
    format_trace,
    generate_trace,
    parse_trace,
    profile_catalog,
    profile_files,
    read_trace,
    simulate,
)
from tests.factories import make_profile

HEADER = "job_id,arrival_s,work_samples,profile,gpus,requested_workers"


@pytest.fixture
def folder(tmp_path):
    for ms in (5.0, 20.0):
        p = make_profile(device=DeviceSpec("emulate", ms), workload="w")
        (tmp_path / f"w-emulate{ms:g}.json").write_text(json.dumps(p.to_dict()))
    for n in (1, 2):  # two parameter sets of one workload on one device
        p = make_profile(device=DeviceSpec("cpu"), workload="w", params={"batch_size": 8, "n": n})
        (tmp_path / f"w-cpu-{n}.json").write_text(json.dumps(p.to_dict()))
    return tmp_path


@pytest.fixture
def catalog(folder):
    return profile_catalog(folder)


def test_profiles_are_named_by_file_and_by_workload_at_device(catalog):
    assert catalog["w@emulate:5"] is catalog["w-emulate5.json"] is catalog["w-emulate5"]
    assert catalog[profile_key(catalog["w-emulate5"])] is catalog["w-emulate5"]  # and by its 10-character key
    assert catalog["w-cpu-1"].params["n"] == 1
    assert "w@cpu" not in catalog  # shared by two profiles: only their file names name them


def test_a_trace_round_trips_through_its_text():
    text = "# a comment\n" + HEADER + ",weight\n" + "j1,0,100,w@emulate:5,1,8,2\n\nj2, 3.5 ,50,w@cpu,2,4,1\n"
    rows = parse_trace(text)
    assert [(r.job_id, r.arrival_s, r.gpus, r.weight, r.line) for r in rows] == [
        ("j1", 0.0, 1, 2.0, 3),
        ("j2", 3.5, 2, 1.0, 5),
    ]
    assert parse_trace(format_trace(rows, ["made here"])) == rows


def test_an_empty_weight_cell_is_the_default_weight():
    """weight is optional: a spreadsheet leaves the cell blank where none was given (it was refused, "got ''")."""
    rows = parse_trace(HEADER + ",weight\nj1,0,100,w@cpu,1,8,\nj2,0,100,w@cpu,1,8, \nj3,0,100,w@cpu,1,8,3\n")
    assert [r.weight for r in rows] == [1.0, 1.0, 3.0]
    with pytest.raises(UsageError, match="line 2, column gpus: expected a whole number of GPUs >= 1, got ''"):
        parse_trace(HEADER + "\nj1,0,100,w@cpu,,8\n")  # a required column's blank cell is still a mistake


@pytest.mark.parametrize(
    "body,message",
    [
        ("j1,0,100,w@cpu,zero,8", "line 2, column gpus: expected a whole number of GPUs >= 1, got 'zero'"),
        ("j1,-1,100,w@cpu,1,8", "line 2, column arrival_s: expected a number of seconds >= 0, got '-1'"),
        ("j1,0,nan,w@cpu,1,8", "line 2, column work_samples: expected a number of samples > 0"),
        ("j1,0,100,w@cpu,1", "line 2: expected 6 fields"),
        ("j1,0,100,w@cpu,1_0,8", "line 2, column gpus: expected a whole number of GPUs >= 1, got '1_0'"),
        ("j1,0,1e3,w@cpu,1,0x8", "line 2, column requested_workers: expected a whole number of workers 0..256"),
        # `fixed` runs what a script asks for, so the curve reaches it: a mistyped count must not build a huge one
        ("j1,0,1e3,w@cpu,1,100000000", "line 2, column requested_workers: expected a whole number of workers 0..256"),
        ("j1,infinity,100,w@cpu,1,8", "line 2, column arrival_s: expected a number of seconds >= 0"),
        ("j1,1e999,100,w@cpu,1,8", "line 2, column arrival_s: expected a number of seconds >= 0"),  # overflows to inf
        ("j1,0,100,w@cpu,1,8,2", "line 2: expected 6 fields"),
        ("j1,0,100,,1,8", "line 2, column profile: expected a non-empty value"),
        # each bound's first value outside it (a job of no work, no GPU, -1 workers, a negative weight)
        ("j1,0,0,w@cpu,1,8", "line 2, column work_samples: expected a number of samples > 0, got '0'"),
        ("j1,0,100,w@cpu,0,8", "line 2, column gpus: expected a whole number of GPUs >= 1, got '0'"),
        (
            "j1,0,100,w@cpu,1,-1",
            "line 2, column requested_workers: expected a whole number of workers 0..256, got '-1'",
        ),
        (
            "j1,0,100,w@cpu,1,8\nj1,1,100,w@cpu,1,8",
            "line 3, column job_id: expected a unique id, 'j1' is already on line 2",
        ),
    ],
)
def test_malformed_rows_name_line_column_and_expectation(body, message):
    with pytest.raises(UsageError) as exc:
        parse_trace(HEADER + "\n" + body + "\n", source="t.csv")
    assert f"t.csv {message}" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_bad_header_or_empty_trace_is_refused():
    with pytest.raises(UsageError, match="line 1: missing 'job_id', .*; unknown 'id', 'arrival'; expected a header"):
        parse_trace("id,arrival\n1,2\n")
    with pytest.raises(UsageError, match="no jobs"):
        parse_trace(HEADER + "\n")
    # a file of comments and blank lines has no header either: that, not "no jobs", is what is wrong
    with pytest.raises(UsageError, match=r"^t.csv: empty; expected a header line job_id,arrival_s,"):
        parse_trace("# only a comment\n\n", source="t.csv")


def test_a_negative_weight_is_refused():
    with pytest.raises(UsageError, match=r"t.csv line 2, column weight: expected a weight >= 0, got '-1'$"):
        parse_trace(HEADER + ",weight\nj1,0,100,w@cpu,1,8,-1\n", source="t.csv")


def test_a_line_of_only_spaces_is_blank_and_skipped():
    rows = parse_trace(HEADER + "\n   \nj1,0,100,w@cpu,1,8\n \t \n")
    assert [(r.job_id, r.line) for r in rows] == [("j1", 3)]


def test_unknown_profile_is_named_with_the_known_ones(catalog):
    rows = parse_trace(HEADER + "\nj1,0,100,nope,1,8\n")
    with pytest.raises(
        UsageError, match=r"line 2, column profile: no profile named 'nope' \(e.g. a file stem, or one of w@emulate:20"
    ):
        build_jobs(rows, catalog, Node())


def test_a_name_several_profiles_share_is_refused_with_their_file_stems(catalog):
    rows = parse_trace(HEADER + "\nj1,0,100,w@cpu,1,8\n")
    with pytest.raises(UsageError) as exc:
        build_jobs(rows, catalog, Node(), source="t.csv")
    assert str(exc.value) == (
        "t.csv line 2, column profile: 'w@cpu' names 2 profiles (w-cpu-1, w-cpu-2); expected one of those file stems"
    )


@pytest.mark.parametrize("lockstep", [False, True])
def test_fixed_runs_every_worker_a_script_asks_for_on_a_node_with_fewer_cores(catalog, lockstep):
    node = Node(cores=16, gpus=4)
    rows = parse_trace(HEADER + "\nj1,0,1000,w-emulate5,4,8\n")  # 8 workers for each of 4 ranks: 32 on 16 cores
    (job,) = build_jobs(rows, catalog, node, lockstep=lockstep)
    on_the_cores = build_jobs(parse_trace(HEADER + "\nj1,0,1000,w-emulate5,4,2\n"), catalog, node, lockstep=lockstep)
    assert len(job.curve) == 33 and job.curve[:17] == on_the_cores[0].curve  # past the cores: the last point again
    r = simulate([job], fixed, node, SimConfig())
    # all 32 workers and the 4 main processes compete for the 16 cores
    assert r.jobs[0].mean_workers == pytest.approx(32) and r.mean_cpu_share == pytest.approx(16 / 36)


def test_two_copies_of_one_profile_leave_its_names_usable(folder):
    (folder / "w-emulate5-copy.json").write_text((folder / "w-emulate5.json").read_text())
    catalog = profile_catalog(folder)
    assert catalog["w@emulate:5"] == catalog["w-emulate5"] and "w@emulate:5" not in catalog.ambiguous


def test_a_trace_file_with_a_byte_order_mark_reads_as_without(tmp_path):
    text = HEADER + "\nj1,0,100,w@cpu,1,8\n"
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    (tmp_path / "plain.csv").write_text(text)
    assert read_trace(tmp_path / "bom.csv") == read_trace(tmp_path / "plain.csv")


def test_a_trace_file_that_is_not_utf8_is_refused_on_its_line(tmp_path):
    (tmp_path / "latin.csv").write_bytes((HEADER + "\nj1,0,100,w@cpu,1,8\nj\xe9,0,100,w@cpu,1,8\n").encode("latin-1"))
    with pytest.raises(UsageError) as exc:
        read_trace(tmp_path / "latin.csv")
    assert str(exc.value) == f"{tmp_path / 'latin.csv'} line 3: expected UTF-8 text, got byte 0xe9"


def test_a_profile_file_that_is_not_a_profile_is_named(folder):
    (folder / "broken.json").write_text('{"device": 3}')
    with pytest.raises(ValueError, match="broken.json"):
        profile_catalog(folder)


def test_generator_is_seeded_and_draws_accelerator_profiles_only(folder, catalog):
    node = Node(cores=16, gpus=4)
    files = profile_files(folder)
    a = generate_trace(files, node, TraceSpec(jobs=30, seed=7))
    assert a == generate_trace(files, node, TraceSpec(jobs=30, seed=7))
    assert a != generate_trace(files, node, TraceSpec(jobs=30, seed=8))
    assert {r.profile for r in a} == {"w-emulate5", "w-emulate20"}
    assert a[0].arrival_s == 0.0 and all(x.arrival_s <= y.arrival_s for x, y in zip(a, a[1:], strict=False))
    assert {r.gpus for r in a} <= {1, 2, 4} and {r.requested_workers for r in a} == {8}
    jobs = build_jobs(a, catalog, node)
    assert all(len(j.curve) == max(node.cores, 8 * j.gpus) + 1 for j in jobs)  # up to what `fixed` gives
    # each job's work is its length at full speed: between 10 and 120 minutes
    assert all(600 <= j.work_samples / j.peak <= 7200 for j in jobs)


def test_a_generated_job_too_short_for_one_sample_still_has_one(folder, catalog):
    """`trace generate --min-minutes 1e-7 --max-minutes 1e-7` wrote work_samples 0, which `simulate` then
    refused: a job of a few microseconds at full speed still trains on one sample."""
    node = Node(cores=16, gpus=4)
    rows = generate_trace(profile_files(folder), node, TraceSpec(jobs=5, seed=1, min_minutes=1e-7, max_minutes=1e-7))
    assert [r.work_samples for r in rows] == [1] * 5
    assert all(j.work_samples == 1 for j in build_jobs(rows, catalog, node))


def test_the_bounds_of_each_column_are_accepted():
    rows = parse_trace(HEADER + ",weight\nj1,0,0.5,w@cpu,1,0,0\nj2,1,1,w@cpu,1,256,0\n")
    assert [(r.arrival_s, r.requested_workers, r.weight) for r in rows] == [(0.0, 0, 0.0), (1.0, 256, 0.0)]


def test_a_hash_inside_a_line_is_not_a_comment():
    (row,) = parse_trace(HEADER + "\nj#1,0,100,w@cpu,1,8\n  # a comment after spaces\n")
    assert row.job_id == "j#1"


@pytest.mark.parametrize("lockstep,ranks", [(False, 1), (True, 4)])
def test_a_job_carries_its_row_s_weight_its_profile_s_memory_and_its_ranks(catalog, lockstep, ranks):
    rows = parse_trace(HEADER + ",weight\nj1,0,1000,w-emulate5,4,2,2.5\n")
    (job,) = build_jobs(rows, catalog, Node(cores=16, gpus=4), lockstep=lockstep)
    # make_profile's workers use 10 MB each; lockstep tells the policies the job's 4 ranks
    assert (job.weight, job.mem_per_worker_mb, job.ranks) == (2.5, 10, ranks)


def test_generated_arrivals_offer_the_requested_gpu_load_with_log_uniform_lengths(folder, catalog):
    node = Node(cores=16, gpus=4)
    rows = generate_trace(profile_files(folder), node, TraceSpec(jobs=2000, seed=1, load=0.5))
    jobs = build_jobs(rows, catalog, node)
    # GPU-seconds of work at full speed per second of arrivals: load x the node's GPUs (this seed: within 3%)
    offered = sum(j.gpus * j.work_samples / j.peak for j in jobs) / rows[-1].arrival_s
    assert offered == pytest.approx(0.5 * node.gpus, rel=0.1)
    # log-uniform in 10..120 minutes: the median is their geometric mean, 34.6 minutes (uniform: 65)
    median = sorted(j.work_samples / j.peak for j in jobs)[len(jobs) // 2]
    assert median == pytest.approx(60 * (10 * 120) ** 0.5, rel=0.1)


def test_a_generated_job_asks_for_no_more_gpus_than_the_node_has(folder):
    rows = generate_trace(profile_files(folder), Node(cores=8, gpus=2), TraceSpec(jobs=60, seed=1))
    assert {r.gpus for r in rows} == {1, 2}  # the 15% of 4-GPU draws become 2


def test_include_cpu_also_draws_the_cpu_profiles(folder):
    rows = generate_trace(profile_files(folder), Node(cores=16, gpus=4), TraceSpec(jobs=60, seed=1, include_cpu=True))
    assert {r.profile for r in rows} == {"w-emulate5", "w-emulate20", "w-cpu-1", "w-cpu-2"}


def test_the_generator_draws_the_same_trace_whatever_the_order_of_the_files(folder):
    node, spec = Node(cores=16, gpus=4), TraceSpec(jobs=30, seed=7, num_workers=3)
    files = profile_files(folder)
    rows = generate_trace(files, node, spec)
    assert rows == generate_trace(files[::-1], node, spec)
    assert {r.requested_workers for r in rows} == {3}


@pytest.mark.parametrize(
    "spec", [{"load": 0.0}, {"min_minutes": 0.0}, {"min_minutes": 20.0, "max_minutes": 10.0}, {"jobs": 0}]
)
def test_a_trace_spec_that_cannot_be_drawn_is_refused(spec):
    with pytest.raises(ValueError, match="need jobs >= 1, load > 0"):
        TraceSpec(**spec)


@pytest.mark.parametrize("mix", [(), ((0, 1.0),), ((1, -0.5), (2, 1.0)), ((1, 0.0), (2, 0.0))])
def test_a_gpu_mix_that_cannot_be_drawn_is_refused(mix):
    with pytest.raises(ValueError, match="gpu_mix needs"):
        TraceSpec(gpu_mix=mix)


def test_a_gpu_mix_of_weights_not_summing_to_one_offers_the_requested_load(folder, catalog):
    # weights 3 : 1 are 75% one GPU, 25% two: 1.25 GPUs a job on average (not 3 x 1 + 1 x 2 = 5)
    node = Node(cores=16, gpus=4)
    spec = TraceSpec(jobs=2000, seed=1, load=0.5, gpu_mix=((1, 3.0), (2, 1.0)))
    rows = generate_trace(profile_files(folder), node, spec)
    jobs = build_jobs(rows, catalog, node)
    offered = sum(j.gpus * j.work_samples / j.peak for j in jobs) / rows[-1].arrival_s
    assert offered == pytest.approx(0.5 * node.gpus, rel=0.1)


@pytest.mark.parametrize("where", ["header", "row"])
def test_a_line_too_long_for_csv_is_a_usage_error_naming_it(where):
    """A cell past the csv module's limit (131,072 characters: a wrong file given as the trace, say)
    raised _csv.Error, a traceback from `adlrec simulate`."""
    long = "j" * 200_000
    text = (long + "\n") if where == "header" else (HEADER + "\n" + long + ",0,100,w@cpu,1,8\n")
    line = 1 if where == "header" else 2
    with pytest.raises(UsageError) as exc:
        parse_trace(text, source="t.csv")
    assert str(exc.value).startswith(f"t.csv line {line}: not a CSV line (field larger than field limit")
    assert str(exc.value).endswith("expected comma-separated fields") and "\n" not in str(exc.value)


def test_a_profile_that_cannot_give_a_curve_is_a_usage_error_on_the_row_naming_it():
    """A profile measured at 0 workers only has no per-worker rate to extend: the row is named, no traceback."""
    rows = parse_trace(HEADER + "\nj1,0,100,solo,1,8\n")
    with pytest.raises(UsageError) as exc:
        build_jobs(rows, {"solo": make_profile(throughputs=(10.0,))}, Node(), source="t.csv")
    assert str(exc.value) == "t.csv line 2, column profile: profile 'w' has no point with loader workers"


def test_a_job_keeps_its_row_s_fractional_arrival_and_work(catalog):
    (job,) = build_jobs(parse_trace(HEADER + "\nj1,0.25,2.5,w-emulate5,1,8\n"), catalog, Node(cores=16, gpus=4))
    assert (job.arrival_s, job.work_samples) == (0.25, 2.5)


def test_a_job_on_more_gpus_than_the_node_has_is_refused_on_its_row(catalog):
    rows = parse_trace(HEADER + "\nj1,0,100,w-emulate5,1,8\nj2,0,100,w-emulate5,4,8\n")
    with pytest.raises(UsageError) as exc:
        build_jobs(rows, catalog, Node(cores=16, gpus=2), source="t.csv")
    assert str(exc.value) == "t.csv line 3, column gpus: the node has 2 GPUs, the job asks 4"
