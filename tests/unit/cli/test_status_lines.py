"""`adlrec status`'s lines per node and job, from the service's answers (tests/integration/test_status_cli.py
reads a real one)."""

from rich.console import Console

from adlrec.cli.status import _job_row, _node_line, status_text

NOW = 1_000_000.0


def _job(job_id: str, **fields) -> dict:
    base = {"job_id": job_id, "node": "n1", "gpus": 1, "assignment": {"workers": 2}, "curve": [5.0, 10.0, 20.0]}
    return base | {"reported_workers": None, "reported_throughput": None, "data_wait": None, "last_seen": NOW} | fields


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_a_node_line_counts_cores_in_words():
    node = {"name": "tiny", "cores": 1, "memory_mb": 512, "active_jobs": 1}
    assert _node_line(node, None) == "tiny: 1 core, 0.5 GB for workers, 1 active · no plan yet"
    plan = {"plan_id": 3, "policy": "optimal", "cores_used": 1}
    assert _node_line(node, plan).endswith(" · plan #3 by optimal, 1 of 1 cores used")


def test_a_job_no_plan_holds_yet_shows_its_assignment_and_its_curve_there():
    """Each rank's assignment, for the whole job; a count past the curve's end reads its last point."""
    plan = {"workers": {"other": 3}, "throughput": {"other": 30.0}, "reasons": {"other": "gain"}}
    job = _job("j", gpus=2, ranks=2, assignment={"workers": 7}, last_seen=NOW + 5)  # a clock a little ahead
    row = ["j", "2 (2 ranks)", "14 (2 × 7)", "–", "–", "40.0", "100%", "–", "0 s ago", "not in a plan yet"]
    assert _job_row(job, plan, NOW) == row


def test_a_planned_job_shows_the_plans_figures_and_a_flat_zero_curve_has_no_share_of_peak():
    plan = {"workers": {"j": 1}, "throughput": {"j": 0.0}, "reasons": {"j": "no gain"}}
    job = _job("j", curve=[0.0, 0.0], reported_workers=1, reported_throughput=0.0, data_wait=0.5, last_seen=NOW - 61)
    assert _job_row(job, plan, NOW) == ["j", "1", "1", "1", "0.0", "0.0", "–", "50%", "61 s ago", "no gain"]


def test_a_node_where_no_plan_fits_says_why_and_idle_nodes_are_listed_not_taken_for_none():
    state = {
        "url": "http://127.0.0.1:8470",
        "nodes": [
            {"name": "n1", "cores": 2, "memory_mb": 1024, "active_jobs": 1, "problem": "2 GPUs need 2 cores"},
            {"name": "n2", "cores": 1, "memory_mb": 1024, "active_jobs": 0},
        ],
        "plans": [],
        "jobs": [_job("j")],
    }
    text = _text(status_text(state, NOW))
    assert "  no plan fits now: 2 GPUs need 2 cores" in text and "nodes without an active job: n2 (1 core)" in text
    idle = _text(status_text(state | {"jobs": []}, NOW))
    assert "knows no node yet" not in idle and "nodes without an active job: n1 (2 cores), n2 (1 core)" in idle
