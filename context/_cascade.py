"""The cascade: what one render decides, from the unprocessed view to the prompt.

Tiers whose sticky decisions only drop units re-apply them first (so dropped units are
never processed), the ``always`` tiers act, the other tiers re-apply theirs, and then tiers
act in order while the prompt is over their trigger. Every tier runs fail-open, checked for
tool pairing; the prompt's integrity (pairs, call ids, provider roles) is repaired last. A
render that made a layer is decided again over it, so the next render finds nothing to do.
Kept apart from the engine, which builds the view and commits what is decided here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from ._commit import Decision
from ._integrity import provider_roles, repair_tool_pairs, tool_pair_problems, unique_call_ids
from ._request import latest_request, shown, with_request
from ._tier import TierContext, TierDecisions, TierFn, TierState
from ._view import View

if TYPE_CHECKING:
    from ._layers import LayerBook
    from ._persistence import _Frame
    from ._policy import Policy
    from ._storage import ContextStorage
    from ._tier import Tier
    from ._tokens import TokenCounter

MAX_PASSES = 8
"""Times a render is made at most while each one still makes a layer (see ``_decide``)."""


class Cascade:
    """The deciding half of :class:`~context.ContextEngine`: the tier list, run on a view."""

    if TYPE_CHECKING:
        policy: Policy
        tiers: list[Tier]
        counter: TokenCounter
        book: LayerBook
        storage: ContextStorage | None

        def context(
            self,
            head: str | None = None,
            frame: str | None = None,
            *,
            preview: bool = False,
            carried: tuple[dict[str, TierState], dict[str, dict[str, Any]]] | None = None,
            decisions: TierDecisions | None = None,
        ) -> tuple[TierContext, View, _Frame]: ...

        def _checkpoint(self, state: _Frame, view: View, ctx: TierContext) -> None: ...

    def _decide(self, head: str | None, frame: str | None, *, preview: bool) -> Decision:
        """The pure step: the prompt and the decisions it rests on, nothing written.

        A render that made a layer is made again over the new layer, as the next render
        would be, until one makes none: so the next render over the same graph (same
        clock and recovery state) finds nothing to do and shows the same bytes. (A tier
        that made a layer and left the prompt over its trigger, as summarize_half does,
        made another on each repeat though nothing was appended.)"""
        decisions = TierDecisions()
        carried = None
        for _ in range(MAX_PASSES):
            known = len(self.book.overlay)
            ctx, view, state = self.context(
                head, frame, preview=preview, carried=carried, decisions=decisions
            )
            if preview:
                carried = (ctx.states, ctx.scratch)
            view = self._cascade(view, ctx)
            view = self._with_request(view, ctx)
            if not preview and frame is None and self.storage is not None:
                self._checkpoint(state, view, ctx)  # layers this render made may hide a span
            messages, tokens = self._finish(view, ctx)
            if tokens > ctx.budget >= view.tokens:
                # Integrity added a turn (a provider's role rules): make room for it too.
                budget = ctx.budget
                ctx.budget = budget - (tokens - view.tokens)
                view = self._compact_pass(view, ctx)
                ctx.budget = budget
                messages, tokens = self._finish(view, ctx)
            if len(self.book.overlay) == known:
                break
        return Decision(ctx, view, state, frame, messages, tokens)

    def _with_request(self, view: View, ctx: TierContext) -> View:
        """The latest user request back in the prompt when the cascade took its round,
        with room made for it by one more pass under the budget less its size."""
        request = latest_request(ctx)
        if request is None or shown(view, request):
            return view
        if view.tokens + request.tokens > ctx.budget:
            budget = ctx.budget
            ctx.budget = max(1, budget - request.tokens)
            try:
                view = self._compact_pass(view, ctx)
            finally:
                ctx.budget = budget
        return with_request(view, request)

    def _cascade(self, view: View, ctx: TierContext) -> View:
        return self._compact_pass(self.prepare(view, ctx), ctx)

    def prepare(self, view: View, ctx: TierContext) -> View:
        """Re-apply earlier decisions in the order they were made (the ``early`` ones,
        which only drop units, first) and let the ``always`` tiers act."""
        for tier in self.tiers:
            if tier.apply is not None and tier.early:
                view = self.run_tier(tier.name, tier.apply, view, ctx)
        for tier in self.tiers:
            if tier.compact is not None and tier.name in self.policy.always:
                view = self.run_tier(tier.name, tier.compact, view, ctx)
        for tier in self.tiers:
            if tier.apply is not None and not tier.early:
                view = self.run_tier(tier.name, tier.apply, view, ctx)
        return view

    def _compact_pass(self, view: View, ctx: TierContext) -> View:
        """Each tier acts when the prompt is over its trigger; once one has, the following
        tiers go on while the prompt is over the low-water mark (hysteresis)."""
        triggered = False
        for tier in self.tiers:
            if tier.compact is None or tier.name in self.policy.always:
                continue
            over = view.tokens > ctx.threshold(tier.name)
            if over or (triggered and view.tokens > ctx.target):
                triggered = True
                view = self.run_tier(tier.name, tier.compact, view, ctx)
        return view

    def run_tier(self, name: str, fn: TierFn, view: View, ctx: TierContext) -> View:
        """Run one tier function fail-open: an exception, or a result that breaks tool
        pairing, is recorded and the view goes on unchanged."""
        ctx.tier = name
        try:
            after = fn(view, ctx)
        except Exception as error:  # fail-open: a broken tier must not cost the turn
            ctx.act(name, "failed; render continues without it", view, view, error=repr(error))
            ctx.record(name, view, view, started=time.perf_counter(), error=repr(error))
            return view
        if after is view:
            return view
        problems = tool_pair_problems(after.messages, unique_ids=False)
        if problems:
            ctx.act(
                name, "broke tool pairing; its result was discarded", view, view, error=problems[0]
            )
            return view
        return after

    def _finish(self, view: View, ctx: TierContext) -> tuple[list[dict[str, Any]], int]:
        messages = view.messages
        tokens = view.tokens
        fixed, notes = repair_tool_pairs(messages)
        fixed, renamed = unique_call_ids(fixed)
        notes += renamed
        if self.policy.merge_roles:
            fixed, role_notes = provider_roles(fixed)
            notes += role_notes
        if notes:
            ctx.act("integrity", "; ".join(dict.fromkeys(notes)), view, view)
            # Keep the view's per-item counts (an output a context edit clears is counted
            # cleared); add only what the repairs changed.
            kept = {id(m) for m in messages} & {id(m) for m in fixed}
            added = self.counter.count_messages(m for m in fixed if id(m) not in kept)
            removed = sum(
                item.tokens
                for unit in view.units
                for item in unit.items
                if id(item.message) not in kept
            )
            tokens += added - removed
        return fixed, tokens
