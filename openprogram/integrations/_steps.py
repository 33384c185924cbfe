"""What a mirror wrote for one entry (a step of its index), and the start two lists share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

__all__ = ["Step"]


@dataclass
class Step:
    """What the mirror wrote for one entry (or one change of instructions): its digest, the
    node it made or filled (a tool node for a result), the heads before and after it, and
    the graph call ids of each framework call id, in the order of the message's calls."""

    digest: str
    node: str
    head: str | None
    parent: str | None
    calls: dict[str, list[str]] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.parent or ''}:{self.digest}"

    def dump(self) -> str:
        return json.dumps([self.digest, self.node, self.head, self.parent, self.calls])

    @classmethod
    def load(cls, text: str) -> Step:
        digest, node, head, parent, calls = json.loads(text)
        return cls(digest, node, head, parent, {k: list(v) for k, v in calls.items()})
