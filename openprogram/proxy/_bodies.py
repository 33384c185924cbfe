"""The request bodies the proxy reads and rewrites, one per wire, and the usage it sums.

TypedDicts: types for the checker only, plain dicts at run time. ``total=False``: a client
sends what it sends, and every key the proxy does not name (``max_tokens``, ``metadata``,
``temperature``…) is forwarded as it came; the entries of each list are read defensively
(``openprogram._json``), never trusted to be well formed: ``list[object]``.
"""

from typing import TypeAlias, TypedDict

__all__ = ["Request", "Usage", "UsageCounts"]


class Request(TypedDict, total=False):
    """A client's request on any of the three wires: the keys the proxy reads or writes.

    Anthropic Messages (``/v1/messages``): ``system``, ``messages``, ``tools``; OpenAI Chat
    Completions (``/v1/chat/completions``): ``messages`` (instructions among them),
    ``tools``; OpenAI Responses (``/v1/responses``): ``instructions``, ``input`` (text or
    items), ``tools``, ``store``. One type for all three, because the proxy's rounds carry
    whichever the client sent.
    """

    model: str
    system: str | list[object]
    instructions: str
    messages: list[object]
    input: str | list[object]
    tools: list[object]
    store: bool
    stream: bool


class UsageCounts(TypedDict):
    """A provider's usage in the receipt's terms, as a record says it: ``input`` uncached,
    cache reads and writes, ``output``."""

    input: int
    cache_read: int
    cache_creation: int
    output: int


Usage: TypeAlias = dict[str, "int | Usage"]
"""Token counts summed over rounds, nested as the provider nests them
(``prompt_tokens_details.cached_tokens``)."""
