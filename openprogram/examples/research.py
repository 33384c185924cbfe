"""A nested research agent: ``research`` plans sub-questions, ``investigate`` answers each
(concurrently) by searching and reading Harbor's documents, ``synthesize`` writes the
answer; ``review`` compares earlier answers and reads back what a summary hid.

Offline it runs on :func:`scripted_model`, a model that behaves sensibly: it searches,
reads what it found, answers from what it read, and when a collapsed summary hides an
investigation it needs, it calls ``expand_function`` and quotes what it read. Online it
takes any litellm model::

    python -m openprogram.examples.research --model openai/gpt-4o-mini
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
from typing import Any

from pydantic import BaseModel, Field

import openprogram
from openprogram.examples.corpus import QUESTIONS, read, search
from openprogram.testing import FunctionModel, ModelRequest, tool_call

__all__ = [
    "Finding",
    "Plan",
    "investigate",
    "research",
    "review",
    "scripted_model",
    "synthesize",
]


class Plan(BaseModel):
    """The sub-questions a question splits into."""

    sub_questions: list[str] = Field(min_length=1, max_length=5)


class Finding(BaseModel):
    """What one investigation found, with the documents it rests on."""

    answer: str
    sources: list[str]


@openprogram.function
async def investigate(sub_question: str) -> Finding:
    """Answer one sub-question from Harbor's documents."""
    finding: Finding = await openprogram.allm(
        f"Investigate: {sub_question}\nSearch Harbor's documents, read the relevant ones, "
        "and answer with the evidence and the ids of the documents you used.",
        tools=[search, read],
        output_type=Finding,
    )
    return finding


@openprogram.function
async def synthesize(question: str, findings: list[Finding]) -> str:
    """Write the answer to ``question`` from the findings."""
    lines = "\n".join(f"- {f.answer} (sources: {', '.join(f.sources)})" for f in findings)
    answer: str = await openprogram.allm(
        f"Synthesize: answer the question {question!r} from these findings:\n{lines}"
    )
    return answer


@openprogram.function
async def research(question: str) -> str:
    """Plan sub-questions, investigate them concurrently, synthesize the answer."""
    plan: Plan = await openprogram.allm(
        f"Plan: split the question {question!r} into at most 4 sub-questions.",
        output_type=Plan,
    )
    findings = await asyncio.gather(*(investigate(q) for q in plan.sub_questions))
    return await synthesize(question, list(findings))


@openprogram.function
async def review(topic: str) -> str:
    """Compare what earlier research found about ``topic``, reading back hidden details."""
    answer: str = await openprogram.allm(
        f"Review: compare what the earlier research found about {topic}. If a summary hides "
        "an investigation you need, read it back with expand_function and quote it."
    )
    return answer


# -- the offline model ------------------------------------------------------------------------

_TASK = re.compile(r"^(Plan|Investigate|Synthesize|Review):")
_EXPAND = re.compile(
    r'function (?:research|investigate): expand_function\("([0-9A-Z]{26}|n[0-9]+)"\)'
)


def _task(request: ModelRequest) -> tuple[int, str, str]:
    """The newest task message of the frame: its index, kind and text."""
    for index in range(len(request.messages) - 1, -1, -1):
        message = request.messages[index]
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, str):
            found = _TASK.match(content)
            if found:
                return index, found.group(1), content
    return -1, "", ""


_KNOWN = ("export", "router", "cache", "database", "deploy", "queue", "auth", "ratelimit")


def _topics(text: str) -> list[str]:
    for question, (_, topics) in QUESTIONS.items():
        if question in text:
            return topics
    words = re.findall(r"[a-z]+", text.lower())
    return [w for w in _KNOWN if w in words] or ["export"]


def _investigate(request: ModelRequest, since: int, task: str) -> Any:
    after = request.messages[since + 1 :]
    results = [m for m in after if m.get("role") == "tool"]
    topic = _topics(task)[0]
    if not results:
        return {
            "content": f"Searching for {topic}.",
            "tool_calls": [tool_call("search", {"query": topic})],
        }
    read_texts = [str(m.get("content") or "") for m in results[1:]]
    if len(results) == 1:
        try:
            found = json.loads(str(results[0].get("content")))
        except json.JSONDecodeError:
            found = []
        ids = [d["id"] for d in found if isinstance(d, dict) and "id" in d][:3] or [
            f"{topic}-note-0"
        ]
        calls = [tool_call("read", {"doc_id": doc_id}) for doc_id in ids]
        return {"content": f"Reading {', '.join(ids)}.", "tool_calls": calls}
    facts = [
        line
        for text in read_texts
        for line in text.splitlines()
        if line.endswith(".") and "runbook" not in line and "summary:" not in line
    ]
    answer = (
        " ".join(dict.fromkeys(facts[:2])) or f"No clear answer about {topic} in the documents."
    )
    sources = [
        json.loads(c["function"]["arguments"])["doc_id"]
        for m in after
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or ()
        if c["function"]["name"] == "read"
    ]
    return json.dumps({"answer": answer, "sources": sources})


def _review(request: ModelRequest, since: int) -> Any:
    after = request.messages[since + 1 :]
    expanded = [m for m in after if m.get("role") == "tool"]
    if not expanded:
        text = "\n".join(str(m.get("content") or "") for m in request.messages[:since])
        ids = _EXPAND.findall(text)
        if ids and "expand_function" in request.tool_names:
            return {
                "content": "A summary hides an earlier investigation; reading it back.",
                "tool_calls": [tool_call("expand_function", {"id": ids[0]})],
            }
        return "Nothing earlier is hidden; the answers above stand as they are."
    text = str(expanded[-1].get("content"))
    detail = next((line.strip() for line in text.splitlines() if '"answer"' in line), text[:200])
    return f"Read back from the collapsed investigation: {detail}"


def _answer(request: ModelRequest) -> Any:
    since, kind, task = _task(request)
    if kind == "Plan":
        topics = _topics(task)
        return json.dumps(
            {"sub_questions": [f"What do the documents say about {t}?" for t in topics]}
        )
    if kind == "Investigate":
        return _investigate(request, since, task)
    if kind == "Synthesize":
        findings = [line[2:] for line in task.splitlines() if line.startswith("- ")]
        return "From the findings: " + " ".join(findings)
    if kind == "Review":
        return _review(request, since)
    return "Understood."


def scripted_model() -> FunctionModel:
    """The offline model of the research agent (deterministic, no network)."""
    return FunctionModel(_answer, name="scripted-research")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--model", help="a litellm model (default: the offline scripted one)")
    parser.add_argument("--db", default=":memory:")
    parser.add_argument("question", nargs="?", default=next(iter(QUESTIONS)))
    args = parser.parse_args(argv)
    model: Any = args.model or scripted_model()
    with openprogram.Session(
        args.db, model=model, system="You are a careful research agent."
    ) as session:
        print(session.run(research, args.question))


if __name__ == "__main__":
    main()
