"""Offload: a very long tool output goes to a file, the prompt keeps a preview.

The file (``<state_dir>/tool_results/<session>/<node>.txt``) is a convenience for agents
with file tools; the output always stays in the store, readable by node id from any host.
Writing is idempotent, refuses any name that could escape the folder, and fails open: a
write error leaves the output inline (budget reduction still shortens it) and is recorded.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from graph import is_safe_id, text_of

from ._errors import OffloadError
from ._tier import TierContext
from ._view import Item, View, map_items


def offload_path(state_dir: Path, session: str, node_id: str) -> Path:
    """The file for one node's output; refuses ids that are not one safe path segment."""
    for label, value in (("session", session), ("node", node_id)):
        if not is_safe_id(value):  # one segment of [A-Za-z0-9_.-], never "..", "/" or NUL
            raise OffloadError(f"{label} id {value!r} cannot name a file under {state_dir}")
    folder = (state_dir / "tool_results" / session).resolve()
    path = (folder / f"{node_id}.txt").resolve()
    if path.parent != folder:
        raise OffloadError(f"offload path {path} escapes {folder}")
    return path


def write_output(path: Path, text: str) -> bool:
    """Write ``text`` unless the file already holds it; True when written now."""
    data = text.encode()
    if path.exists() and path.stat().st_size == len(data):
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)
    return True


def preview(text: str, lines: int, line_chars: int) -> str:
    shown = []
    for line in text.splitlines()[:lines]:
        shown.append(line if len(line) <= line_chars else line[:line_chars] + " …")
    return "\n".join(shown)


def placeholder(text: str, node_id: str, path: Path, lines: int, line_chars: int) -> str:
    total_lines = text.count("\n") + (0 if text.endswith("\n") else 1)
    head = preview(text, lines, line_chars)
    return (
        f"[output offloaded: {len(text)} characters, {total_lines} lines; node {node_id}; "
        f'file {path}; read_output("{node_id}") returns all]\n{head}\n[... end of preview]'
    )


def offload(view: View, ctx: TierContext) -> View:
    """Move tool outputs over ``policy.offload_chars`` to files, keeping a preview."""
    policy = ctx.policy
    started = time.perf_counter()
    written: list[dict[str, object]] = []
    errors: list[str] = []

    def change(item: Item) -> Item:
        node_id = item.node_id
        if item.message.get("role") != "tool" or item.variant != "full" or node_id is None:
            return item
        done = ctx.memoized(node_id, "offloaded")
        if done is not None and node_id in ctx.decisions.offloaded:
            return done
        text = text_of(item.message.get("content"))
        if len(text) <= policy.offload_chars or node_id in ctx.decisions.offload_failed:
            return item
        try:
            path = offload_path(policy.state_dir, ctx.session, node_id)
            if write_output(path, text):
                written.append({"node": node_id, "path": str(path), "chars": len(text)})
            ctx.decisions.offloaded[node_id] = str(path)
        except (OSError, OffloadError) as error:
            ctx.decisions.offload_failed.add(node_id)
            errors.append(f"node {node_id}: {error}")
            return item
        shown = policy.state_dir / "tool_results" / ctx.session / f"{node_id}.txt"
        content = placeholder(
            text, node_id, shown, policy.offload_preview_lines, policy.offload_preview_line_chars
        )
        return ctx.item({**item.message, "content": content}, node_id, "offloaded", item.tool_name)

    after, changed = map_items(view, change)
    error = "; ".join(errors) or None
    if changed or errors:
        what = f"offloaded {len(changed)} output(s)" + (f", {len(errors)} failed" if errors else "")
        ctx.act("offload", what, view, after, tuple(changed), error)
    if written or errors:
        ctx.record("offload", view, after, started=started, offloaded=written, error=error)
    return after
