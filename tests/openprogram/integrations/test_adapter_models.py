"""Each adapter records the model its framework runs (issue 35, item 2): at first use the
session's configuration names it, with the window litellm's map gives it and so its
tokenizer, and a run on another model is an explicit, recorded configuration change.
``openprogram configure`` on the session then shows what the agent runs on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _adapter_helpers import lookup

from context import ContextStorage
from openprogram import Session
from openprogram.cli import main

GPT_4O = "of a 128,000-token window, model gpt-4o (tokenizer o200k_base)"
GPT_41 = "of a 1,047,576-token window, model gpt-4.1 (tokenizer o200k_base)"


def _shown(capsys: pytest.CaptureFixture[str], session: Session) -> str:
    capsys.readouterr()
    url = str(session.store.url).removeprefix("sqlite:///")
    assert main(["--db", url, "configure", session.id]) == 0
    return " ".join(capsys.readouterr().out.split())


def _check(capsys: pytest.CaptureFixture[str], session: Session, run: Callable[[str], Any]) -> None:
    """``run(model)`` runs the framework on ``model`` once: the first run records gpt-4o
    (one event), a second on gpt-4o changes nothing, one on gpt-4.1 is a second event."""
    assert session.config.model is None
    assert "model (none) (tokenizer cl100k_base)" in _shown(capsys, session)
    run("gpt-4o")
    assert GPT_4O in _shown(capsys, session)
    assert session.engine.counter.encoding_name == "o200k_base"
    run("gpt-4o")
    run("gpt-4.1")
    assert GPT_41 in _shown(capsys, session)
    events = ContextStorage(session.store, session.id).configurations()
    assert [e["changes"]["model"] for e in events] == ["gpt-4o", "gpt-4.1"]
    assert events[1]["changes"]["policy"]["context_window"] == 1_047_576
    reopened = Session(session.store, session.id)
    assert reopened.config.model == "gpt-4.1" and reopened.policy.context_window == 1_047_576


def test_pydantic_ai_records_its_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    session = Session(tmp_path / "op.db")
    capability = OpenProgramCapability(session)
    history: list[ModelMessage] = []

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    def run(model: str) -> None:
        agent = Agent(FunctionModel(answer, model_name=model), capabilities=[capability])
        history[:] = agent.run_sync("Go on.", message_history=history).all_messages()

    _check(capsys, session, run)


def test_langchain_records_its_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    from openprogram.integrations.langchain import OpenProgramMiddleware

    class Named(GenericFakeChatModel):
        model_name: str

        def bind_tools(self, tools: Any, **kwargs: Any) -> Named:  # type: ignore[override]
            return self

    session = Session(tmp_path / "op.db")
    middleware = OpenProgramMiddleware(session)
    messages: list[Any] = []

    def run(model: str) -> None:
        chat = Named(messages=iter([AIMessage(content="ok")]), model_name=model)
        agent = create_agent(chat, tools=[lookup], middleware=[middleware])
        task = {"messages": [*messages, {"role": "user", "content": "Go on."}]}
        messages[:] = agent.invoke(task)["messages"]  # type: ignore[arg-type]

    _check(capsys, session, run)


def test_the_agents_sdk_session_records_its_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("agents")
    from _agents_fakes import Answering
    from agents import Agent, RunConfig, set_tracing_disabled

    from openprogram.integrations.openai_agents import OpenProgramSession

    set_tracing_disabled(True)

    session = Session(tmp_path / "op.db")
    memory = OpenProgramSession(session)
    agent = Agent("helper", model=Answering(model="gpt-4o"))

    def run(model: str) -> None:
        # the run configuration's model wins over the agent's, as in the SDK
        config = RunConfig(model=Answering(model=model)) if model != "gpt-4o" else None
        asyncio.run(memory.run(agent, "Go on.", run_config=config))

    _check(capsys, session, run)


def test_configure_json_names_the_recorded_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from openprogram.integrations.pydantic_ai import OpenProgramCapability

    session = Session(tmp_path / "op.db")
    agent = Agent(TestModel(), capabilities=[OpenProgramCapability(session)])
    agent.run_sync("Hello.")
    capsys.readouterr()
    assert main(["--db", str(tmp_path / "op.db"), "configure", session.id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)["config"]
    assert shown["model"] == "test"  # a name the map does not know: the window stays
    assert shown["policy"]["values"]["context_window"] == 128_000
