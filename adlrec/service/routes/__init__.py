"""One router per resource: jobs, nodes, plans, model, health (with /metrics)."""

from adlrec.service.routes import health, jobs, model, nodes, plans

__all__ = ["health", "jobs", "model", "nodes", "plans"]
