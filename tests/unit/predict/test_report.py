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
    # errors 10/100, 0/200 and 120/100: median 10%; measured best 200 at 1 worker (not the predicted best, 2),
    # the predicted best 50% of it
    assert sweep_line([110.0, 200.0, 220.0], [100.0, 200.0, 100.0], 2) == (
        "median APE 10.0%; measured best 200.0 at 1 worker, predicted best w=2 reaches 50% of it"
    )


def test_the_prediction_table_gives_each_count_its_share_of_the_predicted_max_and_its_error_to_the_measurement():
    out = StringIO()
    Console(file=out, width=120).print(
        prediction_table("w", DeviceSpec("emulate", 5.0), [50.0, 100.0, 80.0], [40.0, 125.0, 80.0])
    )
    rows = [line.replace("│", " ").split() for line in out.getvalue().splitlines()]
    # the error is relative to the measurement: (50 - 40) / 40, (100 - 125) / 125
    assert ["0", "50.0", "50%", "40.0", "+25.0%"] in rows
    assert ["1", "100.0", "100%", "125.0", "-20.0%"] in rows
    assert ["2", "80.0", "80%", "80.0", "+0.0%"] in rows


def test_the_evaluation_table_puts_each_score_under_its_own_column():
    from adlrec.predict.evaluate import Evaluation
    from adlrec.predict.report import evaluation_table

    e = Evaluation({"kind": "analytic"}, 4, 2, 20, 0.1, 0.3, 0.2, 0.5, ())
    out = StringIO()
    Console(file=out, width=160).print(evaluation_table([("new: analytic", e)], "cv"))
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if "median APE" in line)
    assert [c.strip() for c in header.split("┃")[1:-1]] == [
        "model",
        "median APE",
        "p90 APE",
        "max error (median)",
        "best w within 5%",
        "curves",
        "workloads",
    ]
    row = next(line for line in lines if "new: analytic" in line)
    assert [c.strip() for c in row.split("│")[1:-1]] == ["new: analytic", "10.0%", "30.0%", "20.0%", "50%", "4", "2"]


def test_a_curve_predicted_at_zero_everywhere_shows_a_dash_for_its_share_not_a_division_by_zero():
    out = StringIO()
    Console(file=out, width=120).print(prediction_table("w", DeviceSpec("emulate", 5.0), [0.0, 0.0], [0.0, 10.0]))
    rows = [line.replace("│", " ").split() for line in out.getvalue().splitlines()]
    # no share of a zero peak, no error relative to a zero measurement; the other error is (0 - 10) / 10
    assert ["0", "0.0", "–", "0.0", "–"] in rows
    assert ["1", "0.0", "–", "10.0", "-100.0%"] in rows


def test_the_fit_table_puts_the_new_version_beside_the_champion_it_was_judged_against():
    from adlrec.predict.evaluate import Evaluation
    from adlrec.predict.fit import FitOutcome
    from adlrec.predict.report import fit_table

    new = Evaluation({"kind": "learned"}, 4, 2, 20, 0.1, 0.3, 0.2, 0.5, ())
    champion = Evaluation({"kind": "interp"}, 4, 2, 20, 0.15, 0.4, 0.25, 1.0, ())

    def rows(outcome):
        out = StringIO()
        Console(file=out, width=160).print(fit_table(outcome))
        return [[c.strip() for c in line.split("│")[1:-1]] for line in out.getvalue().splitlines() if "│" in line]

    judged = FitOutcome("run", "3", new, "2", champion, promoted=True)
    assert rows(judged) == [
        ["new: learned (v3)", "10.0%", "30.0%", "20.0%", "50%", "4", "2"],
        ["champion: interp (v2)", "15.0%", "40.0%", "25.0%", "100%", "4", "2"],
    ]
    first = FitOutcome("run", "1", new, None, None, promoted=True)
    assert rows(first) == [["new: learned (v1)", "10.0%", "30.0%", "20.0%", "50%", "4", "2"]]
