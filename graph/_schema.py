"""The graph's tables, declared with sqlmodel; created and changed only by migrations."""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Index, Integer, Table, Text
from sqlmodel import Field, SQLModel


class SessionRow(SQLModel, table=True):
    """A session: its seq counter and the head its last writer left."""

    __tablename__ = "graph_sessions"

    id: str = Field(primary_key=True, max_length=128)
    created_us: int = Field(sa_column=Column(BigInteger, nullable=False))
    next_seq: int = Field(default=0, sa_column=Column(BigInteger, nullable=False))
    head: str | None = Field(default=None, max_length=128)
    meta: str = Field(default="{}", sa_column=Column(Text, nullable=False))


class NodeRow(SQLModel, table=True):
    """A node: immutable once written (payload and meta are JSON text)."""

    __tablename__ = "graph_nodes"
    __table_args__ = (Index("ix_graph_nodes_session_seq", "session", "seq", unique=True),)

    id: str = Field(primary_key=True, max_length=128)
    session: str = Field(max_length=128)
    seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    kind: str = Field(max_length=16)
    at_us: int = Field(sa_column=Column(BigInteger, nullable=False))
    payload: str = Field(sa_column=Column(Text, nullable=False))
    meta: str = Field(default="{}", sa_column=Column(Text, nullable=False))


class EdgeRow(SQLModel, table=True):
    """A typed edge; edges only ever point from an older node at a newer one."""

    __tablename__ = "graph_edges"
    __table_args__ = (Index("ix_graph_edges_session_dst", "session", "dst"),)

    src: str = Field(primary_key=True, max_length=128)
    dst: str = Field(primary_key=True, max_length=128)
    type: str = Field(primary_key=True, max_length=16)
    session: str = Field(max_length=128)


class EventRow(SQLModel, table=True):
    """A sequenced later fact about a node (result, finish, fork)."""

    __tablename__ = "graph_events"

    session: str = Field(primary_key=True, max_length=128)
    seq: int = Field(sa_column=Column(BigInteger, primary_key=True))
    node_id: str = Field(max_length=128, index=True)
    at_us: int = Field(sa_column=Column(BigInteger, nullable=False))
    data: str = Field(sa_column=Column(Text, nullable=False))


class ValueRow(SQLModel, table=True):
    """A keyed value another layer keeps per session (token counts, tier state)."""

    __tablename__ = "graph_values"

    session: str = Field(primary_key=True, max_length=128)
    namespace: str = Field(primary_key=True, max_length=64)
    key: str = Field(primary_key=True, max_length=200)
    value: str = Field(sa_column=Column(Text, nullable=False))


class LogRow(SQLModel, table=True):
    """An append-only entry another layer keeps per session (compaction records)."""

    __tablename__ = "graph_logs"
    __table_args__ = (
        Index("ix_graph_logs_key", "session", "namespace", "key", unique=True),
        Index("ix_graph_logs_order", "session", "namespace", "position"),
    )

    position: int | None = Field(
        default=None,
        sa_column=Column(
            BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
    )
    session: str = Field(max_length=128)
    namespace: str = Field(max_length=64)
    key: str = Field(max_length=200)
    seq: int = Field(sa_column=Column(BigInteger, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))


class LeaseRow(SQLModel, table=True):
    """Who is running a function node, until when (renewed by a heartbeat)."""

    __tablename__ = "graph_leases"

    session: str = Field(primary_key=True, max_length=128)
    function_id: str = Field(primary_key=True, max_length=128)
    owner: str = Field(max_length=200)
    expires_us: int = Field(sa_column=Column(BigInteger, nullable=False))


class DatabaseRow(SQLModel, table=True):
    """Facts about the database itself: its ``id`` (a UUID made once, when it was created
    or first migrated), which names the state folder that serves it."""

    __tablename__ = "graph_database"

    key: str = Field(primary_key=True, max_length=64)
    value: str = Field(sa_column=Column(Text, nullable=False))


class MigrationRow(SQLModel, table=True):
    """One applied migration, by name."""

    __tablename__ = "graph_migrations"

    name: str = Field(primary_key=True, max_length=200)
    applied_us: int = Field(sa_column=Column(BigInteger, nullable=False))


def _table(model: type[SQLModel]) -> Table:
    table = model.__table__  # type: ignore[attr-defined]
    assert isinstance(table, Table)
    return table


SESSIONS = _table(SessionRow)
NODES = _table(NodeRow)
EDGES = _table(EdgeRow)
EVENTS = _table(EventRow)
VALUES = _table(ValueRow)
LOGS = _table(LogRow)
LEASES = _table(LeaseRow)
MIGRATIONS = _table(MigrationRow)
DATABASE = _table(DatabaseRow)
