"""Export a whole session to JSON or GraphML, and load such an export back, losslessly.

Both files hold the networkx view (node ids with kind, role or name, status, seq, and each
node's text, for Gephi, yEd or a reader's eyes) and, as a graph attribute, the session's
record log: every node as appended and every later event (tool results, finishes, forks,
layers, rollbacks) in seq order, with the edges. Loading an export replays that log into a
store, so the session comes back with the same ids, seqs, timestamps, payloads, meta and
layers. The format is taken from the file's extension (``.json``, ``.graphml``).

An export can also carry what is kept beside the records (``side``, see
:func:`session_side`): the session's metadata, named branches, and the side values and logs
of every namespace (configuration, compaction records, tier state, render receipts, and
what framework adapters keep: their items and where their mirror stands), so a session
loaded elsewhere renders the same prompts and a framework's run continues on it as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import networkx as nx

from ._branches import BRANCHES
from ._errors import GraphError
from ._nodes import Dialogue, Edge, Event, Function, Node, Tool
from ._nx import to_networkx
from ._state import GraphState
from ._store import Store

__all__ = ["EXPORT_FORMATS", "export_format", "export_session", "load_export", "session_side"]

EXPORT_FORMATS: dict[str, Literal["json", "graphml"]] = {".json": "json", ".graphml": "graphml"}
"""File extension → export format."""
_KEY = "openprogram"
_VERSION = 1
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def export_format(path: str | Path) -> Literal["json", "graphml"]:
    """The export format a file name asks for; ``GraphError`` for an unknown extension."""
    suffix = Path(path).suffix.lower()
    if suffix not in EXPORT_FORMATS:
        known = ", ".join(EXPORT_FORMATS)
        raise GraphError(f"cannot tell the export format of {path}: use one of {known}")
    return EXPORT_FORMATS[suffix]


def _text(node: Node) -> str:
    payload = node.payload
    if isinstance(payload, Dialogue):
        content = payload.content
        return content if isinstance(content, str) else json.dumps(content, default=str)
    if isinstance(payload, Tool):
        return payload.arguments
    assert isinstance(payload, Function)
    return json.dumps(payload.input, default=str)


def session_side(
    store: Store,
    session: str,
    *,
    values: Sequence[str] | None = None,
    logs: Sequence[str] | None = None,
) -> dict[str, Any]:
    """What ``store`` keeps beside a session's records, for an export: its metadata, its
    named branches, and the side values and logs of the namespaces given (None: every
    namespace the session holds, whichever package wrote it: a framework adapter's items
    and mirror index as much as the context engine's state)."""
    if values is None or logs is None:
        held_values, held_logs = store.side_namespaces(session)
        values = held_values if values is None else values
        logs = held_logs if logs is None else logs
    found: dict[str, Any] = {"meta": store.session_meta(session), "values": {}, "logs": {}}
    for namespace in dict.fromkeys((BRANCHES, *values)):
        if kept := store.get_values(session, namespace):
            found["values"][namespace] = kept
    for namespace in logs:
        if entries := store.read_log(session, namespace):
            found["logs"][namespace] = [[e.key, e.seq, e.body] for e in entries]
    return found


def _write_side(store: Store, session: str, side: Mapping[str, Any]) -> None:
    if side.get("meta"):
        store.update_session_meta(session, side["meta"])
    for namespace, values in (side.get("values") or {}).items():
        store.put_values(session, namespace, {str(k): str(v) for k, v in values.items()})
    for namespace, entries in (side.get("logs") or {}).items():
        for key, seq, body in entries:
            store.append_log(session, namespace, [(str(key), str(body))], int(seq))


def _log(
    state: GraphState,
    head: str | None,
    redact: Callable[[Any], Any],
    side: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    records: list[dict[str, Any]] = []
    for record in state.records:
        if isinstance(record, Event):
            records.append({"event": msgspec.to_builtins(record)})
        else:
            node, edges = record
            records.append(
                {"node": msgspec.to_builtins(node), "edges": msgspec.to_builtins(list(edges))}
            )
    log = {"version": _VERSION, "session": state.session, "head": head, "records": redact(records)}
    if side is not None:
        log["side"] = redact(dict(side))
    return log


def export_session(
    state: GraphState,
    path: str | Path,
    *,
    head: str | None = None,
    format: Literal["json", "graphml"] | None = None,
    redact: Callable[[Any], Any] | None = None,
    side: Mapping[str, Any] | None = None,
) -> None:
    """Write the session to ``path`` as node-link JSON or GraphML (``format``, default from
    the extension), complete enough for :func:`load_export`. ``redact`` maps the record log
    (plain JSON values) before it is written, e.g. ``Redactor().value``; ``side`` (from
    :func:`session_side`) is written with it and loaded back."""
    chosen = format or export_format(path)
    clean = redact or (lambda value: value)
    view = to_networkx(state)
    for node_id in view:
        view.nodes[node_id]["text"] = clean(_text(state.nodes[node_id]))
    log = _log(state, head, clean, side)
    if chosen == "json":
        view.graph[_KEY] = log
        data = nx.node_link_data(view, edges="edges")
        Path(path).write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str))
        return
    view.graph[_KEY] = json.dumps(log, ensure_ascii=True)  # escapes every control character
    for node_id in view:
        attrs = view.nodes[node_id]
        attrs["text"] = _NOT_XML.sub("\ufffd", attrs["text"])
        for key in ("name", "role"):
            if isinstance(attrs.get(key), str):
                attrs[key] = _NOT_XML.sub("\ufffd", attrs[key])
    nx.write_graphml(view, str(path))


def _read_log(path: Path) -> dict[str, Any]:
    try:
        if export_format(path) == "json":
            log = json.loads(path.read_text(encoding="utf-8"))["graph"][_KEY]
        else:
            log = json.loads(nx.read_graphml(str(path)).graph[_KEY])
    except (KeyError, TypeError, ValueError) as error:
        raise GraphError(f"{path} is not an openprogram session export ({error})") from None
    if not isinstance(log, dict) or log.get("version") != _VERSION:
        raise GraphError(f"{path}: an export of version {_VERSION} expected")
    return log


def is_export(path: str | Path) -> bool:
    """True when ``path`` is a session export this module can load."""
    try:
        _read_log(Path(path))
    except (GraphError, OSError):
        return False
    return True


def load_export(path: str | Path, store: Store, session: str | None = None) -> str:
    """Load an export into ``store`` as ``session`` (default: the exported session's id);
    returns the session id. Ids are kept, so a store that already holds them (the session
    it came from, say) is refused with ``GraphError``, as is a session that is not empty.
    What the export carries beside the records (``side``) is written in the same
    transaction."""
    log = _read_log(Path(path))
    name = session or str(log["session"])
    records: list[Node | Event] = []
    edges: list[Edge] = []
    try:
        for entry in log["records"]:
            if "event" in entry:
                event = msgspec.convert(entry["event"], Event)
                records.append(msgspec.structs.replace(event, session=name))
            else:
                node = msgspec.convert(entry["node"], Node)
                records.append(msgspec.structs.replace(node, session=name))
                edges.extend(msgspec.convert(entry["edges"], list[Edge]))
    except (msgspec.ValidationError, KeyError, TypeError) as error:
        raise GraphError(f"{path}: a damaged record ({error})") from None
    nodes = [record for record in records if isinstance(record, Node)]
    if nodes and (holder := store.session_of(nodes[0].id)) is not None:
        raise GraphError(
            f"{store.url} already holds the nodes of this export (session {holder}); "
            "load it into another database"
        )
    if store.ensure_session(name) and store.load(name).records:
        raise GraphError(f"session {name!r} already holds nodes in {store.url}")
    side = log.get("side")
    if side is not None and not isinstance(side, dict):
        raise GraphError(f"{path}: a damaged side section")
    with store.transaction():
        if records:
            store.commit(name, records, edges, log.get("head"))
        if side:
            _write_side(store, name, side)
    return name
