"""The symlink and race suite: every file operation on the state folder (offload write,
atomic write, records append and read, delete, gc) runs with a symlink, a FIFO, or a
file-for-a-folder (folder-for-a-file) planted at each path component, first before the
operation, then swapped in just before each of its system calls in turn (between every
check and its use). Whatever happens, nothing outside the state folder changes, nothing
blocks, and a failure is a clear ``ContextError`` or ``OSError``.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from _faults import EVERY_CALL, Point, each_fault, large, snapshot

from context import ContextError, collect_garbage, read_jsonl, records_path

# internal: the state folder's writers and removal, raced directly
from context._store._files import append_lines, write_text_once
from context._store._removal import remove_under
from graph import ConversationGraph, MemoryStore

SECRET = b"ssh-ed25519 AAAA... never touched\n"
TEXT = "output line\n" * (2_000 if large() else 200)


class Hung(BaseException):
    """Raised by the alarm: no ``except OSError`` on the way may swallow it."""


@pytest.fixture(autouse=True)
def never_hangs() -> Iterator[None]:
    """Opening a FIFO for reading (or writing) blocks forever: fail instead."""

    def hung(*_: object) -> None:
        raise Hung("blocked on something planted in the state folder")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class Scene:
    folder: Path
    state: Path
    outside: Path
    store: MemoryStore
    node: str
    component: str
    plant: str
    before: dict[str, str] = field(default_factory=dict)


def _scene(folder: Path, component: str, plant: str) -> Scene:
    outside = folder / "outside"
    for sub in ("s1/sub", "gone/sub"):
        (outside / sub).mkdir(parents=True)
    (outside / "authorized_keys").write_bytes(SECRET)
    (outside / "s1.jsonl").write_bytes(SECRET)
    (outside / "s1" / "N.txt").write_bytes(SECRET)
    store = MemoryStore()
    node = ConversationGraph(store, "s1").append({"role": "user", "content": "hi"}).id
    state = folder / "state"
    live = state / "tool_results" / "s1"
    (live / "sub").mkdir(parents=True)
    (live / f"{node}.txt").write_text("kept")
    (live / "N.txt").write_text("old")
    (live / "A.txt").write_text(TEXT)  # what the atomic write writes: it reads to compare
    (live / "sub" / "x").write_text("x")
    (state / "tool_results" / "gone" / "sub").mkdir(parents=True)
    (state / "tool_results" / "gone" / "sub" / "y").write_text("y")
    (state / "records").mkdir()
    (state / "records" / "s1.jsonl").write_text('{"not": "a record"}\n')
    (state / "records" / "gone.jsonl").write_text("")
    scene = Scene(folder, state, outside, store, node, component, plant)
    scene.before = snapshot(outside)
    return scene


def _plant(scene: Scene) -> None:
    """Put the planted thing at ``component``, moving what was there aside (inside the
    state folder, so nothing is lost and nothing outside changes)."""
    path = scene.state / scene.component
    was_folder = path.is_dir() and not path.is_symlink()
    if path.exists() or path.is_symlink():
        os.rename(path, path.with_name(path.name + ".moved"))
    path.parent.mkdir(parents=True, exist_ok=True)
    if scene.plant == "link":
        counterpart = scene.outside / scene.component.split("/")[-1]
        if not counterpart.exists():
            counterpart = scene.outside if was_folder else scene.outside / "authorized_keys"
        path.symlink_to(counterpart, target_is_directory=counterpart.is_dir())
    elif scene.plant == "fifo":
        os.mkfifo(path)
    elif was_folder:
        path.write_text("a file where a folder was")
    else:
        path.mkdir()


# operation name -> (the operation, the components it walks)
OPERATIONS: dict[str, tuple[Callable[[Scene], object], list[str]]] = {
    "offload-write": (
        lambda s: write_text_once(s.state, ["tool_results", "s1"], "N.txt", TEXT),
        ["tool_results", "tool_results/s1", "tool_results/s1/N.txt"],
    ),
    "records-append": (
        lambda s: append_lines(s.state, ["records"], "s1.jsonl", [b'{"a": 1}', b'{"b": 2}']),
        ["records", "records/s1.jsonl"],
    ),
    "records-read": (
        lambda s: list(read_jsonl(records_path(s.state, "s1"))),
        ["records", "records/s1.jsonl"],
    ),
    "delete": (
        lambda s: (
            remove_under(s.state, ["tool_results"], "s1"),
            remove_under(s.state, ["records"], "s1.jsonl"),
        ),
        ["tool_results", "tool_results/s1", "tool_results/s1/sub", "records/s1.jsonl"],
    ),
    "gc": (
        lambda s: collect_garbage(s.store, s.state),
        ["tool_results", "tool_results/s1", "tool_results/gone", "tool_results/gone/sub"],
    ),
}
PLANTS = ["link", "fifo", "swap-kind"]
CASES = [
    pytest.param(op, component, plant, id=f"{op}:{component}:{plant}")
    for op, (_, components) in OPERATIONS.items()
    for component in components
    for plant in PLANTS
]


def _judge(scene: Scene, raised: BaseException | None) -> None:
    assert raised is None or isinstance(raised, ContextError | OSError), repr(raised)
    assert snapshot(scene.outside) == scene.before


@pytest.mark.filterwarnings("ignore:.*skipping a line that is not a compaction record")
@pytest.mark.parametrize(("op", "component", "plant"), CASES)
def test_planted_before_the_operation(tmp_path: Path, op: str, component: str, plant: str) -> None:
    act, _ = OPERATIONS[op]
    scene = _scene(tmp_path, component, plant)
    _plant(scene)
    raised: BaseException | None = None
    try:
        act(scene)
    except Exception as error:
        raised = error
    _judge(scene, raised)


@pytest.mark.filterwarnings("ignore:.*skipping a line that is not a compaction record")
@pytest.mark.parametrize(("op", "component", "plant"), CASES)
def test_swapped_in_before_each_system_call(
    tmp_path: Path, op: str, component: str, plant: str
) -> None:
    act, _ = OPERATIONS[op]

    def swap(scene: Scene, point: Point) -> None:
        _plant(scene)

    fired = each_fault(
        tmp_path,
        lambda folder: _scene(folder, component, plant),
        act,
        lambda scene, faults: _judge(scene, faults.raised),
        kinds=EVERY_CALL,
        before=swap,
    )
    assert len(fired) >= 3  # the operation was interrupted at every one of its calls
