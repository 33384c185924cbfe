"""A small, generated knowledge base about "Harbor", a fictional web service, with the two
tools the research agent uses on it: ``search`` and ``read``.

Documents are design notes, incident reports, code listings (a few thousand characters)
and request logs (tens of thousands), so an investigation produces outputs of every size
the context cascade treats differently. Everything is generated from fixed facts, so runs
are reproducible offline.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

__all__ = ["CORPUS", "Doc", "read", "search"]


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    topic: str
    text: str


_FACTS: dict[str, list[str]] = {
    "export": [
        "The /api/export endpoint is served by export_handler in harbor/api/export.py.",
        "export_handler streams rows through build_csv_rows, which runs one query per page.",
        "Exports time out after 30 s because EXPORT_TIMEOUT_S is set in harbor/settings.py.",
        "The slow part is route_request scanning all 400 handlers before reaching export.",
    ],
    "router": [
        "route_request in harbor/router/table.py matches paths with a linear scan.",
        "The router table grew to 400 handlers after the plugin system landed.",
        "An index by path prefix (RouterIndex) was proposed in RFC-12 to make lookups O(1).",
        "Last month the router gained wildcard routes, which disabled the prefix fast path.",
    ],
    "cache": [
        "The response cache lives in harbor/cache/lru.py as ResponseCache.",
        "Entries are invalidated by the invalidate_on_write hook after every PUT or DELETE.",
        "CACHE_TTL_S defaults to 120 seconds and can be raised per route.",
        "A cache stampede in incident INC-2031 came from expiring hot keys all at once.",
    ],
    "ratelimit": [
        "RateLimiter in harbor/limits/bucket.py is a token bucket per user id.",
        "Each user gets RATE_LIMIT_PER_MIN = 600 requests, refilled every second.",
        "Limits are enforced in the limit_requests middleware before routing.",
        "Admins bypass limits through the is_internal_client check.",
    ],
    "deploy": [
        "The 2026-03 deploy rolled back because migration 0042_add_export_index locked tables.",
        "Deploys run through harbor/deploy/pipeline.py with a canary at 5 percent.",
        "The rollback was triggered by p99 latency above 2 s on the canary.",
        "After the rollback the migration was split into 0042a and 0042b.",
    ],
    "queue": [
        "Report generation runs on the reports queue handled by ReportWorker.",
        "ReportWorker lives in harbor/workers/reports.py and retries three times.",
        "Queue depth is exported as harbor_queue_depth for the dashboard.",
        "Large exports are moved to the reports queue when they exceed 50k rows.",
    ],
    "auth": [
        "Sessions are authenticated by SessionAuth in harbor/auth/session.py.",
        "Tokens are signed with HMAC-SHA256 and rotated by rotate_signing_keys weekly.",
        "A session expires after SESSION_IDLE_MIN = 45 minutes without requests.",
        "Service accounts use ApiKeyAuth instead of cookies.",
    ],
    "database": [
        "The slow query is fetch_export_page in harbor/db/queries.py without an index.",
        "fetch_export_page sorts by created_at across the whole events table.",
        "Adding idx_events_account_created made the query 40 times faster in staging.",
        "The events table holds 120 million rows on the main cluster.",
    ],
}

QUESTIONS: dict[str, tuple[str, list[str]]] = {
    "Why do requests to /api/export time out?": ("export", ["export", "router", "database"]),
    "How does the response cache invalidate entries?": ("cache", ["cache", "deploy"]),
    "What limits how many API calls a user can make?": ("ratelimit", ["ratelimit", "auth"]),
    "Why did the 2026-03 deploy roll back?": ("deploy", ["deploy", "database"]),
    "Which worker generates reports, and how does it retry?": ("queue", ["queue", "export"]),
    "How are user sessions authenticated?": ("auth", ["auth", "ratelimit"]),
    "Where is the slow database query behind exports?": ("database", ["database", "export"]),
    "What changed in the router last month?": ("router", ["router", "cache"]),
}
"""Questions the offline demo asks, with the topics a planner splits each into."""


def _note(topic: str, index: int, rng: random.Random) -> str:
    facts = _FACTS[topic]
    lines = [f"# {topic.title()} notes {index}", ""]
    for fact in rng.sample(facts, k=len(facts)):
        lines.append(fact)
        lines.append(f"See also the {topic} runbook, section {rng.randint(1, 9)}.")
    return "\n".join(lines)


def _code(topic: str, rng: random.Random) -> str:
    names = sorted({n for f in _FACTS[topic] for n in re.findall(r"\b[a-z]+_[a-z_]+\b", f)})
    body = [f'"""Harbor {topic} module (excerpt)."""', ""]
    for n in range(60):
        name = names[n % len(names)] if names else f"helper_{n}"
        body.append(f"def {name}_{n}(request, limit={rng.randint(1, 500)}):")
        body.append(f"    # {rng.choice(_FACTS[topic])}")
        body.append(f"    return dispatch('{topic}', request, limit)")
        body.append("")
    return "\n".join(body)


def _log(topic: str, rng: random.Random) -> str:
    lines = []
    for n in range(420):
        status = rng.choice([200, 200, 200, 200, 504, 429])
        ms = rng.randint(5, 31000) if status == 504 else rng.randint(5, 900)
        path = {"export": "/api/export", "ratelimit": "/api/items"}.get(topic, f"/api/{topic}")
        lines.append(
            f"2026-03-{1 + n % 28:02d}T12:{n % 60:02d}:00Z {path} status={status} ms={ms} "
            f"worker=w{n % 8} trace={rng.getrandbits(48):012x}"
        )
    lines.append(f"summary: {rng.choice(_FACTS[topic])}")
    return "\n".join(lines)


def _build() -> dict[str, Doc]:
    rng = random.Random(7)
    docs: dict[str, Doc] = {}
    for topic in _FACTS:
        for index in range(2):
            doc = Doc(f"{topic}-note-{index}", f"{topic} design note {index}", topic, "")
            docs[doc.id] = Doc(doc.id, doc.title, topic, _note(topic, index, rng))
        docs[f"{topic}-code"] = Doc(
            f"{topic}-code", f"{topic} module source", topic, _code(topic, rng)
        )
        docs[f"{topic}-log"] = Doc(f"{topic}-log", f"{topic} request log", topic, _log(topic, rng))
    return docs


CORPUS: dict[str, Doc] = _build()
"""The documents by id: two notes, a code listing and a request log per topic."""


def search(query: str, limit: int = 4) -> list[dict[str, str]]:
    """Search Harbor's documents; returns ids, titles and a short snippet, best first.

    Args:
        query: words to look for
        limit: how many documents to return at most
    """
    words = [w for w in re.findall(r"[a-z0-9_/]+", query.lower()) if len(w) > 2]
    scored = []
    for doc in CORPUS.values():
        haystack = f"{doc.title} {doc.topic} {doc.text[:2000]}".lower()
        score = sum(haystack.count(word) for word in words)
        if doc.topic in words:
            score += 25
        if score:
            scored.append((-score, doc.id, doc))
    scored.sort()
    return [
        {"id": doc.id, "title": doc.title, "snippet": doc.text.split("\n", 3)[2][:120]}
        for _, _, doc in scored[: max(1, limit)]
    ]


def read(doc_id: str) -> str:
    """Read one of Harbor's documents in full.

    Args:
        doc_id: the id ``search`` returned
    """
    doc = CORPUS.get(doc_id)
    if doc is None:
        raise ValueError(f"no document {doc_id!r}; search for one first")
    return doc.text
