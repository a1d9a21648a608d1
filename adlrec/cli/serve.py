"""`adlrec serve`: the allocation service (docs/service.md)."""

from __future__ import annotations

import argparse

from adlrec.cli.common import seconds, settings_from, store_args, store_source, tcp_port

__all__ = ["add_commands"]


def add_commands(sub) -> None:
    sv = sub.add_parser(
        "serve",
        help="run the allocation service (HTTP API: jobs register, heartbeat and read their workers)",
        description="Start the allocation service under uvicorn: a job store (SQLite in the data dir by default), "
        "periodic recompute with the configured policy, predictions from the registered throughput model. "
        "Without a token it listens on loopback only.",
    )
    sv.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1; others need a token)")
    sv.add_argument("--port", type=tcp_port, default=None, help="TCP port (default 8470)")
    sv.add_argument(
        "--token",
        default=None,
        help="bearer token that guards every write (prefer $ADLREC_SERVICE_TOKEN: flags show in `ps`)",
    )
    sv.add_argument("--store-url", default=None, help="SQLAlchemy URL of the job store (default: sqlite in data dir)")
    sv.add_argument(
        "--policy",
        default=None,
        help="allocation policy: even | proportional | fixed | greedy | maxmin | optimal (default optimal)",
    )
    sv.add_argument("--interval", type=seconds, default=None, metavar="SECONDS", help="recompute period (30)")
    sv.add_argument("--ttl", type=seconds, default=None, metavar="SECONDS", help="expire silent jobs after (120)")
    store_args(sv, experiment=None)  # the service logs live runs to adlrec-live; it reads no experiment
    sv.set_defaults(handler=_cmd_serve)


def _cmd_serve(args: argparse.Namespace) -> int:
    from adlrec.service.server import serve

    settings = settings_from(
        args,
        service_host=args.host,
        service_port=args.port,
        service_token=args.token,
        service_store_url=args.store_url,
        service_policy=args.policy,
        service_interval_s=args.interval,
        service_ttl_s=args.ttl,
    )
    serve(settings, store_source(args))
    return 0
