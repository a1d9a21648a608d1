"""The service client's own checks, without a server (tests/integration/test_service_client.py has them with one)."""

from __future__ import annotations

import re

import pytest

from adlrec.client import ServiceClient


@pytest.mark.parametrize("token", ["t\u00f6k", "\u201cs3cret\u201d", "line1\nline2", "tab\there"])
def test_a_token_that_cannot_be_sent_is_refused_when_the_client_is_built(token):
    """Before: UnicodeEncodeError from httpx for a non-ASCII token; a client built with a line break in it, every
    call of which then failed as 'unreachable (LocalProtocolError: Illegal header value)'."""
    with pytest.raises(
        ValueError, match=r"^ServiceClient: the token has a character that is not printable ASCII"
    ) as err:
        ServiceClient("http://127.0.0.1:9", token=token)
    assert token not in str(err.value)


def test_a_token_s_surrounding_whitespace_is_dropped_and_printable_ascii_is_kept():
    with ServiceClient("http://127.0.0.1:9", token=" a-b_c.d~e+f/g=h i\n") as client:
        assert client._http.headers["authorization"] == "Bearer a-b_c.d~e+f/g=h i"


def test_what_the_job_keeps_while_the_service_is_away_counts_workers_in_words():
    from adlrec.client import Assignment, _keeping

    assert _keeping(None) == "no plan yet"
    assert _keeping(Assignment(1, 7, "active", False)) == "keeping 1 worker (plan 7)"
    assert _keeping(Assignment(0, None, "active", False)) == (
        "keeping 0 workers (the service has not planned this job yet)"
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"retries": -1}, "retries must be a whole number >= 0, got -1"),
        ({"retries": 1.5}, "retries must be a whole number >= 0, got 1.5"),
        ({"retries": True}, "retries must be a whole number >= 0, got True"),
        ({"timeout_s": 0}, "timeout_s must be a finite number of seconds > 0, got 0"),
        ({"timeout_s": float("inf")}, "timeout_s must be a finite number of seconds > 0, got inf"),
        ({"backoff_s": -0.1}, "backoff_s must be a finite number of seconds >= 0, got -0.1"),
        ({"backoff_s": float("nan")}, "backoff_s must be a finite number of seconds >= 0, got nan"),
    ],
)
def test_settings_the_client_cannot_work_with_are_refused_when_it_is_built(kwargs, message):
    # a negative retries count made every call raise inside the client, logged as an unexpected error each time
    with pytest.raises(ValueError, match=f"^ServiceClient: {re.escape(message)}$"):
        ServiceClient("http://127.0.0.1:1", **kwargs)


def test_the_edges_of_the_settings_are_accepted():
    ServiceClient("http://127.0.0.1:1", retries=0, backoff_s=0, timeout_s=0.001).close()
