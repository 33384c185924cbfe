"""Offload: a very long tool output goes to a file, the prompt keeps a preview.

The file (``tool_results/<session>/<node>.txt`` in the database's state folder, see
``_folder``) is a convenience for agents
with file tools; the output always stays in the store, readable by node id from any host
(``read_output``). Writing is idempotent, never follows a symlink out of the state folder
(``_files``) and fails open: a write error leaves the output inline (budget reduction still
shortens it) and is recorded. The tier only decides (``ctx.files``); the engine's commit
writes the file before the prompt goes out, and a preview writes nothing.

An output is never tokenized whole here: the placeholder is what is sent and counted. Nor
is it copied whole: the file is written a megabyte at a time, and a file of the right size
is trusted (it is named by the node, whose output never changes), so a fresh engine's
render costs a ``stat`` and the preview's slices, not the output's size.
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from graph import ChatMessage, is_safe_id, text_of

from .._budget._cut import elided_part, middle_truncate
from .._budget._readback import is_history_tool, read_from
from .._budget._redaction import output_redactor
from .._budget._tokens import utf8_length
from .._errors import OffloadError
from .._view import Item, View, map_items
from ._asked import (
    ASKED_SCAN_CHARS,
    asked_block,
    asked_for,
    asked_identifiers,
    asked_lines,
    asked_terms,
    call_of,
)
from ._mentions import mentioned
from ._tier import OffloadFile, Tier, TierContext, TierState


class OffloadState(TierState):
    """Outputs whose file could not be written (kept inline), and outputs offloaded while
    the tier was not in ``policy.always`` (kept offloaded after)."""

    failed: set[str] = msgspec.field(default_factory=set)
    nodes: set[str] = msgspec.field(default_factory=set)


def offload_path(state_dir: Path, session: str, node_id: str) -> Path:
    """The file for one node's output; refuses ids that are not one safe path segment."""
    return state_dir / offload_name(session, node_id)


def offload_name(session: str, node_id: str) -> str:
    """The file for one node's output, relative to the state folder: what a prompt shows,
    so the prompt's bytes are the same on every host and for every reader."""
    for label, value in (("session", session), ("node", node_id)):
        if not is_safe_id(value):  # one segment of [A-Za-z0-9_.-], never "..", "/" or NUL
            raise OffloadError(f"{label} id {value!r} cannot name a file in the state folder")
    return f"tool_results/{session}/{node_id}.txt"


def _current(path: Path, text: str) -> bool:
    """Whether the file is there with the output's size (it is named by the node, whose
    output never changes): then nothing needs writing."""
    try:
        found = path.lstat()
    except OSError:
        return False
    return stat.S_ISREG(found.st_mode) and found.st_size == utf8_length(text)


def mark_failed(states: dict[str, TierState], node_id: str) -> None:
    """The commit could not write a node's file: keep that output inline from now on."""
    state = states.get("offload")
    if not isinstance(state, OffloadState):
        state = states["offload"] = OffloadState()
    state.failed.add(node_id)


def placeholder(
    text: str,
    handle: str,
    head: int,
    tail: int,
    mentions: Sequence[str] = (),
    asked: str = "",
) -> str:
    """The size, how to read the whole output (by the node's ``handle``), its head and
    tail (as budget reduction keeps them, so offloading never shows less than reducing
    would), the identifiers the part between them mentions, and ``asked``: lines of that
    part picked by what the call asked for (``_asked``), shown after the head. It names
    neither the file nor the session: both differ from database to database, and the
    prompt must not.

    >>> placeholder("a" * 30 + "\\n" + "b" * 30, "n7", 4, 3).splitlines()[0]
    '[output offloaded: 61 characters, 2 lines; page by page: read_output("n7", offset=4)]'
    """
    total_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    shown = middle_truncate(text, head, tail, handle, mentions)
    if asked and shown != text:
        picked = "[lines of the middle that name what the call asked for]"
        shown = f"{shown[:head]}\n{picked}\n{asked}{shown[head:]}"
    return (
        f"[output offloaded: {len(text)} characters, {total_lines} lines; "
        f"{read_from(handle, head)}]\n{shown}"
    )


PREVIEW_SHARE = 0.1
"""Share of the budget one offloaded output's preview may take: under a small budget, the
outputs of one round of parallel calls fit beside the rest of the prompt (at 32k, a
preview of the default 4,000 characters is under it)."""


def preview_size(
    text: str, size: tuple[int, int], budget: int, count: Callable[[str], int]
) -> tuple[int, int]:
    """(head, tail) characters of an output's preview: ``size``, scaled down so the two
    parts take at most ``PREVIEW_SHARE`` of ``budget`` tokens (by ``count``). It depends on
    the output and the budget only, so the preview is the same bytes on every render.

    >>> preview_size("x" * 40_000, (2_400, 1_600), 32_000, lambda t: len(t) // 4)
    (2400, 1600)
    >>> preview_size("x" * 40_000, (2_400, 1_600), 2_000, lambda t: len(t) // 4)
    (480, 320)
    """
    head, tail = size
    room = int(budget * PREVIEW_SHARE)
    shown = count(text[:head] + text[len(text) - tail :])
    if shown > room:
        scale = room / shown
        head, tail = int(head * scale), int(tail * scale)
    return head, tail


def _offload(
    view: View, ctx: TierContext, only: set[str] | None
) -> tuple[View, list[str], list[dict[str, object]], list[str]]:
    policy = ctx.policy
    state = ctx.state(OffloadState)
    written: list[dict[str, object]] = []
    errors: list[str] = []
    redactor = output_redactor(policy, ctx.graph)

    asked: dict[str, str] | None = None

    def preview(
        text: str, message: ChatMessage, size: tuple[int, int]
    ) -> tuple[int, int, str, list[str]]:
        """Head, tail, the lines picked by what the call asked for (they take
        ``offload_asked_share`` of the preview's room when there are any) and the
        identifiers its list names first."""
        nonlocal asked
        head, tail = size
        share = policy.offload_asked_share
        if not share:
            return head, tail, "", []
        if asked is None:
            asked = asked_for(view)
        terms = asked_terms(asked.get(call_of(message), ""))
        if not terms:
            return head, tail, "", []
        short_head, short_tail = int(head * (1 - share)), int(tail * (1 - share))
        room = head + tail - short_head - short_tail
        hidden = elided_part(text, short_head, short_tail)[:ASKED_SCAN_CHARS]
        picked = asked_lines(hidden, terms, room)
        if not picked:
            return head, tail, "", []
        before = text.count("\n", 0, short_head)  # line numbers in the whole output
        block = asked_block([(n + before, line) for n, line in picked])
        return short_head, short_tail, block, asked_identifiers(hidden, terms, block)

    def change(item: Item) -> Item:
        node_id = item.node_id
        if item.message.get("role") != "tool" or item.variant != "full" or node_id is None:
            return item
        if only is not None and node_id not in only:
            return item
        if is_history_tool(item.tool_name):
            return item  # a page of what is stored: offloading it points back at itself
        done = ctx.memoized(node_id, "offloaded")
        if done is not None and node_id in ctx.cache_of():
            return done
        text = text_of(item.message.get("content"))
        budget = ctx.nominal_budget or ctx.budget
        if node_id in state.failed or not policy.offloads(len(text), item.tokens, budget):
            return item
        try:
            path = offload_name(ctx.session, node_id)
            if ctx.folder is None:
                raise OffloadError("this render has no state folder to offload to")
        except OffloadError as error:
            state.failed.add(node_id)
            errors.append(f"node {node_id}: {error}")
            return item
        filed = text if redactor is None else redactor.redact(text)
        if not _current(ctx.folder.path / path, filed):
            parts = ("tool_results", ctx.session)
            ctx.files.append(OffloadFile(node_id, parts, f"{node_id}.txt", filed))
            written.append({"node": node_id, "path": path, "chars": len(text)})
        ctx.cache_of()[node_id] = True
        if done is not None:  # made in an earlier render (this frame's scratch is new)
            return done
        head, tail = preview_size(text, policy.offload_preview, budget, ctx.counter.count_text)
        head, tail, lines, first = preview(text, item.message, (head, tail))
        mentions = mentioned(elided_part(text, head, tail), ctx, first)
        content = placeholder(text, ctx.handle(node_id), head, tail, mentions, lines)
        return ctx.item({**item.message, "content": content}, node_id, "offloaded", item.tool_name)

    after, changed = map_items(view, change, outputs_only=ctx.incremental)
    return after, changed, written, errors


def _report(
    ctx: TierContext,
    before: View,
    after: View,
    changed: list[str],
    written: list[dict[str, object]],
    errors: list[str],
    started: float,
) -> None:
    error = "; ".join(errors) or None
    if changed or errors:
        what = f"offloaded {len(changed)} output(s)" + (f", {len(errors)} failed" if errors else "")
        ctx.act("offload", what, before, after, tuple(changed), error)
    if written or errors:
        ctx.record("offload", before, after, started=started, offloaded=written, error=error)


def reapply(view: View, ctx: TierContext) -> View:
    """Keep offloaded what an earlier over-trigger render offloaded."""
    state = ctx.state(OffloadState)
    if not state.nodes:
        return view
    started = time.perf_counter()
    after, changed, written, errors = _offload(view, ctx, state.nodes)
    _report(ctx, view, after, changed, written, errors, started)
    return after


def offload(view: View, ctx: TierContext) -> View:
    """Move tool outputs over ``policy.offload_chars`` (and ``offload_share`` of the budget)
    to files, keeping a preview."""
    started = time.perf_counter()
    after, changed, written, errors = _offload(view, ctx, None)
    if changed and ctx.tier not in ctx.policy.always:
        ctx.state(OffloadState).nodes.update(changed)
    _report(ctx, view, after, changed, written, errors, started)
    return after


TIER = Tier("offload", apply=reapply, compact=offload, state=OffloadState)
