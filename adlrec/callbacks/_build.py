"""What both adapters share: building the controller from user-facing arguments."""

from __future__ import annotations

import difflib
import json
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from adlrec.callbacks.controller import Controller, ServiceLike

__all__ = ["batch_samples", "default_node", "make_controller"]


# The adapters' own keyword arguments; every other one is a field of the job's registration (POST /jobs).
OWN_ARGUMENTS = ("url", "node", "token", "client", "interval_s", "probe", "curve")


def default_node() -> str:
    """This machine's node name for the service: its host name, with each character a node name may not
    hold (``[A-Za-z0-9._:@-]``, starting alphanumeric) made a ``-``, so that any host (``lab host``:
    ``lab-host``) can register without ``node=``."""
    name = re.sub(r"[^A-Za-z0-9._:@-]", "-", socket.gethostname()).lstrip("._:@-")[:128]
    return name or "localhost"


def make_controller(
    who: str,
    *,
    url: str | None,
    node: str | None,
    token: str | None,
    client: ServiceLike | None,
    interval_s: float,
    probe: dict[str, Any] | None,
    curve: Sequence[float] | None,
    registration: dict[str, Any],
) -> Controller:
    """The controller for adapter ``who``, its arguments checked now: a typo or a bad value is an error at
    construction, not a registration the service refuses while the job trains on without it."""
    if (probe is None) == (curve is None):
        raise ValueError(
            f"{who}: give exactly one of probe= (the features `adlrec predict model.py --json` prints under "
            "'probe') or curve= (samples/s at 0, 1, 2, ... workers)"
        )
    if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s > 0:
        raise ValueError(f"{who}: interval_s must be a number of seconds > 0, got {interval_s!r}")
    node = node or default_node()
    fields = {k: v for k, v in registration.items() if v is not None}  # None: the service's default
    if probe is not None:
        fields["probe"] = dict(probe) if isinstance(probe, Mapping) else probe
    else:  # taken once: a one-shot iterable (map, a generator) must reach the service whole
        fields["curve"] = list(curve) if isinstance(curve, Iterable) and not isinstance(curve, (str, bytes)) else curve
    fields = _check_registration(who, node, fields)
    if client is None:
        from adlrec.client import ServiceClient

        if url is None:
            url = os.environ.get("ADLREC_SERVICE_URL", "http://127.0.0.1:8470")
        _check_url(who, url)
        client = ServiceClient(url, token=token or os.environ.get("ADLREC_SERVICE_TOKEN"))
    return Controller(client, node, interval_s=interval_s, registration=fields)


def _check_registration(who: str, node: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The registration's fields as the service will get them (JSON: a numpy or torch scalar made a
    number), validated as the service will (its own pydantic model), naming what was wrong."""
    from pydantic import ValidationError

    from adlrec.service.api import JobRegistration

    try:
        fields = json.loads(json.dumps(fields, default=_json_scalar))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{who}: the registration must be plain numbers, strings and lists: {exc}"[:500]) from None
    try:
        JobRegistration.model_validate({"node": node, **fields})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        if err["type"] == "extra_forbidden" and len(err["loc"]) == 1:
            known = sorted({*OWN_ARGUMENTS, *JobRegistration.model_fields})
            close = difflib.get_close_matches(where, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"{who}() got an unexpected keyword argument {where!r}{hint} (expected one of {', '.join(known)})"
            ) from None
        msg = err["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
        if not where:  # a check across fields (the model's own validator): its message names them
            raise ValueError(f"{who}: {msg}"[:500]) from None
        raise ValueError(f"{who}: {where}: {msg}, got {err.get('input')!r}"[:500]) from None
    return fields


def _json_scalar(value: Any) -> Any:
    """A numpy or torch scalar (or a one-element tensor) as the Python number it holds."""
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except Exception:  # an array of more than one element: torch raises RuntimeError, numpy ValueError
            pass
    raise TypeError(f"{type(value).__name__} {value!r} is not a number, string or list")


def _check_url(who: str, url: Any) -> None:
    parsed = None
    if isinstance(url, str) and url:
        try:
            parsed = urlsplit(url)
        except ValueError:
            parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"{who}: url must be the service's http(s) address, e.g. http://127.0.0.1:8470, got {url!r}")


def batch_samples(batch: Any) -> int:
    """Samples in a batch: the length of its first tensor (or of the batch itself)."""
    first = batch
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    if isinstance(first, dict) and first:
        first = next(iter(first.values()))
    shape = getattr(first, "shape", None)
    if shape:
        return int(shape[0])
    try:
        return len(batch)
    except TypeError:
        return 1
