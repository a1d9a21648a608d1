"""`adlrec status`'s line per node, from the service's answers (tests/integration/test_status_cli.py reads a real one)."""

from adlrec.cli.status import _node_line


def test_a_node_line_counts_cores_in_words():
    node = {"name": "tiny", "cores": 1, "memory_mb": 512, "active_jobs": 1}
    assert _node_line(node, None) == "tiny: 1 core, 0.5 GB for workers, 1 active · no plan yet"
    plan = {"plan_id": 3, "policy": "optimal", "cores_used": 1}
    assert _node_line(node, plan).endswith(" · plan #3 by optimal, 1 of 1 cores used")
