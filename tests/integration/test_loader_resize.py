"""ResizableLoader with real worker processes (fork): resizes mid-epoch lose, repeat and reorder nothing.

Property tests draw dataset sizes, batch sizes, shuffles, drop_last and resize schedules (to and from
0 workers) and compare each epoch with what a plain ``DataLoader`` yields without any resize.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
import warnings

import psutil
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, DistributedSampler

import adlrec.loader.resizable as resizable
from adlrec.loader import ResizableLoader, can_pin
from tests.factories import Indices

FORK = "fork"
pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="the property tests start workers with fork"),
    pytest.mark.filterwarnings("ignore:ResizableLoader.*DataLoader workers on the:UserWarning"),  # more than 2 cores
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),  # 3 workers on 2 cores
]
PROPS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class WorkerView(torch.utils.data.Dataset):
    """Each sample reports what its worker process looks like from inside."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> dict:
        info = torch.utils.data.get_worker_info()
        return {
            "pid": os.getpid(),
            "threads": torch.get_num_threads(),
            "omp": os.environ.get("OMP_NUM_THREADS"),
            "cores": sorted(os.sched_getaffinity(0)) if can_pin() else None,
            "seed": info.seed if info else None,
            "tagged": os.environ.get("ADLREC_TEST_TAG"),
        }


def tag_worker(worker_id: int) -> None:
    os.environ["ADLREC_TEST_TAG"] = f"w{worker_id}"


# The standard library's long-lived helpers, started on first use and kept for the process's life:
# not workers a test could leave behind.
HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def live_children() -> set[int]:
    """Descendant processes that are running: workers, zygotes (not the stdlib's helpers)."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE and not any(h in " ".join(p.cmdline()) for h in HELPERS):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_until(predicate, timeout_s: float = 30.0) -> None:
    """Wait for something another thread or process does; the timeout only guards against a hang."""
    end = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < end, "timed out waiting"
        time.sleep(0.005)


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie has: only its parent's ``wait`` is missing)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def pids_left_by_a_killed_trainer(script: str, *args: str) -> list[int]:
    """Run ``script`` in a training process of its own, read the pids it prints on its first line, then
    SIGKILL it (no clean-up of any kind runs) and reap it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        trainer = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, text=True)
        pids = [int(p) for p in trainer.stdout.readline().split()]
        trainer.kill()
        trainer.wait(30)
        trainer.stdout.close()
    return pids


def plain_pass(n: int, bs: int, shuffle: bool, drop_last: bool, seed: int, epochs: int) -> list[list[list[int]]]:
    gen = torch.Generator().manual_seed(seed)
    plain = DataLoader(Indices(n), batch_size=bs, shuffle=shuffle, drop_last=drop_last, generator=gen)
    return [[b.tolist() for b in plain] for _ in range(epochs)]


def run_epoch(loader: ResizableLoader, schedule: dict[int, int | list[int]]) -> list[list[int]]:
    """One epoch, calling ``resize`` after the batches the schedule names (a list: one resize after
    another, before the next batch); ``len`` must hold still."""
    length = len(loader)
    out = []

    def resize_at(i: int) -> None:
        counts = schedule.get(i, [])
        for count in [counts] if isinstance(counts, int) else counts:
            loader.resize(count)

    resize_at(0)
    for i, batch in enumerate(loader, start=1):
        out.append(batch.tolist())
        resize_at(i)
        assert len(loader) == length
    return out


# Up to 5 points in the first 30 batches of an epoch (its last ones included, for short epochs), each
# with one or two resizes to 0-5 workers: grows weave pools (2 -> 3 -> 4 runs three), shrinks drop some
# of them or replace them all, and a resize may come while an earlier pool still starts or warms up, or
# before the batch that would let the previous one's first fork go.
schedules = st.dictionaries(
    st.integers(0, 30), st.lists(st.integers(0, 5), min_size=1, max_size=2), min_size=1, max_size=5
)
# 0: cut right at the batches in flight; None: the estimate, which on these instant samples keeps the
# old pool to the epoch's end (a resize then applies to the next epoch).
handovers = st.sampled_from([0, 0, 0, 1, 2, None])


@pytest.fixture(autouse=True)
def _no_leftover_workers():
    before = live_children()
    yield
    assert live_children() <= before, "a worker process outlived its test"


@PROPS
@given(
    n=st.integers(1, 60),
    bs=st.integers(1, 6),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**31),
    workers=st.integers(0, 2),
    persistent=st.booleans(),
    handover=handovers,
    epoch_schedules=st.lists(schedules, min_size=2, max_size=2),
    fork_server=st.sampled_from([False, True, None]),
    split_pools=st.booleans(),
)
def test_resizes_keep_every_index_once_in_the_order_of_no_resize(
    n, bs, shuffle, drop_last, seed, workers, persistent, handover, epoch_schedules, fork_server, split_pools
):
    before = live_children()
    expected = plain_pass(n, bs, shuffle, drop_last, seed, epochs=2)
    loader = ResizableLoader(
        Indices(n),
        bs,
        shuffle=shuffle,
        seed=seed,
        drop_last=drop_last,
        num_workers=workers,
        persistent_workers=persistent,
        handover=handover,
        multiprocessing_context=FORK,
        fork_server=fork_server,  # a resize's workers forked by the loader's zygote, or by this process
        split_pools=split_pools,  # an epoch's workers as several pools, which shrinks drop
    )
    auto_gb = resizable.AUTO_ZYGOTE_GB
    if fork_server is None:
        resizable.AUTO_ZYGOTE_GB = 0.0  # the default in a large process: the zygote, forked with the epoch or lazily
    try:
        for epoch, schedule in enumerate(epoch_schedules):
            got = run_epoch(loader, schedule)
            assert got == expected[epoch]
            flat = [i for b in got for i in b]
            assert len(flat) == len(set(flat)) == (n - n % bs if drop_last else n)
            if not persistent:
                assert live_children() <= before  # an epoch that ends stops its workers (and its zygote)
    finally:
        resizable.AUTO_ZYGOTE_GB = auto_gb
        loader.close()
    assert live_children() <= before


@PROPS
@given(
    n=st.integers(1, 40),
    bs=st.integers(1, 6),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    seed=st.integers(0, 2**31),
    before_save=st.integers(0, 3),
    after_load=st.integers(0, 3),
    cut=st.integers(0, 10),
    handover=handovers,
    schedule=schedules,
)
def test_a_saved_epoch_resumes_at_another_worker_count_with_exactly_the_rest(
    n, bs, shuffle, drop_last, seed, before_save, after_load, cut, handover, schedule
):
    (expected,) = plain_pass(n, bs, shuffle, drop_last, seed, epochs=1)
    cut = min(cut, len(expected))
    first = ResizableLoader(
        Indices(n),
        bs,
        shuffle=shuffle,
        drop_last=drop_last,
        seed=seed,
        num_workers=before_save,
        multiprocessing_context=FORK,
    )
    it = iter(first)
    head = [next(it).tolist() for _ in range(cut)]
    state = first.state_dict()
    first.close()
    second = ResizableLoader(
        Indices(n),
        bs,
        shuffle=shuffle,
        drop_last=drop_last,
        num_workers=after_load,
        handover=handover,
        multiprocessing_context=FORK,
    )
    second.load_state_dict(state)
    try:
        assert head + run_epoch(second, schedule) == expected
    finally:
        second.close()


@PROPS
@given(
    replicas=st.integers(1, 3),
    per_rank=st.integers(1, 12),
    bs=st.integers(1, 4),
    shuffle=st.booleans(),
    epoch=st.integers(0, 3),
    handover=handovers,
    schedule=schedules,
)
def test_distributed_shards_are_disjoint_complete_and_each_ranks_order_is_kept(
    replicas, per_rank, bs, shuffle, epoch, handover, schedule
):
    n = replicas * per_rank
    seen: list[int] = []
    for rank in range(replicas):
        sampler = DistributedSampler(Indices(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=5)
        reference = DistributedSampler(Indices(n), num_replicas=replicas, rank=rank, shuffle=shuffle, seed=5)
        reference.set_epoch(epoch)
        loader = ResizableLoader(
            Indices(n), bs, sampler=sampler, num_workers=1, handover=handover, multiprocessing_context=FORK
        )
        loader.sampler.set_epoch(epoch)  # as Lightning calls it on the loader's sampler
        try:
            got = [i for b in run_epoch(loader, schedule) for i in b]
        finally:
            loader.close()
        assert got == list(reference)
        seen += got
    assert sorted(seen) == list(range(n))


def test_an_epoch_left_early_stops_its_workers_on_close_and_on_a_new_iter():
    before = live_children()
    loader = ResizableLoader(
        Indices(30),
        2,
        num_workers=2,
        multiprocessing_context=FORK,
        persistent_workers=True,
        handover=0,
        background_start=False,  # so the new pool is up when resize returns
        split_pools=False,  # one pool of 2, which a pool of 1 replaces
    )
    for i, _ in enumerate(loader):
        if i == 2:
            loader.resize(1)  # the old pool is still serving, the new one started
            assert len(live_children() - before) == 3
            break
    assert [b.tolist() for b in loader][0] == [0, 1]  # a new iter() starts the next pass cleanly
    assert len(live_children() - before) == 1  # the persistent pool of the last count is kept
    loader.close()
    assert live_children() <= before


def test_a_resize_requested_from_another_thread_applies_at_the_next_batch():
    import threading

    loader = ResizableLoader(Indices(12), 2, num_workers=0, multiprocessing_context=FORK)
    it = iter(loader)
    got = [next(it).tolist()]
    t = threading.Thread(target=loader.request_resize, args=(2,))
    t.start()
    t.join()
    got += [b.tolist() for b in it]
    assert loader.num_workers == 2
    assert [i for b in got for i in b] == list(range(12))


def test_workers_start_with_one_thread_the_allotted_cores_and_the_users_init():
    cores = [sorted(os.sched_getaffinity(0))[0]] if can_pin() else [0]
    loader = ResizableLoader(
        WorkerView(),
        1,
        num_workers=2,
        collate_fn=lambda samples: samples[0],
        worker_init_fn=tag_worker,
        cores=cores,
        multiprocessing_context=FORK,
    )
    with loader:
        views = list(loader)
    assert {v["threads"] for v in views} == {1}
    assert {v["omp"] for v in views} == {"1"}
    assert {v["tagged"] for v in views} == {"w0", "w1"}
    if can_pin():
        assert all(v["cores"] == cores for v in views)
    assert all(v["pid"] != os.getpid() for v in views)


def test_each_pool_seeds_its_workers_from_the_loaders_seed_not_the_global_rng():
    def seeds() -> list[int]:
        torch.manual_seed(1234)
        loader = ResizableLoader(
            WorkerView(), 1, seed=7, num_workers=1, collate_fn=lambda s: s[0], multiprocessing_context=FORK
        )
        with loader:
            out = [v["seed"] for v in loader]
        return out

    first = seeds()
    torch.randn(10)  # moving the global RNG must not change the workers' seeds
    assert seeds() == first


class RandomDraw(Indices):
    """Each sample is (index, worker pid, worker seed, a random number drawn in the worker), as an
    augmentation draws one."""

    def __getitem__(self, i: int) -> tuple[int, int, int, float]:
        info = torch.utils.data.get_worker_info()
        return i, os.getpid(), info.seed if info else -1, torch.rand(()).item()


def first_draws(samples: list[tuple[int, int, int, float]]) -> dict[int, tuple[int, float]]:
    """Each worker's (seed, first random number), by pid."""
    out: dict[int, tuple[int, float]] = {}
    for _, pid, seed, draw in samples:
        out.setdefault(pid, (seed, draw))
    return out


def run_epoch_of_tuples(loader: ResizableLoader, resize_to: int | None) -> list[tuple[int, int, int, float]]:
    """One epoch of ``RandomDraw`` samples, resized to ``resize_to`` after its second batch."""
    out = []
    for batch in loader:
        out.append(batch)
        if resize_to is not None and len(out) == 2:
            loader.resize(resize_to)
    return out


@pytest.mark.parametrize("resized", [False, True])
def test_every_worker_of_split_pools_draws_random_numbers_of_its_own(resized):
    """4 workers start as pools of 2, 1 and 1 opened at the same batch (at an epoch's start, or at a
    replacing resize from 0): each must get a seed of its own, as in one DataLoader of 4.  The pools'
    generators were seeded alike, so workers 0, 2 and 3 drew the same random numbers (one augmentation
    repeated on three of every four batches)."""
    with ResizableLoader(
        RandomDraw(24),
        1,
        num_workers=0 if resized else 4,
        handover=0,
        collate_fn=lambda s: s[0],
        multiprocessing_context=FORK,
    ) as loader:
        samples = run_epoch_of_tuples(loader, resize_to=4 if resized else None)
    assert [i for i, _, _, _ in samples] == list(range(24))
    workers = first_draws([s for s in samples if s[1] != os.getpid()])
    assert len(workers) == 4
    assert len({seed for seed, _ in workers.values()}) == 4
    assert len({draw for _, draw in workers.values()}) == 4


def test_pin_memory_prefetch_factor_and_a_collate_fn_survive_resizes():
    loader = ResizableLoader(
        Indices(20),
        3,
        num_workers=1,
        pin_memory=True,  # no accelerator here: torch warns and pins nothing, the order must hold
        prefetch_factor=3,
        collate_fn=lambda samples: torch.tensor(samples) * 10,
        handover=1,
        multiprocessing_context=FORK,
    )
    with loader, pytest.warns(UserWarning, match="pin_memory"):
        got = run_epoch(loader, {1: 2, 3: 0, 4: 1})
    assert [i for b in got for i in b] == [10 * i for i in range(20)]


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here")
def test_a_resize_under_forkserver_passes_its_gated_workers_their_gates():
    """The pools a resize starts hold their workers at a gate; forkserver children get it by pickling."""
    loader = ResizableLoader(Indices(40), 2, num_workers=1, multiprocessing_context="forkserver", handover=1)
    with loader:
        got = run_epoch(loader, {2: 3, 6: 1, 12: 2})
    assert got == plain_pass(40, 2, False, False, 0, 1)[0]


GATED_ORPHANS = """
import sys, time
from adlrec.loader import ResizableLoader
from tests.factories import Indices
loader = ResizableLoader(Indices(2000), 1, num_workers=1, multiprocessing_context=sys.argv[1], handover=500,
    fork_server=sys.argv[3] == "zygote")
it = iter(loader)
next(it)
loader.resize(3)  # a pool of 2 woven in 500 batches from now: its workers wait, gated, until then
for _ in range(5):
    next(it)  # each batch the loop takes lets the pool fork one more worker
new = max(loader._pools.live, key=lambda p: p.id)
new.wait_started()
assert not any(new.gate.opened)
time.sleep(float(sys.argv[2]))
running = loader._pools.live[0]
print(*(w.pid for w in new.it._workers), *(w.pid for w in running.it._workers), flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize(
    ("context", "settle_s", "forker"),
    [
        (FORK, 1.0, "self"),  # the workers are at their gates when it dies: their parent pid changes
        (FORK, 0.0, "self"),  # it may die before they get there: they find their training process gone
        (FORK, 1.0, "zygote"),  # their parent, the zygote, ends as the training process dies
        pytest.param(
            "forkserver",
            1.0,
            "self",
            marks=pytest.mark.skipif(
                "forkserver" not in multiprocessing.get_all_start_methods(), reason="no forkserver here"
            ),
        ),
    ],
)
def test_workers_held_at_their_gate_exit_when_the_training_process_dies(context, settle_s, forker):
    """torch's watchdog starts after the gate, so a gated worker must notice its training process's death;
    and under forkserver it watches the fork server, which a killed training process leaves running."""
    pids = pids_left_by_a_killed_trainer(GATED_ORPHANS, context, str(settle_s), forker)
    assert len(pids) == 3  # the 2 held at their gates, and the running pool's 1
    try:  # they check every OWNER_POLL_S
        wait_until(lambda: all(gone(p) for p in pids))
    finally:
        for pid in pids:
            if not gone(pid):
                os.kill(pid, 9)


def test_workers_held_at_their_gate_exit_while_their_killed_training_process_is_not_yet_reaped():
    """A killed process stays a zombie until its parent waits for it (a launcher busy elsewhere, a
    container's init that reaps nothing): to its workers it has ended all the same."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        trainer = subprocess.Popen(
            [sys.executable, "-c", GATED_ORPHANS, FORK, "1.0", "self"], stdout=subprocess.PIPE, text=True
        )
        pids = [int(p) for p in trainer.stdout.readline().split()]
        try:
            trainer.kill()
            wait_until(lambda: gone(trainer.pid))  # a zombie, reaped only at the end of the test
            assert len(pids) == 3 and psutil.Process(trainer.pid).status() == psutil.STATUS_ZOMBIE
            wait_until(lambda: all(gone(p) for p in pids))
        finally:
            for pid in pids:
                if not gone(pid):
                    os.kill(pid, 9)
            trainer.wait(30)
            trainer.stdout.close()


class WorkerNumber(Indices):
    """Each sample is (index, worker id, worker count) as ``get_worker_info()`` says in its worker."""

    def __getitem__(self, i: int) -> torch.Tensor:
        info = torch.utils.data.get_worker_info()
        return torch.tensor([i, info.id, info.num_workers] if info else [i, -1, 0])


@pytest.mark.parametrize(("smaller", "persistent"), [(1, False), (2, False), (3, False), (1, True)])
def test_an_epoch_starts_its_workers_as_pools_that_any_shrink_drops_starting_nothing(smaller, persistent):
    before = live_children()
    with ResizableLoader(
        WorkerNumber(64), 1, num_workers=4, persistent_workers=persistent, multiprocessing_context=FORK
    ) as loader:
        it = iter(loader)
        got = [next(it)[0].tolist() for _ in range(8)]
        assert [p.workers for p in loader._pools.live] == [2, 1, 1]
        epoch_workers = live_children() - before
        assert len(epoch_workers) == 4 and {(w, n) for _, w, n in got} == {(w, 4) for w in range(4)}
        loader.resize(smaller)
        for _ in range(40):
            got.append(next(it)[0].tolist())
            assert live_children() - before <= epoch_workers  # a drop: no process started
        # the dropped pools' workers exited mid-epoch (with persistent_workers too: only the pools that end
        # the epoch wait for its end, to be kept)
        wait_until(lambda: len(live_children() - before) == smaller)
        got += [b[0].tolist() for b in it]
        assert [i for i, _, _ in got] == list(range(64))
        assert loader.serving_workers == smaller
        assert len({w for _, w, _ in got[-8:]}) == smaller  # the kept pools' workers serve the end
    assert live_children() <= before


def test_woven_pools_number_their_workers_as_one_dataloader_would():
    with ResizableLoader(
        WorkerNumber(60), 1, num_workers=2, worker_init_fn=tag_worker, multiprocessing_context=FORK, handover=0
    ) as loader:
        it = iter(loader)
        first = [next(it)[0].tolist() for _ in range(6)]
        assert {(w, n) for _, w, n in first} == {(0, 2), (1, 2)}  # two pools of 1, numbered 0 and 1 of 2
        loader.resize(5)  # a pool of 3 joins them: its workers are 2, 3 and 4 of 5
        rest = [b[0].tolist() for b in it]
        assert {(w, n) for _, w, n in rest[-10:]} == {(0, 2), (1, 2), (2, 5), (3, 5), (4, 5)}
    with ResizableLoader(
        WorkerView(),
        1,
        num_workers=4,
        worker_init_fn=tag_worker,
        collate_fn=lambda s: s[0],
        multiprocessing_context=FORK,
    ) as loader:
        assert {v["tagged"] for v in loader} == {"w0", "w1", "w2", "w3"}  # the user's init sees the same numbers


def test_persistent_pools_that_finish_an_epoch_after_a_resize_are_not_kept_for_the_next():
    """A handover longer than the rest of the epoch leaves the old pools to finish it, and the new count
    applies from the next epoch: the old pools, of the old count, are stopped at the epoch's end, not kept."""
    with ResizableLoader(
        Indices(8), 2, num_workers=2, persistent_workers=True, handover=100, multiprocessing_context=FORK
    ) as loader:
        before = live_children()
        for i, _ in enumerate(loader, start=1):
            if i == 1:
                loader.resize(3)
                assert loader.num_workers == 3 and [p.workers for p in loader._pools.live] == [1, 1]
        assert live_children() <= before and not loader._pools.kept
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4, 5], [6, 7]]
        assert loader.serving_workers == 3


@pytest.mark.parametrize(
    ("shrink", "grow", "kept", "new"), [(1, 3, {2}, {0, 1}), (1, 2, {2}, {0}), (3, 4, {0, 1, 2}, {3})]
)
def test_after_a_drop_a_grow_numbers_its_workers_apart_from_the_kept_ones(shrink, grow, kept, new):
    # 4 workers as 2+1+1 numbered (0, 1), 2 and 3; a shrink to 1 keeps the oldest pool of 1 (worker 2 of 4)
    with ResizableLoader(WorkerNumber(120), 1, num_workers=4, multiprocessing_context=FORK, handover=0) as loader:
        it = iter(loader)
        got = [next(it)[0].tolist() for _ in range(8)]
        loader.resize(shrink)
        while loader.serving_workers != shrink:
            got.append(next(it)[0].tolist())
        got += [next(it)[0].tolist() for _ in range(8)]
        assert {w for _, w, _ in got[-shrink:]} == kept
        loader.resize(grow)
        rest = [b[0].tolist() for b in it]
        serving = {(w, n) for _, w, n in rest[-2 * grow :]}
        assert len(serving) == grow  # every serving worker has a number of its own
        assert {w for w, _ in serving} == kept | new  # the new pool's: the lowest the kept workers leave free
    assert [i for i, _, _ in got + rest] == list(range(120))
