"""The closed name sets stay equal to what they name."""

from __future__ import annotations

import typing

import pytest

import context
from graph import ConversationGraph


def test_tier_names_are_the_registry() -> None:
    assert typing.get_args(context.TierName) == tuple(context.TIERS) == context.TIER_NAMES
    assert set(typing.get_args(context.RecordTier)) == {*context.TIER_NAMES, "provider", "rollback"}


def test_layer_kinds_are_the_kinds_context_makes() -> None:
    assert typing.get_args(context.LayerKind) == context.LAYER_KINDS
    assert set(context.LAYER_KINDS) == {"collapse", "compact", "provider"}


def test_result_variants_are_variants() -> None:
    variants = set(typing.get_args(context.Variant))
    assert set(context.RESULT_VARIANTS.values()) <= variants


def test_as_tier_and_kind_close_open_strings() -> None:
    assert context.as_tier("compact") == "compact"
    assert context.as_tier("my_tier") is None
    assert context.as_layer_kind("note") is None
    assert context.as_record_tier("rollback") == "rollback"
    assert context.as_record_tier("render") is None


def test_policy_refuses_a_tier_outside_the_names() -> None:
    with pytest.raises(context.PolicyError, match="unknown tier"):
        context.Policy(cascade=("offload", "compacts"))


def test_a_layer_keeps_its_token_count_key(store_url: str) -> None:
    """A layer's messages are counted under ``layer_id:layer:index``, as stored before."""
    graph = ConversationGraph.open(store_url, session="s")
    engine = context.ContextEngine(graph)
    graph.append({"role": "user", "content": "hello"})
    info = graph.add_layer("collapse", [graph.head], [{"role": "user", "content": "summary"}])
    engine.render()
    assert engine.cache.get(f"{info.id}:layer:0") is not None
