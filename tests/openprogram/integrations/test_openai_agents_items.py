"""The Agents SDK session's item list is stored so that a write costs what it adds (issue 35,
item 4): each run's input and answer are appended as small chunks beside a base list written
whole only when the list changes other than at its end, and every reader (a reopened session,
another process, an import) reads back exactly the items the SDK wrote."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("agents")

from _agents_fakes import Answering
from agents import Agent, set_tracing_disabled

from openprogram import Session
from openprogram.integrations.openai_agents import OpenProgramSession, to_entries

LIVE, ADDED, ITEMS = "openai_agents.live", "openai_agents.live.added", "openai_agents.items"


@pytest.fixture(autouse=True)
def _no_tracing() -> Iterator[None]:
    set_tracing_disabled(True)
    yield


def _history(rounds: int) -> list[Any]:
    items: list[Any] = []
    for n in range(rounds):
        items += [{"role": "user", "content": f"q{n}"}, {"role": "assistant", "content": f"a{n}"}]
    return items


def _items(db: Path) -> list[Any]:
    return asyncio.run(OpenProgramSession(Session(db, "s")).get_items())


def test_a_run_appends_what_it_adds_and_readers_get_the_sdks_items(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    session = Session(db, "s")
    memory = OpenProgramSession(session)
    agent = Agent("helper", instructions="Be brief.", model=Answering("Noted."))
    asyncio.run(memory.add_items(_history(50)))
    base = session.store.get_values("s", LIVE, ["s"])["s"]
    assert len(json.loads(base)["keys"]) == 100
    for n in range(3):
        assert memory.run_sync(agent, f"next {n}").final_output == "Noted."
    assert session.store.get_values("s", LIVE, ["s"])["s"] == base  # the base not written again
    chunks = [json.loads(v) for v in session.store.get_values("s", ADDED).values()]
    assert sorted(len(chunk) for chunk in chunks) == [1, 1, 1, 1, 1, 1]  # input, answer: 3 runs
    items = asyncio.run(memory.get_items())
    assert len(items) == 106
    assert items[100] == {"role": "user", "content": "next 0"}
    assert _items(db) == items  # a reopened session reads base and chunks
    assert asyncio.run(memory.pop_item()) == items[-1]  # a pop writes a new base
    assert _items(db) == items[:-1]
    assert memory.run_sync(agent, "after the pop").final_output == "Noted."
    assert _items(db) == asyncio.run(memory.get_items())
    assert len(_items(db)) == 107


def test_many_appends_roll_into_a_new_base(tmp_path: Path) -> None:
    db = tmp_path / "op.db"
    memory = OpenProgramSession(Session(db, "s"))
    items = _history(70)

    async def one_at_a_time() -> None:
        for item in items:
            await memory.add_items([item])

    asyncio.run(one_at_a_time())
    assert asyncio.run(memory.get_items()) == items
    assert _items(db) == items
    stored = Session(db, "s").store.get_values("s", LIVE, ["s"])["s"]
    assert 0 < len(json.loads(stored)["keys"]) < len(items)  # rolled over once: a new base


def test_a_list_stored_whole_before_chunks_is_read(tmp_path: Path) -> None:
    """A database written before the chunks holds the list as one JSON array of keys."""
    db = tmp_path / "op.db"
    session = Session(db, "s")
    items = _history(2)
    keys = [
        hashlib.sha256(json.dumps(i, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
        for i in items
    ]
    session.store.put_values(
        "s", ITEMS, {k: json.dumps(i) for k, i in zip(keys, items, strict=True)}
    )
    session.store.put_values("s", LIVE, {"s": json.dumps(keys)})
    memory = OpenProgramSession(session)
    assert asyncio.run(memory.get_items()) == items
    asyncio.run(memory.add_items([{"role": "user", "content": "more"}]))
    assert _items(db) == [*items, {"role": "user", "content": "more"}]


def test_each_read_is_a_copy_of_its_own(tmp_path: Path) -> None:
    """``get_items`` parses each read from the items' JSON: what a reader changes (the SDK
    normalizes what it reads) never reaches the stored list or another read, an item the
    list holds twice comes back as two objects, and a run sees the list as stored."""
    memory = OpenProgramSession(Session(tmp_path / "op.db", "s"))
    nested = {
        "id": "m",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "a", "annotations": []}],
    }
    items = [{"role": "user", "content": "q"}, nested, {"role": "user", "content": "q"}]
    asyncio.run(memory.add_items(items))
    read = asyncio.run(memory.get_items())
    assert read == items and read[0] is not read[2]
    read[0]["content"] = "changed"
    read[1]["content"][0]["text"] = "changed"
    assert asyncio.run(memory.get_items()) == items
    assert asyncio.run(memory.get_items(limit=1)) == items[2:]
    memory.run_sync(Agent("a", model=Answering("Noted.")), "next")
    assert _items(tmp_path / "op.db")[:3] == items


KINDS = st.sampled_from(["user", "assistant", "call", "output", "reasoning"])


def _item(kind: str, n: int) -> dict[str, Any]:
    made: dict[str, dict[str, Any]] = {
        "user": {"role": "user", "content": f"q{n}"},
        "assistant": {"role": "assistant", "content": f"a{n}"},
        "call": {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"},
        "output": {"type": "function_call_output", "call_id": f"c{n - 1}", "output": "v"},
        "reasoning": {"type": "reasoning", "id": f"rs{n}", "summary": []},
    }
    return made[kind]


@settings(max_examples=25, deadline=None, database=None)
@given(st.lists(st.tuples(KINDS, st.booleans()), min_size=1, max_size=12))
def test_items_added_in_any_chunks_store_what_the_whole_list_does(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[tuple[str, bool]]
) -> None:
    """Appends convert only what they add, with the last turn's assistant-side items when
    they continue it: written in any chunks, a list is kept as the same entries as the list
    converted at once (a turn's calls one assistant message either way) and reads back the
    same."""
    items = [_item(kind, n) for n, (kind, _) in enumerate(kinds)]
    chunked = OpenProgramSession(Session(tmp_path_factory.mktemp("c") / "op.db", "s"))
    chunk: list[Any] = []
    for item, (_, cut) in zip(items, kinds, strict=True):
        chunk.append(item)
        if cut:
            asyncio.run(chunked.add_items(chunk))
            chunk = []
    if chunk:
        asyncio.run(chunked.add_items(chunk))
    assert asyncio.run(chunked.get_items()) == items
    # internal: the entries the session keeps for its list, against a whole conversion
    kept = chunked._entries
    assert kept is not None
    assert [(e.message, e.original, e.meta, e.label) for e in kept] == [
        (e.message, e.original, e.meta, e.label) for e in to_entries(items)
    ]
