"""The service client's own checks, without a server (tests/integration/test_service_client.py has them with one)."""

from __future__ import annotations

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
