"""Two engines of one session making layers at the same moment give them two handles.

A layer's handle (``L<k>``) is picked while a render or an operation decides, from what
the engine has read; the graph refuses a handle another writer stored meanwhile (under the
session's lock, in the layer's transaction) and the engine decides once more, so the
prompt it returns names the handle its layer was stored under. Two threads, each engine's
summarizer holding at a barrier until both have decided up to their summaries, make both
pick the same ``L1`` every time (no timing involved); two processes collapsing at once end
with two handles whichever way they interleave."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from _layer_helpers import Counting, clock, session
from test_context_commit import race, rounds

from context import ContextEngine, Policy, Rendered, SummaryRequest, SummaryResult
from graph import ConversationGraph, SQLStore, layer_handle

NAMED = re.compile(r'expand_layer\("(L[1-9][0-9]*)"\)')


class AtOnce(Counting):
    """Its first summary waits until the other engine's summarizer is asked too."""

    def __init__(self, both: threading.Barrier) -> None:
        super().__init__()
        self.both = both

    def summarize(self, request: SummaryRequest) -> SummaryResult:
        if not self.requests:
            self.both.wait()
        return super().summarize(request)


def _engines(url: str, tmp_path: Path, policy: Policy, budget: int) -> list[ContextEngine]:
    both = threading.Barrier(2, timeout=60)
    return [
        ContextEngine(ConversationGraph.open(url, session="s"), policy, budget=budget,
                      clock=clock, summarizer=AtOnce(both), state_dir=tmp_path / f"e{i}")
        for i in range(2)
    ]  # fmt: skip


def _at_once(*work: object) -> list[object]:
    """Runs each callable in its own thread; what each returned (or raised)."""
    out: list[object] = [None] * len(work)

    def run(index: int) -> None:
        try:
            out[index] = work[index]()  # type: ignore[operator]
        except BaseException as error:  # reported by the caller
            out[index] = error

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(work))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def _stored(url: str) -> list[str]:
    return [layer_handle(i) for i in ConversationGraph.open(url, session="s").layers()]


def _shown_as_stored(url: str, prompt: Rendered) -> list[str]:
    """The handles a prompt's collapsed spans name; each span is, to the byte, the stored
    layer its handle names (a handle picked again never shows the first pick)."""
    stored = {layer_handle(i): i.layer.replacement for i in ConversationGraph.open(url, session="s").layers()}  # fmt: skip
    named = []
    for message in prompt.messages:
        found = NAMED.search(str(message.get("content")))
        if found is not None:
            named.append(found.group(1))
            assert message in stored[found.group(1)]
    return named


def test_two_engines_collapsing_at_once_store_two_handles(store_url: str, tmp_path: Path) -> None:
    rounds = session(ConversationGraph.open(store_url, session="s"), 12)
    one, other = _engines(store_url, tmp_path, Policy(), 100_000)
    made = _at_once(
        lambda: one.collapse(rounds[1][0], rounds[3][1]),
        lambda: other.collapse(rounds[6][0], rounds[8][1]),
    )
    assert not [m for m in made if isinstance(m, BaseException)], made
    assert sorted(_stored(store_url)) == ["L1", "L2"]
    # the one that picked again kept its summary (decided again, not summarized again)
    assert [len(e.summarizer.requests) for e in (one, other)] == [1, 1]  # type: ignore[attr-defined]
    for engine in (one, other):
        assert sorted(_shown_as_stored(store_url, engine.render())) == ["L1", "L2"]


def test_two_engines_rendering_at_once_store_each_handle_once(
    store_url: str, tmp_path: Path
) -> None:
    session(ConversationGraph.open(store_url, session="s"), 24, words=60)
    policy = Policy(cascade=("collapse",), always=(), collapse_keep_recent=4)
    one, other = _engines(store_url, tmp_path, policy, 3_000)
    rendered = _at_once(one.render, other.render)
    assert not [r for r in rendered if isinstance(r, BaseException)], rendered
    stored = _stored(store_url)
    assert stored and len(stored) == len(set(stored))
    for prompt in rendered:
        assert isinstance(prompt, Rendered)
        assert _shown_as_stored(store_url, prompt)


def test_two_processes_collapsing_apart_at_once_store_two_handles(
    store_url: str, tmp_path: Path
) -> None:
    g = ConversationGraph(SQLStore(store_url), "s1")
    session(g, 12)
    r = rounds(g)
    said = race(store_url, tmp_path, ["collapse", r[1][0], r[3][0]], ["collapse", r[7][0], r[9][0]])
    assert said == ["ok", "ok"]  # whichever picked a taken handle decided once more
    g.refresh()
    assert sorted(layer_handle(i) for i in g.layers()) == ["L1", "L2"]
