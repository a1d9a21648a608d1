"""What predict prints: tables that show a job's name as written (rich markup), and lines that count in words."""

from io import StringIO

from rich.console import Console

from adlrec.predict.report import prediction_line, prediction_table, sweep_line
from adlrec.schemas import DeviceSpec


def test_a_name_with_square_brackets_is_shown_as_written_not_read_as_markup():
    for name in ("exp[/]v2", "[bold]x"):
        out = StringIO()
        Console(file=out, width=120).print(
            prediction_table(name, DeviceSpec("emulate", 5.0), [10.0, 20.0], [9.0, 21.0])
        )
        assert f"{name} on EMULATED accelerator (5 ms/step): predicted throughput" in out.getvalue()


def test_the_prediction_line_counts_workers_in_words():
    # the curve peaks at 3 workers (100); 1 worker is predicted at 96%, the fewest to reach 95% of it
    assert prediction_line([10.0, 96.0, 99.0, 100.0], 3, 1) == (
        "predicted max 100.0 samples/s at 3 workers; 1 worker reaches 95% of it"
    )
    assert (
        prediction_line([10.0, 100.0], 1, 1) == "predicted max 100.0 samples/s at 1 worker; 1 worker reaches 95% of it"
    )
    assert prediction_line([10.0, 50.0, 100.0], 2, 2).endswith("; 2 workers reach 95% of it")


def test_the_sweep_line_gives_the_median_error_the_measured_best_and_the_predicted_bests_share_of_it():
    # errors 10/100, 0/200 and 20/100: median 10%; measured best 200 at 1 worker, the predicted best (2) 50% of it
    assert sweep_line([110.0, 200.0, 120.0], [100.0, 200.0, 100.0], 2) == (
        "median APE 10.0%; measured best 200.0 at 1 worker, predicted best w=2 reaches 50% of it"
    )
