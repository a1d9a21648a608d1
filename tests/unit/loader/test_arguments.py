"""ResizableLoader's arguments and calls: a mistake is an error naming what was wrong, and changes nothing."""

from __future__ import annotations

import os
import threading

import pytest

from adlrec.loader import ResizableLoader
from tests.factories import Indices


def flat(batches) -> list[int]:
    return [i for b in batches for i in b.tolist()]


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"num_workers": 2.5}, TypeError, "num_workers must be a whole number >= 0, got 2.5"),
        ({"num_workers": "2"}, TypeError, "num_workers must be a whole number >= 0, got '2'"),
        ({"num_workers": -1}, ValueError, "num_workers must be a whole number >= 0, got -1"),
        ({"num_workers": True}, TypeError, "num_workers must be a whole number >= 0, got True"),  # not 1
        ({"batch_size": "64"}, TypeError, "batch_size must be a whole number >= 1, got '64'"),
        ({"batch_size": None}, TypeError, "batch_size must be a whole number >= 1, got None"),
        ({"batch_size": 0}, ValueError, "batch_size must be a whole number >= 1, got 0"),
        ({"prefetch_factor": 0}, ValueError, "prefetch_factor must be a whole number >= 1, got 0"),
        ({"handover": -1}, ValueError, "handover must be a whole number >= 0, got -1"),
        ({"seed": "a"}, TypeError, "seed must be a whole number >= 0, got 'a'"),
        ({"timeout": -1}, ValueError, "timeout must be a number of seconds >= 0, got -1"),
        ({"cores": "0,1"}, TypeError, "cores must be a sequence of core numbers"),
        ({"cores": []}, ValueError, "cores must name at least one core"),
        ({"drop_last": "no"}, TypeError, "drop_last must be True or False, got 'no'"),
        ({"shuffle": 1}, TypeError, "shuffle must be True, False or None, got 1"),
        ({"persistent_workers": None}, TypeError, "persistent_workers must be True or False, got None"),
        ({"fork_server": "yes"}, TypeError, "fork_server must be True, False or None, got 'yes'"),
        ({"collate_fn": 3}, TypeError, "collate_fn must be a function or None, got 3"),
        ({"worker_init_fn": "init"}, TypeError, "worker_init_fn must be a function or None, got 'init'"),
        ({"sampler": 5}, TypeError, "sampler must be an iterable of dataset indices"),
        ({"sampler": (i for i in range(8))}, TypeError, "sampler must have a length (len(sampler)"),
        ({"multiprocessing_context": "threads"}, ValueError, "multiprocessing_context must be one of fork"),
        ({"multiprocessing_context": 5}, ValueError, "multiprocessing_context must be one of"),
    ],
)
def test_bad_arguments_are_refused_naming_them(kwargs, error, message):
    with pytest.raises(error) as exc:
        ResizableLoader(Indices(8), **({"batch_size": 2} | kwargs))
    assert message in str(exc.value)


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="pinning is Linux-only")
def test_cores_this_process_may_not_run_on_are_refused_up_front_and_at_a_resize():
    allowed = sorted(os.sched_getaffinity(0))
    outside = max(allowed) + 100
    with pytest.raises(ValueError, match=rf"cores \[{outside}\] are not cores this process may run on"):
        ResizableLoader(Indices(8), 2, cores=[outside])
    loader = ResizableLoader(Indices(8), 2, cores=allowed[:1])
    with pytest.raises(ValueError, match="are not cores this process may run on"):
        loader.resize(1, cores=[outside])
    assert loader.cores == tuple(allowed[:1]) and loader.num_workers == 0


def test_a_fractional_count_is_refused_by_resize_and_request_resize_and_changes_nothing():
    with ResizableLoader(Indices(16), 2, num_workers=0) as loader:
        it = iter(loader)
        first = next(it).tolist()
        for call in (loader.resize, loader.request_resize):
            with pytest.raises(TypeError, match="num_workers must be a whole number >= 0, got 2.5"):
                call(2.5)
        assert loader.num_workers == 0
        assert first + flat(it) == list(range(16))  # the epoch goes on as if nothing was asked
        assert flat(loader) == list(range(16))  # and so does the next


def test_resize_from_another_thread_than_the_loops_is_refused_and_the_epoch_goes_on():
    with ResizableLoader(Indices(16), 2, num_workers=0) as loader:
        it = iter(loader)
        got = next(it).tolist()
        errors: list[BaseException] = []

        def other() -> None:
            try:
                loader.resize(1)
            except RuntimeError as exc:
                errors.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(errors) == 1 and "request_resize(n) from any thread" in str(errors[0])
        assert loader.num_workers == 0
        assert got + flat(it) == list(range(16))


@pytest.mark.parametrize(
    "change,message",
    [
        ({"batches_consumed": -3}, "state['batches_consumed'] must be a whole number >= 0, got -3"),
        ({"batches_consumed": 999}, "state['batches_consumed'] is 999, more than the epoch's 8 batches"),
        ({"batches": 7}, "the saved epoch had 16 samples in 7 batches of 2, this loader has 16 in 8 of 2"),
        # another dataset of as many batches (15 samples: 8 batches of 2 too) is told apart by its samples
        ({"samples": 15}, "the saved epoch had 15 samples in 8 batches of 2, this loader has 16 in 8 of 2"),
        ({"samples": "16"}, "state['samples'] must be a whole number >= 0, got '16'"),
        ({"epoch": 1.5}, "state['epoch'] must be a whole number >= 0, got 1.5"),
        ({"seed": None}, "state['seed'] must be a whole number >= 0, got None"),
        ({"version": 99}, "unknown ResizableLoader state (version 99)"),
    ],
)
def test_a_bad_saved_state_is_refused_and_changes_nothing(change, message):
    with ResizableLoader(Indices(16), 2, shuffle=True, seed=3) as loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(3)]
        before = loader.state_dict()
        with pytest.raises(ValueError) as exc:
            loader.load_state_dict(before | change)
        assert message in str(exc.value)
        assert loader.state_dict() == before
        rest = flat(it)
        assert sorted(sum(got, []) + rest) == list(range(16))  # the live epoch was not abandoned


def test_a_saved_state_missing_a_key_names_it():
    with ResizableLoader(Indices(16), 2) as loader:
        state = loader.state_dict()
        del state["batches_consumed"]
        with pytest.raises(ValueError, match="state lacks 'batches_consumed'"):
            loader.load_state_dict(state)


def test_a_state_taken_at_an_epochs_end_resumes_into_the_next_epoch():
    with ResizableLoader(Indices(8), 2, shuffle=True, seed=5) as ref:
        orders = []
        for e in range(3):
            ref.set_epoch(e)
            orders.append(flat(ref))
    with ResizableLoader(Indices(8), 2, shuffle=True, seed=5) as loader:
        it = iter(loader)
        for _ in range(4):
            next(it)
        state = loader.state_dict()  # after the last batch, before the loop asks for another
        assert (state["epoch"], state["batches_consumed"]) == (0, 4)
    with ResizableLoader(Indices(8), 2, shuffle=True, seed=5) as resumed:
        resumed.load_state_dict(state)
        assert flat(resumed) == []  # the rest of epoch 0: nothing
        assert [flat(resumed), flat(resumed)] == orders[1:]


def test_an_unused_iter_after_a_resume_keeps_the_resume_position():
    with ResizableLoader(Indices(8), 2, shuffle=True, seed=5) as ref:
        ref.set_epoch(2)
        whole_epoch = flat(ref)
    with ResizableLoader(Indices(8), 2, shuffle=True, seed=5) as loader:
        loader.load_state_dict({"version": 1, "epoch": 2, "batches_consumed": 3, "batches": 4, "seed": 5})
        iter(loader)  # as Lightning's iterable check
        assert flat(loader) == whole_epoch[6:]


def test_more_workers_than_cores_warns_once_per_count_as_a_dataloader_does():
    import warnings

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with pytest.warns(UserWarning, match=rf"{cores + 1} DataLoader workers on the {cores} cores they may run on"):
        loader = ResizableLoader(Indices(8), 2, num_workers=cores + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loader.resize(cores + 1)  # the same count: said once
        loader.resize(cores)  # as many as the cores: nothing to say
    with pytest.warns(UserWarning, match=rf"{cores + 5} DataLoader workers"):
        loader.request_resize(cores + 5)


def test_the_warning_of_more_workers_than_cores_points_at_the_callers_line():
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with pytest.warns(UserWarning, match="DataLoader workers on the") as made:
        loader = ResizableLoader(Indices(8), 2, num_workers=cores + 1)
    with pytest.warns(UserWarning, match="DataLoader workers on the") as resized:
        loader.resize(cores + 2)
    with pytest.warns(UserWarning, match="DataLoader workers on the") as requested:
        loader.request_resize(cores + 3)
    assert [w.filename for w in (*made, *resized, *requested)] == [__file__] * 3
