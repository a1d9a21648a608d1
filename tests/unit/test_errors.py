import pytest

from adlrec.errors import first_line


@pytest.mark.parametrize(
    ("message", "line"),
    [
        ("one line", "one line"),
        ("\n  the cause\nthen a traceback's worth\n", "the cause"),
        ("", "(no message)"),
        (" \n ", "(no message)"),
    ],
)
def test_first_line_is_the_first_thing_an_error_says_else_the_fallback(message, line):
    assert first_line(ValueError(message), "(no message)") == line
