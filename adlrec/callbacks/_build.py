"""What both adapters share: building the controller from user-facing arguments."""

from __future__ import annotations

import difflib
import json
import os
import re
import socket
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import SplitResult, urlsplit

from adlrec.callbacks.controller import Controller, ServiceLike, check_interval

__all__ = ["batch_samples", "check_arguments", "check_url", "default_node", "make_controller"]

DEFAULT_URL = "http://127.0.0.1:8470"
URL_VARIABLE = "ADLREC_SERVICE_URL"  # the service's address when url= is not given
TOKEN_VARIABLE = "ADLREC_SERVICE_TOKEN"  # its token when token= is not given


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
    _check_keywords(who, registration)  # first: a typo'd curve= (curves=) is that typo, not a missing curve
    if (probe is None) == (curve is None):
        raise ValueError(
            f"{who}: give exactly one of probe= (the features `adlrec predict model.py --json` prints under "
            "'probe') or curve= (samples/s at 0, 1, 2, ... workers)"
        )
    url, node, token = check_arguments(who, url=url, node=node, token=token, interval_s=interval_s, client=client)
    fields = {k: v for k, v in registration.items() if v is not None}  # None: the service's default
    if probe is not None:
        fields["probe"] = dict(probe) if isinstance(probe, Mapping) else probe
    else:  # taken once: a one-shot iterable (map, a generator) must reach the service whole
        fields["curve"] = list(curve) if isinstance(curve, Iterable) and not isinstance(curve, (str, bytes)) else curve
    fields = _check_registration(who, node, fields)
    if client is None:
        from adlrec.client import ServiceClient

        assert url is not None  # check_arguments filled it in
        client = ServiceClient(url, token=token)
    return Controller(client, node, interval_s=interval_s, registration=fields)


def check_arguments(
    who: str,
    *,
    url: str | None = None,
    node: str | None = None,
    token: str | None = None,
    interval_s: float = 5.0,
    client: ServiceLike | None = None,
) -> tuple[str | None, str, str | None]:
    """The adapter's own arguments checked, as ``(url, node, token)`` with their defaults filled in (the
    environment's ``ADLREC_SERVICE_URL`` and ``ADLREC_SERVICE_TOKEN``, this host's name).  Public so that a
    script can report a mistake in them before a slow step (a probe) that the adapter's construction needs."""
    check_interval(who, interval_s)
    if token is not None and not isinstance(token, str):
        raise TypeError(f"{who}: token must be a string (the service's token), got a {type(token).__name__}")
    if node is None:
        node = default_node()
    elif isinstance(node, str) and not node.strip():
        raise ValueError(
            f"{who}: node must be the node's name at the service (letters, digits and ._:@-), or None for "
            f"this host's name, got {node!r}"
        )
    if client is None:  # an injected client brings its own address and token
        if url is None:
            url = os.environ.get(URL_VARIABLE, DEFAULT_URL)
            check_url(who, url, f"the environment's {URL_VARIABLE} (url= not given)")
        else:
            check_url(who, url, "url")
        token = token or os.environ.get(TOKEN_VARIABLE)
    return url, node, token


def _check_keywords(who: str, registration: dict[str, Any]) -> None:
    """A keyword argument that is neither the adapter's own nor a registration field is a ``TypeError``
    naming it, with the closest known name."""
    from adlrec.service.api import JobRegistration

    known = sorted({*OWN_ARGUMENTS, *JobRegistration.model_fields})
    for name in registration:
        if name not in JobRegistration.model_fields:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(
                f"{who}() got an unexpected keyword argument {name!r}{hint} (expected one of {', '.join(known)})"
            )


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


def check_url(who: str, url: Any, source: str) -> None:
    """Refuse what the client could not call, naming where the url came from (``source``: the argument
    or the environment variable)."""
    parsed = _split(url)
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"{who}: {source} must be the service's http(s) address, e.g. {DEFAULT_URL}, got {url!r}")
    try:
        port = parsed.port  # urlsplit checks the port only when asked: a ValueError for 'abc' or 99999
    except ValueError:
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"{who}: {source} must have a port from 1 to 65535 (or none), e.g. {DEFAULT_URL}, got {url!r}")


def _split(url: Any) -> SplitResult | None:
    if not isinstance(url, str) or not url:
        return None
    try:
        return urlsplit(url)
    except ValueError:
        return None


def batch_samples(batch: Any) -> int:
    """Samples in a batch, as a training loop gets it from a DataLoader's collate:

    - a tensor or array: its first dimension;
    - a dict (a collated dict of fields): the samples of its first tensor, else of its first value;
    - a list or tuple holding a tensor (collated fields, as ``(inputs, target)`` or
      ``(["a", "b", "c"], labels)``): the first dimension of its first tensor;
    - any other list or tuple (samples not collated: strings, numbers, dicts, tuples): its length;
    - anything else: its length if it has one, else 1.

    A list of per-sample tensors (a ``collate_fn`` that returns the list as it is) reads as collated
    fields: give such a loop's batches as a tuple of one stacked tensor, or count them yourself."""
    n = _samples(batch)
    return 1 if n is None else n


def _samples(batch: Any) -> int | None:
    first = _first_dim(batch)
    if first is not None:
        return first
    if isinstance(batch, Mapping):
        fields = list(batch.values())
        dims = [d for d in map(_first_dim, fields) if d is not None]
        return dims[0] if dims else (_samples(fields[0]) if fields else 0)
    if isinstance(batch, (list, tuple)):
        dims = [d for d in map(_first_dim, batch) if d is not None]
        return dims[0] if dims else len(batch)
    try:
        return len(batch)
    except TypeError:
        return None


def _first_dim(value: Any) -> int | None:
    """The first dimension of a tensor or array of at least one dimension; None for anything else."""
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and shape:  # torch.Size is a tuple
        try:
            return int(shape[0])
        except (TypeError, ValueError):
            return None
    return None
