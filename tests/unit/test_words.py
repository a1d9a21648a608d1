from adlrec.words import agree, count, plural, reaching


def test_one_thing_is_said_as_is_and_every_other_count_in_the_plural():
    assert [count(n, "worker") for n in (0, 1, 2)] == ["0 workers", "1 worker", "2 workers"]
    assert count(-1, "core") == "-1 cores"


def test_words_ending_in_a_hiss_take_es():
    assert [plural(3, w) for w in ("batch", "failed flush", "main process", "box")] == [
        "batches",
        "failed flushes",
        "main processes",
        "boxes",
    ]
    assert plural(1, "batch") == "batch"


def test_a_verb_agrees_with_its_count():
    assert [agree(n, "reaches", "reach") for n in (0, 1, 2)] == ["reach", "reaches", "reach"]


def test_the_fewest_workers_reaching_a_share_are_said_one_way_wherever_they_are_printed():
    assert reaching(1, 0.95) == "1 worker reaches 95% of it"
    assert reaching(3, 0.95) == "3 workers reach 95% of it"
    assert reaching(0, 0.9) == "0 workers reach 90% of it"
