"""`openprogram view` as a web app, through its HTTP face (issue 35): a rollback answers
303 to its result (a reload re-posts nothing) and 409 when it conflicts, an imported
session says how to replay it, pages past the last are not found, prompts over their
budget are flagged, numbers read one way, the legend's colours are told apart, and a
search hit says how the last prompt shows its node."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _scrub_helpers import SECRET, leaky, scrub_elsewhere
from starlette.testclient import TestClient

from context import LAYER_TOTALS, BudgetFloorWarning, ContextEngine, Policy
from graph import ConversationGraph, dispose_engines
from openprogram import Session, llm
from openprogram.cli import main
from openprogram.testing import TestModel, tool_call
from openprogram.view import COOKIE, Viewer, create_app
from tests.openprogram._colours import distance

HOST = "127.0.0.1:9"


def _rounds(path: Path, session: str, rounds: int = 14) -> list[str]:
    g = ConversationGraph.open(path, session=session)
    g.append({"role": "system", "content": "You are terse."})
    g.append({"role": "user", "content": "Find why /export is slow."})
    assistants = []
    for i in range(rounds):
        call = {"id": f"c{i}", "type": "function", "function": {"name": "Read", "arguments": "{}"}}
        a = g.append({"role": "assistant", "content": f"reading part_{i}.py", "tool_calls": [call]})
        assistants.append(a.id)
        g.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"def fn_{i}(): ...\n" * 40})
    g.close()
    return assistants


def _wide(path: Path) -> str:
    """A collapse over 10,022 short messages: a count that needs its separator."""
    g = ConversationGraph.open(path, session="wide")
    with g.batch():
        g.append({"role": "user", "content": "go"})
        ids = [
            g.append({"role": "assistant" if i % 2 else "user", "content": f"m{i}"}).id
            for i in range(10_050)
        ]
    engine = ContextEngine(g, Policy(), budget=100_000)
    layer = engine.collapse(ids[1], ids[10_020]).id
    engine.close()
    g.close()
    return layer


def _over_the_floor(path: Path) -> None:
    """A session whose system prompt alone is over its budget: the one way a prompt is
    still sent over it (the demo's now fit), which the warning and the receipt say."""
    model = TestModel(["noted", "noted again"])
    rules = "Follow the house rules of this repository before any change. " * 60
    with (
        pytest.warns(BudgetFloorWarning),
        Session(str(path), "floor", model=model, system=rules, budget=400),
    ):
        llm("What changed in the export path?")
        llm("And in the import path?")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The offline demo, a session with a collapse layer, and an imported trace."""
    folder = tmp_path_factory.mktemp("view-app")
    path = folder / "agent.db"
    assert main(["demo", "--db", str(path)]) == 0
    layers = {}
    for session in ("layered", "rolling"):
        assistants = _rounds(path, session)
        g = ConversationGraph.open(path, session=session)
        engine = ContextEngine(g, Policy(), budget=100_000)
        layers[session] = engine.collapse(assistants[1], assistants[6]).id
        engine.close()
        g.close()
    layers["wide"] = _wide(path)
    trace = folder / "chat.json"
    trace.write_text(json.dumps([
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": "one file: a.py"},
    ]))  # fmt: skip
    assert main(["--db", str(path), "import", str(trace), "--session", "imported"]) == 0
    _over_the_floor(path)
    dispose_engines()
    return {"path": str(path), "layer": layers["layered"], "rolling": layers["rolling"],
            "wide": layers["wide"]}  # fmt: skip


@pytest.fixture()
def client(db: dict[str, Any]) -> Iterator[TestClient]:
    app = create_app(Viewer(db["path"], None, allow_write=True), token="t", hosts={HOST})
    with TestClient(app, base_url=f"http://{HOST}") as client:
        client.cookies.set(COOKIE, "t")
        client.headers["x-csrf"] = app.csrf
        yield client
    dispose_engines()


def _demo(client: TestClient) -> str:
    rows = re.findall(r'<tr data-id="([^"]+)">', client.get("/").text)
    return next(r for r in rows if r not in ("layered", "rolling", "imported", "wide", "floor"))


def test_a_rollback_answers_303_to_its_result_and_409_when_done_already(
    client: TestClient, db: dict[str, Any]
) -> None:
    at = f"/s/rolling/layer/{db['rolling']}"
    assert client.get(f"{at}/rolled-back").status_code == 404  # not rolled back yet
    csrf = client.headers["x-csrf"]
    posted = client.post(f"{at}/rollback", data={"csrf": csrf}, follow_redirects=False)
    assert posted.status_code == 303
    assert posted.headers["location"] == f"{at}/rolled-back"
    result = client.get(posted.headers["location"])
    assert result.status_code == 200
    assert db["rolling"] in result.text and 'id="after-tokens"' in result.text.replace("'", '"')
    assert client.get(posted.headers["location"]).status_code == 200  # a reload: a GET
    again = client.post(f"{at}/rollback", data={"csrf": csrf}, follow_redirects=False)
    assert again.status_code == 409 and "already" in again.text
    assert client.post("/s/rolling/layer/nope/rollback", data={"csrf": csrf}).status_code == 404


def test_an_imported_session_says_how_to_replay_it(client: TestClient) -> None:
    page = client.get("/s/imported")
    assert page.status_code == 200
    assert 'id="replay-hint"' in page.text.replace("'", '"')
    assert "openprogram replay TRACE --db" in page.text


def test_a_page_past_the_last_is_not_found(client: TestClient, db: dict[str, Any]) -> None:
    session = _demo(client)
    first = client.get(f"/s/{session}?page=0")
    assert first.status_code == 200
    for view in ("", "/nodes"):
        assert client.get(f"/s/{session}{view}?page=999").status_code == 404, view
        assert client.get(f"/s/{session}{view}?page=-1").status_code == 404, view
        assert client.get(f"/s/{session}{view}?page=x").status_code == 404, view
    assert client.get("/s/layered/nodes?page=0").status_code == 200


def _bars(client: TestClient, session: str) -> list[tuple[str, str, str]]:
    page = client.get(f"/s/{session}").text
    found = re.findall(r'<a href="([^"]+)" class="bar( over)?"[^>]*><title>([^<]*)</title>', page)
    assert found
    return found


def test_prompts_over_their_budget_are_flagged(client: TestClient) -> None:
    demo = _bars(client, _demo(client))
    assert not [title for _, flag, title in demo if flag]  # the demo keeps its budget
    page = client.get("/s/floor").text
    bars = _bars(client, "floor")
    over = [(href, title) for href, flag, title in bars if flag]
    within = [(href, title) for href, flag, title in demo if not flag]
    for _, title in over:
        tokens, budget = (
            int(x.replace(",", "")) for x in re.findall(r"([\d,]+) (?:of|tokens)", title)[:2]
        )
        assert tokens > budget and f"over budget by {tokens - budget:,}" in title
    for _, title in within:
        assert "over budget" not in title
    assert over, "a prompt whose floor is over the budget is flagged"
    assert page.count('class="over-mark"') == len(over)
    prompt = client.get(over[0][0]).text
    assert "▲ over budget by" in prompt
    assert "over budget by" not in client.get(within[0][0]).text


def test_numbers_read_one_way(client: TestClient, db: dict[str, Any]) -> None:
    """Thousands separated, millions as M: no bare 5-digit number, no `k`."""
    session = _demo(client)
    views = [f"/s/{session}{v}" for v in ("", "/prompt", "/layers", "/records", "/nodes")]
    views += ["/s/wide/layers", f"/s/wide/layer/{db['wide']}", "/s/wide/nodes?page=200"]
    for view in views:
        page = client.get(view).text
        page = re.sub(r"<(pre|style|script)[^>]*>.*?</\1>", "", page, flags=re.S)  # not ours
        text = re.sub(r"<[^>]+>", " ", page)
        text = re.sub(
            r"\b[0-9A-Za-z]{20,}\b|\b[0-9a-f]{8,}\b|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d\d:\d\d:\d\d",
            "",
            text,
        )
        assert not re.search(r"(?<![\w.,])\d{5,}(?![\w.,])", text), view
        assert not re.search(r"\d(\.\d)?k\b", text), view
    assert "covers 10,022 nodes" in client.get(f"/s/wide/layer/{db['wide']}").text


def test_every_two_colours_of_a_legend_are_told_apart(client: TestClient) -> None:
    session = _demo(client)
    legends = [client.get(f"/s/{session}").text, client.get(f"/s/{session}?kinds=1").text]
    legends.append(client.get(f"/s/{session}/prompt").text)
    seen: dict[str, str] = {}
    for page in legends:
        seen |= dict(re.findall(r'<i style="background:(#[0-9a-f]{6})"></i>([^<]+)<', page))
    assert len(seen) >= 8
    for (one, a), (two, b) in itertools.combinations(seen.items(), 2):
        assert distance(one, two) >= 25, (a, b, round(distance(one, two), 1))


def test_a_search_hit_says_how_the_last_prompt_shows_its_node(
    client: TestClient, db: dict[str, Any]
) -> None:
    page = client.get("/s/layered/search", params={"q": "reading part_"}).text
    said = dict(
        re.findall(r'node/([^"]+)">[^<]*</a></td><td>[^<]*</td><td class="shown">(.*?)</td>', page)
    )
    assert len(said) == 14
    under = [s for s in said.values() if s.startswith("under layer")]
    assert under and all(db["layer"] in s for s in under)
    assert any(s == "shown" for s in said.values())


def test_a_layers_originals_are_paged(
    client: TestClient, db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A layer over 10,022 messages serves them 50 a page, its totals still all of them."""
    at = f"/s/wide/layer/{db['wide']}"
    first = client.get(at).text
    assert first.count("<tr><td>") < 60  # one page of originals (and the replacement)
    assert "page 1 of 201: originals 1–50 of 10,022" in first
    assert f'href="{at}?page=1"' in first
    last = client.get(f"{at}?page=200")
    assert last.status_code == 200 and "originals 10,001–10,022 of 10,022" in last.text
    assert client.get(f"{at}?page=201").status_code == 404
    assert client.get(f"{at}?page=x").status_code == 404
    assert main(["collapses", "wide", "--db", db["path"], "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    saved = next(x for x in listed if x["id"] == db["wide"])["tokens_saved"]
    shown = re.search(r"<b id='saved'>([\d,]+)</b>", first)
    assert shown is not None and int(shown.group(1).replace(",", "")) == saved
    same = re.search(r"<b id='saved'>([\d,]+)</b>", last.text)
    assert same is not None and same.group(1) == shown.group(1)


def test_a_layer_keeps_its_totals_from_when_it_was_made(
    db: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    """A collapse keeps its originals' totals in the layer (context.LAYER_TOTALS): the
    viewer's first view of it shows them without counting 10,022 messages again, and they
    are the figures `collapses --json` counts."""
    g = ConversationGraph.open(db["path"], session="wide")
    kept = g.layer(db["wide"]).layer.meta[LAYER_TOTALS]
    g.close()
    assert kept["messages"] == 10_022 and kept["encoding"] == "cl100k_base"
    viewer = Viewer(db["path"], None)
    with TestClient(create_app(viewer, token="t", hosts={HOST}), base_url=f"http://{HOST}") as c:
        c.cookies.set(COOKIE, "t")
        page = c.get(f"/s/wide/layer/{db['wide']}").text
    assert not viewer.totals._counting  # internal: nothing counted in the background
    assert f"({kept['tokens']:,} in the 10,022 original messages" in page
    assert main(["collapses", "wide", "--db", db["path"], "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    saved = next(x for x in listed if x["id"] == db["wide"])["tokens_saved"]
    assert f"<b id='saved'>{saved:,}</b>" in page
    dispose_engines()


def test_a_layer_made_without_totals_is_counted_once_in_the_background(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A layer stored before totals were kept (or by a tier that only estimates): its page
    is served at once and says it is counting; once counted, its figures are those of
    `collapses --json`, on every page, and nothing stored changed."""
    path = tmp_path / "old.db"
    g = ConversationGraph.open(path, session="old")
    with g.batch():
        ids = [g.append({"role": "user", "content": f"message {i} " * 20}).id for i in range(900)]
    layer = g.add_layer("collapse", ids[:800], [{"role": "user", "content": "[summary]"}]).id
    g.close()
    dispose_engines()
    before = path.read_bytes()
    viewer = Viewer(str(path), None)
    with TestClient(create_app(viewer, token="t", hosts={HOST}), base_url=f"http://{HOST}") as c:
        c.cookies.set(COOKIE, "t")
        first = c.get(f"/s/old/layer/{layer}").text
        assert "<b id='saved'>counting</b>" in first and "originals 1–50 of 800" in first
        viewer.totals.join()
        later = c.get(f"/s/old/layer/{layer}", params={"page": 15}).text
    assert main(["collapses", "old", "--db", str(path), "--json"]) == 0
    saved = json.loads(capsys.readouterr().out)[0]["tokens_saved"]
    assert f"<b id='saved'>{saved:,}</b>" in later and "in the 800 original messages" in later
    dispose_engines()
    assert path.read_bytes() == before


def test_a_sessions_timeline_loads_its_graph_in_the_background(db: dict[str, Any]) -> None:
    """The timeline needs no graph, the pages opened from it do: serving it starts the
    load, so a long session's prompt or layer does not wait for it when clicked."""
    viewer = Viewer(db["path"], None)
    with TestClient(create_app(viewer, token="t", hosts={HOST}), base_url=f"http://{HOST}") as c:
        c.cookies.set(COOKIE, "t")
        assert "wide" not in viewer._loaded  # internal: what the viewer holds
        assert c.get("/s/wide").status_code == 200
        for thread in list(viewer._prefetching.values()):  # internal: the load's thread
            thread.join()
        assert "wide" in viewer._loaded
        assert c.get(f"/s/wide/layer/{db['wide']}").status_code == 200
    dispose_engines()


def test_search_finds_what_was_appended_after_the_last_search(tmp_path: Path) -> None:
    """Search reads each node's text once, and again once anything is stored."""
    path = tmp_path / "live.db"
    g = ConversationGraph.open(path, session="live")
    g.append({"role": "user", "content": "the first Needle"})
    viewer = Viewer(str(path), None)
    with TestClient(create_app(viewer, token="t", hosts={HOST}), base_url=f"http://{HOST}") as c:
        c.cookies.set(COOKIE, "t")
        assert "1 node(s) contain" in c.get("/s/live/search", params={"q": "needle"}).text
        g.append({"role": "assistant", "content": "a second NEEDLE"})
        assert "2 node(s) contain" in c.get("/s/live/search", params={"q": "needle"}).text
    g.close()
    dispose_engines()


def test_a_running_viewer_shows_no_scrubbed_secret_and_its_live_pages_notice(
    tmp_path: Path,
) -> None:
    db = tmp_path / "view.db"
    model = TestModel([{"content": None, "tool_calls": [tool_call("fetch")]}], default="done")
    s, tool = leaky(db, model)
    s.close()
    dispose_engines()
    app = create_app(Viewer(str(db), None), token="t", hosts={"127.0.0.1:9"})
    paths = ("/s/s/prompt", f"/s/s/node/{tool}", "/s/s/search?q=hunter2", "/s/s/nodes", "/s/s")
    with TestClient(app, base_url="http://127.0.0.1:9") as client:
        client.cookies.set(COOKIE, "t")
        before = {path: client.get(path).text for path in paths}
        version = client.get("/s/s/version").text
        scrub_elsewhere(db)
        after = {path: client.get(path).text for path in paths}
        assert client.get("/s/s/version").text != version  # live pages reload
    assert {"/s/s/prompt", f"/s/s/node/{tool}"} <= {p for p, t in before.items() if SECRET in t}
    assert [path for path, page in after.items() if SECRET in page] == []
    assert "[REDACTED:pattern-1]" in after[f"/s/s/node/{tool}"]
