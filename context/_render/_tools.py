"""The tool schemas every prompt goes out with, counted once per set, and the one warning
an engine gives when they and the system prompt alone are over the budget (its floor)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from graph import ToolSchema

from .._budget._tokens import TokenCounter
from .._errors import BudgetFloorWarning
from ._rendered import Rendered


class PromptTools:
    """The schemas and their token count, which every render adds to its prompt's."""

    def __init__(self, counter: TokenCounter, tools: Sequence[ToolSchema]) -> None:
        self.counter = counter
        self.schemas = list(tools)
        self.tokens = counter.count_tools(self.schemas)
        self.floor_warned = False
        """Whether a render found the floor (tool schemas and system prompt) over the
        budget already: ``BudgetFloorWarning`` is given once per engine."""

    def set(self, tools: Sequence[ToolSchema]) -> None:
        """Other schemas from now on (counted again only when they differ)."""
        if list(tools) != self.schemas:
            self.schemas = list(tools)
            self.recount()

    def recount(self) -> None:
        """Count the schemas again, the way the counter counts now."""
        self.tokens = self.counter.count_tools(self.schemas)

    def warn_floor(self, rendered: Rendered, session: str) -> None:
        """Warn, once, when the floor of ``rendered`` is over its budget (for the caller of
        the engine's render)."""
        if rendered.floor_fits or self.floor_warned:
            return
        self.floor_warned = True
        warnings.warn(
            f"session {session!r}: the tool schemas ({self.tokens:,} tokens) "
            f"and the system prompt ({rendered.floor - self.tokens:,}) are over the "
            f"budget of {rendered.budget:,} tokens, so every prompt goes out over it "
            f"(this one: {rendered.tokens:,}); raise the budget or send fewer tools",
            BudgetFloorWarning,
            stacklevel=3,
        )
