"""Hostile names and a session deleted under a writer: ids portable to every platform,
GraphML that always parses, and a clear error naming the session."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from graph import ConversationGraph, StoreError, export_graphml, is_safe_id

WINDOWS_DEVICES = {"CON", "PRN", "AUX", "NUL"} | {
    f"{port}{n}" for port in ("COM", "LPT") for n in range(10)
}


@pytest.mark.parametrize(
    "name",
    ["CON", "con", "NUL.txt", "nul.tar.gz", "Aux", "COM1", "lpt9.log", "x.", "a..b", "..", "."],
)
def test_names_some_platform_cannot_hold_are_not_safe(name: str) -> None:
    assert not is_safe_id(name)


@pytest.mark.parametrize("name", ["CONSOLE", "nullable", "COM10", "x.y", "auxiliary.txt", "s1"])
def test_names_near_reserved_ones_stay_safe(name: str) -> None:
    assert is_safe_id(name)


@given(st.text(alphabet="abcCONULPRTMX0123456789._-", min_size=1, max_size=12))
def test_a_safe_id_is_one_portable_path_segment(name: str) -> None:
    if is_safe_id(name):
        assert name.split(".")[0].upper() not in WINDOWS_DEVICES
        assert not name.endswith(".") and ".." not in name and name[0].isalnum()


def test_graphml_of_control_characters_in_names_parses(tmp_path: Path) -> None:
    g = ConversationGraph.memory()
    name = "bad\x01name\x1b[31m\x00\x0b"
    with g.function(name):
        g.append({"role": "user", "content": "inside"})
    out = tmp_path / "s.graphml"
    export_graphml(g.state, out)
    ET.parse(out)  # well-formed
    names = [d.get("name") for _, d in nx.read_graphml(out).nodes(data=True)]
    assert "bad\\u0001name\\u001b[31m\\u0000\\u000b" in names
    assert g.nodes()[0].payload.name == name  # type: ignore[union-attr]


def test_cli_export_graphml_of_a_hostile_name_parses(tmp_path: Path) -> None:
    from openprogram.cli import main

    url = f"sqlite:///{tmp_path}/op.db"
    g = ConversationGraph.open(url, session="s1")
    with g.function("tab\there\x07bell"):
        g.append({"role": "user", "content": "x"})
    g.close()
    out = tmp_path / "s1.graphml"
    assert main(["--db", url, "export", "s1", str(out), "--format", "graphml"]) == 0
    ET.parse(out)


def test_appending_to_a_session_another_process_deleted_names_it(store_url: str) -> None:
    writer = ConversationGraph.open(store_url, session="s1")
    writer.append({"role": "user", "content": "hi"})
    other = ConversationGraph.open(store_url, session="s1")
    other.store.delete_session("s1")
    with pytest.raises(StoreError, match=r"session 's1' is not in .*nothing was appended"):
        writer.append({"role": "assistant", "content": "lost?"})
    deleted = r"session 's1' is not in .*nothing was appended"
    with pytest.raises(StoreError, match=deleted), writer.batch():
        writer.append({"role": "assistant", "content": "lost?"})
    writer.close()
    other.close()


def test_appending_to_a_deleted_memory_session_names_it() -> None:
    g = ConversationGraph.memory("s1")
    g.append({"role": "user", "content": "hi"})
    g.store.delete_session("s1")
    with pytest.raises(StoreError, match="session 's1' is not in memory:"):
        g.append({"role": "assistant", "content": "lost?"})
