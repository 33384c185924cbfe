"""Ids: unique across threads and across a fork, though random bits are read in pools."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from graph import is_safe_id, new_id


def test_ids_made_in_threads_are_all_different() -> None:
    made: list[list[str]] = [[] for _ in range(4)]

    def make(into: list[str]) -> None:
        into.extend(new_id() for _ in range(3_000))

    threads = [threading.Thread(target=make, args=(into,)) for into in made]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    every = [i for into in made for i in into]
    assert len(set(every)) == len(every) == 12_000
    assert all(len(i) == 26 and is_safe_id(i) for i in every)


@pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "darwin", reason="needs fork")
def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    new_id()  # the parent's pool holds unread random bits now
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child
        os.write(writing, "".join(new_id() for _ in range(3)).encode())
        os._exit(0)
    os.close(writing)
    os.waitpid(child, 0)
    with os.fdopen(reading) as pipe:
        theirs = pipe.read()
    ours = [new_id() for _ in range(3)]
    assert len(theirs) == 78
    assert {theirs[k * 26 + 10 : (k + 1) * 26] for k in range(3)}.isdisjoint(i[10:] for i in ours)
