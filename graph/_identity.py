"""The database UUID, and what tells a PostgreSQL clone from its original.

A database's UUID (``graph_database``, key ``id``) names its state folder. PostgreSQL's
``CREATE DATABASE … TEMPLATE`` (and a dump restored elsewhere) copies the table, so a
clone would carry its original's UUID and share its state folder: ``gc`` against the clone
would remove the original's files. So the UUID is stored beside the identity of the
database that made it (key ``identity``): the cluster's system identifier and the
database's ``pg_database`` oid, which a clone never shares with its original (a rename
keeps both, and so its folder). When they disagree the database is a clone, and its UUID
becomes a new one derived from the old UUID and its own identity: the same on every host
and for every reader, a read-only one included (which cannot store it), and stored by the
first writer. A SQLite file cannot tell its copy this way (``cp`` copies the file whole):
the state folder's marker names the file instead (``context``), and :func:`rekey` gives a
copy a UUID of its own on purpose.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, select, text, update
from sqlalchemy.exc import SQLAlchemyError

from ._schema import DATABASE

ID = "id"
IDENTITY = "identity"


def own_identity(connection: Connection) -> str | None:
    """This PostgreSQL database's identity, ``<system identifier>:<oid>`` (None for
    another dialect; the system identifier is left out where the role may not read it)."""
    if connection.dialect.name != "postgresql":
        return None
    oid = connection.execute(
        text("SELECT oid FROM pg_database WHERE datname = current_database()")
    ).scalar()
    system = "-"
    savepoint = connection.begin_nested()
    try:
        found = connection.execute(text("SELECT system_identifier FROM pg_control_system()"))
        system = str(found.scalar())
    except SQLAlchemyError:
        savepoint.rollback()
    else:
        savepoint.commit()
    return f"{system}:{oid}"


def record_identity(connection: Connection) -> None:
    """Store this database's identity beside its UUID (when there is none yet)."""
    identity = own_identity(connection)
    if identity is None:
        return
    found = connection.execute(select(DATABASE.c.value).where(DATABASE.c.key == IDENTITY))
    if found.first() is None:
        connection.execute(DATABASE.insert().values(key=IDENTITY, value=identity))


def _same(recorded: str, identity: str) -> bool:
    """Whether two identities are one database's: the oids agree, and so do the system
    identifiers where both were readable (a role may gain or lose the right to read it)."""
    (was_system, _, was_oid), (system, _, oid) = recorded.partition(":"), identity.partition(":")
    return was_oid == oid and (was_system == system or "-" in (was_system, system))


def database_id(connection: Connection, *, writable: bool) -> str | None:
    """The UUID of the database ``connection`` is on, a clone's own one (see above);
    ``writable``: store what was found (an identity not yet recorded, a clone's UUID)."""
    found = connection.execute(select(DATABASE.c.key, DATABASE.c.value)).all()
    rows = {str(key): str(value) for key, value in found}
    stored = rows.get(ID)
    if stored is None:
        return None
    identity = own_identity(connection)
    recorded = rows.get(IDENTITY)
    if identity is None or (recorded is not None and _same(recorded, identity)):
        return str(stored)
    if recorded is None:
        if writable:
            record_identity(connection)
        return str(stored)
    mine = str(uuid.uuid5(uuid.NAMESPACE_URL, f"openprogram-clone:{stored}:{identity}"))
    if writable:
        mint = update(DATABASE).where(DATABASE.c.key == ID, DATABASE.c.value == stored)
        changed = connection.execute(mint.values(value=mine))
        if changed.rowcount:
            connection.execute(
                update(DATABASE).where(DATABASE.c.key == IDENTITY).values(value=identity)
            )
    return mine


def rekey(connection: Connection) -> str:
    """Give the database a new UUID (a copy becoming a database of its own), stored with
    its own identity beside it; returns the new UUID."""
    mine = str(uuid.uuid4())
    changed = connection.execute(update(DATABASE).where(DATABASE.c.key == ID).values(value=mine))
    if not changed.rowcount:
        connection.execute(DATABASE.insert().values(key=ID, value=mine))
    identity = own_identity(connection)
    if identity is not None:
        stored = update(DATABASE).where(DATABASE.c.key == IDENTITY).values(value=identity)
        if not connection.execute(stored).rowcount:
            connection.execute(DATABASE.insert().values(key=IDENTITY, value=identity))
    return mine
