"""The fork pacer's permits: pure bookkeeping between the loop's thread and the threads starting pools."""

from __future__ import annotations

import threading

from adlrec.loader.pacing import ForkPacer


def test_a_released_pools_starts_take_no_permit_from_the_pools_still_paced():
    pacer = ForkPacer()
    go, started, finish = threading.Event(), threading.Event(), threading.Event()

    def three_starts() -> None:
        go.wait()
        for _ in range(3):
            pacer.turn()
        started.set()
        finish.wait()  # alive until the end: a new thread could otherwise reuse its ident, released too

    released = threading.Thread(target=three_starts, daemon=True)
    released.start()
    pacer.release(released)  # its pool's switch came: it starts the rest of its workers at once
    go.set()
    assert started.wait(30) and pacer.started == 0
    paced = threading.Thread(target=pacer.turn, daemon=True)  # another pool of the same resize
    pacer.allow_at(7)  # the loop takes a batch: one permit, for it
    paced.start()
    paced.join(30)
    finish.set()
    assert not paced.is_alive() and pacer.started == 1
