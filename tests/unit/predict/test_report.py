"""Prediction and fit tables show a job's name as it is, whatever brackets it holds (rich markup)."""

from io import StringIO

from rich.console import Console

from adlrec.predict.report import prediction_table
from adlrec.schemas import DeviceSpec


def test_a_name_with_square_brackets_is_shown_as_written_not_read_as_markup():
    for name in ("exp[/]v2", "[bold]x"):
        out = StringIO()
        Console(file=out, width=120).print(
            prediction_table(name, DeviceSpec("emulate", 5.0), [10.0, 20.0], [9.0, 21.0])
        )
        assert f"{name} on EMULATED accelerator (5 ms/step): predicted throughput" in out.getvalue()
