"""A throwaway PostgreSQL cluster for the test session.

``start_cluster()`` runs ``initdb`` and ``pg_ctl start`` in a fresh directory under ``/tmp``.
PostgreSQL refuses to run as root, so when the tests run as root the binaries are run as the
``postgres`` user through ``runuser`` and the directory is handed to that user.
The server listens on a unix socket in that directory and on 127.0.0.1, with trust auth
and durability switched off (fsync, synchronous_commit, full_page_writes).
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import create_engine, make_url, text
from sqlalchemy.pool import NullPool

PG_BIN_ENV = "OPENPROGRAM_TEST_PG_BIN"
DEFAULT_PG_BIN = "/usr/lib/postgresql/15/bin"
PG_USER = "postgres"


class PgStartError(RuntimeError):
    """The cluster could not be created or started; the message carries the tool output."""


@dataclass(frozen=True)
class PgCluster:
    root: Path
    datadir: Path
    sockdir: Path
    port: int
    bindir: Path

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{PG_USER}@/{database}?host={self.sockdir}&port={self.port}"


def _bindir() -> Path:
    configured = os.environ.get(PG_BIN_ENV)
    if configured:
        return Path(configured)
    if Path(DEFAULT_PG_BIN, "pg_ctl").exists():
        return Path(DEFAULT_PG_BIN)
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    raise PgStartError(f"no PostgreSQL binaries: {DEFAULT_PG_BIN} missing, pg_ctl not on PATH")


def _as_pg_user(argv: Sequence[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", PG_USER, "--", *argv]
    return list(argv)


def _run(argv: Sequence[str], timeout: float = 120.0) -> str:
    """Run a PostgreSQL tool; return its combined output, raise PgStartError on failure."""
    cmd = _as_pg_user(argv)
    try:
        done = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PgStartError(f"$ {' '.join(cmd)}\n{exc}") from exc
    if done.returncode != 0:
        raise PgStartError(f"$ {' '.join(cmd)}\nexit {done.returncode}\n{done.stdout}")
    return done.stdout


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _make_root() -> Path:
    """A private directory with a ``sock`` subdirectory, both owned by the server's user."""
    root = Path(tempfile.mkdtemp(prefix="op-pg-", dir="/tmp"))
    (root / "sock").mkdir(mode=0o700)
    if os.geteuid() == 0:
        entry = pwd.getpwnam(PG_USER)
        for path in (root, root / "sock"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    return root


def _log_tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-4000:]
    except OSError:
        return ""


def start_cluster(attempts: int = 3) -> PgCluster:
    """Create and start a cluster; retry on a new port if the chosen one got taken."""
    bindir = _bindir()
    root = _make_root()
    datadir, sockdir, log = root / "data", root / "sock", root / "server.log"
    try:
        _run(
            [
                str(bindir / "initdb"),
                "-D",
                str(datadir),
                "-U",
                PG_USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",
            ]
        )
        errors: list[str] = []
        for _ in range(attempts):
            port = free_port()
            options = (
                f"-k {sockdir} -p {port} -c listen_addresses=127.0.0.1 -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off"
            )
            try:
                _run(
                    [
                        str(bindir / "pg_ctl"),
                        "-D",
                        str(datadir),
                        "-l",
                        str(log),
                        "-w",
                        "-t",
                        "60",
                        "-o",
                        options,
                        "start",
                    ]
                )
            except PgStartError as exc:
                errors.append(f"{exc}\n--- server.log ---\n{_log_tail(log)}")
                continue
            return PgCluster(root=root, datadir=datadir, sockdir=sockdir, port=port, bindir=bindir)
        raise PgStartError("\n\n".join(errors))
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def stop_cluster(cluster: PgCluster) -> None:
    try:
        _run(
            [
                str(cluster.bindir / "pg_ctl"),
                "-D",
                str(cluster.datadir),
                "-w",
                "stop",
                "-m",
                "immediate",
            ]
        )
    finally:
        shutil.rmtree(cluster.root, ignore_errors=True)


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def _admin_execute(url: str, statement: str) -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with engine.connect() as conn:
            conn.execute(text(statement))
    finally:
        engine.dispose()


def create_database(server_url: str, prefix: str = "op_test") -> str:
    """Create a uniquely named database on the server behind ``server_url``; return its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    _admin_execute(server_url, f'CREATE DATABASE "{name}"')
    return with_database(server_url, name)


def drop_database(server_url: str, database_url: str) -> None:
    name = make_url(database_url).database
    _admin_execute(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
