"""The cascade: what one render decides, from the unprocessed view to the prompt.

Tiers whose sticky decisions only drop units re-apply them first (so dropped units are
never processed), the ``always`` tiers act, the other tiers re-apply theirs, and then tiers
act in order while the prompt is over their trigger. Every tier runs fail-open, checked for
tool pairing; the prompt's integrity (pairs, call ids, provider roles) is repaired last. A
render that made a layer is decided again over it, so the next render finds nothing to do.
Kept apart from the renderer, which builds the view, and the committer, which writes what
is decided here.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from graph import ChatMessage

from .._budget._policy import Policy
from .._budget._tokens import TokenCounter
from .._store._source import MessageSource
from .._tiers._request import latest_request, shown, top_request, with_request
from .._tiers._tier import Tier, TierContext, TierFn
from .._tiers._working import with_working_set
from .._view import View
from ._finish import Finisher
from ._integrity import grouped_roles, repair_tool_pairs, tool_pair_problems, unique_call_ids
from ._sources import added, merged, view_sources


class Cascade:
    """The tier list, run on a view under a policy (counting what integrity repairs)."""

    def __init__(self, tiers: Sequence[Tier], policy: Policy, counter: TokenCounter) -> None:
        self.tiers = list(tiers)
        self.policy = policy
        self.counter = counter
        self.finisher = Finisher()
        """Resumes ``finish``'s passes where the next prompt starts as the last one did."""
        self.incremental = True
        """False: every pass over the whole prompt (``ContextEngine.incremental``)."""

    def with_request(self, view: View, ctx: TierContext) -> View:
        """The latest user request back in the prompt when the cascade took its round,
        with room made for it by one more pass under the budget less its size; in a
        function's frame, the person's latest request at the top level too."""
        top = top_request(ctx)
        requests = [r for r in (top, latest_request(ctx)) if r is not None]
        for _ in requests:  # the room made for one may take the round that showed the other
            for request in requests:
                if shown(view, request):
                    continue
                if view.tokens + request.tokens > ctx.budget:
                    budget = ctx.budget
                    ctx.budget = max(1, budget - request.tokens)
                    try:
                        view = self.compact_pass(view, ctx)
                    finally:
                        ctx.budget = budget
                view = with_request(view, request, outer=request is top)
                if view.tokens > ctx.budget:  # the room made was not enough: one more pass
                    view = self.compact_pass(view, ctx)
        if view.tokens > ctx.budget:  # the rest could not make room: the last resort cuts
            for tier in self.tiers:  # the requests too, to their floor and after the others
                if tier.name == "emergency" and tier.compact is not None:
                    view = self.run_tier(tier.name, tier.compact, view, ctx)
        return view

    def run(self, view: View, ctx: TierContext) -> View:
        """Re-apply what was decided, then let the tiers act over their triggers."""
        return self.compact_pass(self.prepare(view, ctx), ctx)

    def prepare(self, view: View, ctx: TierContext) -> View:
        """Re-apply earlier decisions in the order they were made (the ``early`` ones,
        which only drop units, first), let the ``always`` tiers act, and add the working
        set to the newest compaction's summary (``_working``)."""
        for tier in self.tiers:
            if tier.apply is not None and tier.early:
                view = self.run_tier(tier.name, tier.apply, view, ctx)
        for tier in self.tiers:
            if tier.compact is not None and tier.name in self.policy.always:
                view = self.run_tier(tier.name, tier.compact, view, ctx)
        for tier in self.tiers:
            if tier.apply is not None and not tier.early:
                view = self.run_tier(tier.name, tier.apply, view, ctx)
        if not self.policy.working_set_tokens:
            return view
        return self.run_tier("working_set", with_working_set, view, ctx)

    def compact_pass(self, view: View, ctx: TierContext) -> View:
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
        ctx.incremental = self.incremental
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

    def finish(
        self, view: View, ctx: TierContext
    ) -> tuple[list[ChatMessage], int, list[MessageSource]]:
        """The prompt's messages after the integrity repairs, their tokens, and each
        message's source, with no render named (``Decision.rendered`` names it: a receipt
        keeps them so, and a render that decides again stamps only its last pass)."""
        messages = view.messages
        tokens = view.tokens
        done = None
        if self.incremental:
            done = self.finisher.finish(view, ctx, self.policy.merge_roles, messages)
        fixed, notes, sources = done if done is not None else self._finish(view, ctx)
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
        return fixed, tokens, sources

    def _finish(
        self, view: View, ctx: TierContext
    ) -> tuple[list[ChatMessage], list[str], list[MessageSource]]:
        """``finish``'s passes over the whole prompt (what ``Finisher`` resumes)."""
        messages = view.messages
        shown = view_sources(view, ctx, "")
        fixed, notes = repair_tool_pairs(messages)
        by_message = {id(m): source for m, source in zip(messages, shown, strict=True)}
        sources = [by_message.get(id(m)) or added("") for m in fixed]
        fixed, renamed = unique_call_ids(fixed)  # one message for one: sources stay
        notes += renamed
        if self.policy.merge_roles:
            fixed, role_notes, groups = grouped_roles(fixed)
            sources = [merged(sources, group, "") for group in groups]
            notes += role_notes
        return fixed, notes, sources
