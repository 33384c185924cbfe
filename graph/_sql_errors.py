"""The SQL store's database errors as one-line ``StoreError``s that say what is wrong and
where: a table the database predates, a write to a database opened read-only, rows the
database cannot read (a damaged file), or the driver's words."""

from __future__ import annotations

import re

from sqlalchemy.exc import SQLAlchemyError

from ._errors import StoreError

_PREDATES = {
    "graph_sessions": "graph_0001_initial",
    "graph_nodes": "graph_0001_initial",
    "graph_edges": "graph_0001_initial",
    "graph_events": "graph_0001_initial",
    "graph_values": "graph_0002_side_tables",
    "graph_logs": "graph_0002_side_tables",
    "graph_leases": "graph_0003_leases",
}
_MISSING_TABLE = re.compile(r'no such table: (\w+)|relation "(\w+)" does not exist')
_READ_ONLY = re.compile(r"readonly database|read-only transaction", re.IGNORECASE)


def store_error(url: str, error: SQLAlchemyError) -> StoreError:
    """One line that says what is wrong: a table the database predates, a write to a
    database opened read-only, or the driver's words."""
    text = " ".join(str(getattr(error, "orig", None) or error).split())
    missing = _MISSING_TABLE.search(text)
    if missing:
        table = missing.group(1) or missing.group(2)
        migration = _PREDATES.get(table)
        since = f" (made by migration {migration})" if migration else ""
        return StoreError(
            f"this database ({url}) predates the {table} table{since}; "
            "open it once for writing to migrate it"
        )
    if _READ_ONLY.search(text):
        return StoreError(f"{url} is open read-only; this command would write to it ({text})")
    return StoreError(f"database error on {url}: {text}")


class Unreadable(StoreError):
    """The database failed to read rows (a damaged file or page)."""

    def __init__(self, where: str, problem: str, url: str) -> None:
        self.problem = f"{where}: the database cannot read it ({problem})"
        super().__init__(
            f"damaged database {url}: {self.problem}; ConversationGraph.open(..., repair=True) "
            "or `openprogram check` loads the rest"
        )


TABLES = {
    "nodes": "graph_nodes",
    "events": "graph_events",
    "edges": "graph_edges",
    "edges_after": "graph_edges",
}
"""The table each of the store's read statements reads."""
