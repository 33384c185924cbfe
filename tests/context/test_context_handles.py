"""A handle once shown names the same thing, in the same words, in every later render
(issue 34, item 2): renders under changing budgets, with rollbacks between them, never
give a layer's handle to another layer or change its banner, and every node handle a
placeholder shows resolves to the node it stands for."""

from __future__ import annotations

import re

from _context_helpers import start
from _layer_helpers import clock
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_context_layer_properties import rounds, state_dir

from context import COLLAPSE_FIRST_CASCADE, ContextEngine, Policy
from graph import ConversationGraph, layer_handle, resolve_ref, text_of

NAMED = re.compile(r'(?:read_output|expand_function)\("((?:n|fn_)[0-9]+)"')


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(40, 14_000), min_size=8, max_size=20),
    budgets=st.lists(st.sampled_from([1_500, 2_500, 4_000, 8_000]), min_size=2, max_size=5),
    undo=st.lists(st.integers(0, 9), max_size=3),
)
def test_a_handle_once_shown_never_changes(
    sizes: list[int], budgets: list[int], undo: list[int]
) -> None:
    g = ConversationGraph.memory("s1")
    start(g)
    rounds(g, sizes)
    policy = Policy.claude_code(
        None, cascade=COLLAPSE_FIRST_CASCADE, collapse_min_rounds=2, collapse_max_rounds=3
    )
    banners: dict[str, tuple[str, str]] = {}
    with state_dir() as folder:
        for turn, budget in enumerate(budgets):
            engine = ContextEngine(g, policy, budget=budget, state_dir=folder, clock=clock)
            rendered = engine.render()
            for message, source in zip(rendered.messages, rendered.sources, strict=True):
                text = text_of(message.get("content"))
                if source.layer is not None:
                    handle = layer_handle(engine.layer(source.layer))
                    if f'expand_layer("{handle}")' in text:
                        shown = (source.layer, text)
                        assert banners.setdefault(handle, shown) == shown
                for found in NAMED.findall(text):
                    assert resolve_ref(g.state, found) in g  # names a node of this session
                if source.layer is None and source.variant in ("offloaded", "cleared", "reduced"):
                    node = g.get(source.nodes[0])  # the placeholder names its own node
                    assert f'read_output("n{node.seq}"' in text
            active = engine.layers(active=True)
            if turn < len(undo) and active:
                engine.rollback(active[undo[turn] % len(active)].id)
            engine.close()
    event(f"layers shown: {min(len(banners), 3)}+, rolled back: {min(len(undo), 1)}+")
    handles = [layer_handle(info) for info in g.layers()]
    assert len(set(handles)) == len(handles)  # rolled back or not, each its own
    assert all(re.fullmatch(r"L[0-9]+", handle) for handle in handles)
