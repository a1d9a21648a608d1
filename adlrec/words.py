"""Counts in words, as adlrec's messages, notes and tables print them: "1 worker", "3 workers", "2 batches"."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """``word`` as said of ``n`` things: as it is for 1; else with -es after ch, sh, s and x (batches,
    processes, flushes), and -s after anything else.  Enough for adlrec's own words, not for English."""
    if n == 1:
        return word
    return word + ("es" if word.endswith(("ch", "sh", "s", "x")) else "s")


def count(n: int, word: str) -> str:
    """``n`` and ``word`` as said of ``n`` things: "1 worker", "0 workers", "2 main processes"."""
    return f"{n} {plural(n, word)}"


def agree(n: int, one: str, many: str) -> str:
    """The form of a verb whose subject is ``n`` things: ``agree(1, "reaches", "reach")`` is "reaches"."""
    return one if n == 1 else many


def reaching(n: int, share: float) -> str:
    """``n`` workers and the share of the best they reach: "1 worker reaches 95% of it"."""
    return f"{count(n, 'worker')} {agree(n, 'reaches', 'reach')} {share:.0%} of it"
