"""A throwaway PostgreSQL server for the import tests that read a Postgres source
(LangGraph's `PostgresSaver`; ADK's and LlamaIndex's SQLAlchemy stores on
``postgresql+asyncpg://``).

One server per pytest process (`postgres_server`, session-scoped), started on first use:
a new cluster (`initdb`) in a temporary folder, listening on a unix socket in that folder
only (no TCP port), so two pytest processes side by side each have their own. Durability
is off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the cluster is thrown
away. Each test gets a database of its own (`postgres_database`), dropped afterwards.

The server programs are Debian's (package ``postgresql``, which .ci/run installs):
``/usr/lib/postgresql/<version>/bin``, the newest there, else ``initdb``'s folder on
PATH; or only the folder `MINDSTORE_POSTGRES_BIN` names, when set. PostgreSQL refuses to
run as root; under root the cluster is owned and run by the ``postgres`` user the
package creates (else ``nobody``). Starting it costs about 0.7 s (initdb, then the
server), a database 0.04 s. Without the programs the tests FAIL naming what is missing
(a source path nobody ran against a real server must not pass for one that was); a
developer machine without PostgreSQL may skip them with ``MINDSTORE_SKIP_POSTGRES=1``
(which skips nothing where the programs are there).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

SKIP = "MINDSTORE_SKIP_POSTGRES"
PROGRAMS = "MINDSTORE_POSTGRES_BIN"
SUPERUSER = "postgres"
SETTINGS = """
listen_addresses = ''
unix_socket_directories = '{socket}'
fsync = off
synchronous_commit = off
full_page_writes = off
max_connections = 40
shared_buffers = 16MB
"""


def server_programs() -> Path | None:
    """The folder holding ``initdb``, ``pg_ctl`` and ``postgres``: the one
    `MINDSTORE_POSTGRES_BIN` names when set, else the newest Debian version's, else
    ``initdb``'s on PATH; None when there is none."""
    named = os.environ.get(PROGRAMS)
    if named:
        candidates = [Path(named)]
    else:
        versions = sorted(
            Path("/usr/lib/postgresql").glob("*/bin"),
            key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
        )
        candidates = list(reversed(versions))  # fmt: skip
        on_path = shutil.which("initdb")
        if on_path:
            candidates.append(Path(on_path).resolve().parent)
    for folder in candidates:
        if all((folder / name).is_file() for name in ("initdb", "pg_ctl", "postgres")):
            return folder
    return None


def require_programs() -> Path:
    """`server_programs()`, else the calling test fails naming what is missing (or is
    skipped, when `MINDSTORE_SKIP_POSTGRES` is 1)."""
    programs = server_programs()
    if programs is not None:
        return programs
    where = os.environ.get(PROGRAMS) or "/usr/lib/postgresql/*/bin or on PATH"
    message = (
        f"no PostgreSQL server programs (initdb, pg_ctl, postgres) in {where}: install "
        f"Debian's postgresql package (.ci/run does), or set {SKIP}=1 to skip the tests "
        "that need a PostgreSQL server"
    )
    if os.environ.get(SKIP) == "1":
        pytest.skip(message)
    pytest.fail(message, pytrace=False)


class PostgresServer:
    """A cluster in a temporary folder, reached through its unix socket there."""

    def __init__(self, programs: Path) -> None:
        self.programs = programs
        # under /tmp: reachable by the server's user, and short (a unix socket's path is
        # at most 107 bytes)
        short = "/tmp" if os.path.isdir("/tmp") else None
        self.folder = Path(tempfile.mkdtemp(prefix="mindstore-pg-", dir=short))
        self.data = self.folder / "data"
        self.log = self.folder / "server.log"
        self.user: pwd.struct_passwd | None = None
        if os.geteuid() == 0:  # initdb and postgres refuse root
            names = {entry.pw_name: entry for entry in pwd.getpwall()}
            self.user = names.get("postgres") or names["nobody"]
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        self.folder.chmod(0o700)

    def _run(self, *command: str) -> None:
        as_user = {}
        if self.user is not None:
            as_user = {"user": self.user.pw_uid, "group": self.user.pw_gid, "extra_groups": []}
        done = subprocess.run(
            [str(self.programs / command[0]), *command[1:]], capture_output=True, text=True,
            cwd=self.folder, check=False, **as_user,  # type: ignore[arg-type]
        )  # fmt: skip
        if done.returncode != 0:
            log = self.log.read_text(errors="replace") if self.log.exists() else ""
            raise RuntimeError(f"{command[0]} failed ({done.returncode}): {done.stderr}{log}")

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
                  "--locale=C", "--no-sync", "--no-instructions")  # fmt: skip
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(SETTINGS.format(socket=self.folder))
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    def url(self, database: str, scheme: str = "postgresql") -> str:
        """A URL of `database` on this server (`scheme`: ``postgresql``, or a SQLAlchemy
        one such as ``postgresql+asyncpg``)."""
        return f"{scheme}://{SUPERUSER}@/{database}?host={quote(str(self.folder), safe='/')}"

    def rows(self, database: str) -> dict[str, list[tuple[object, ...]]]:
        """Every row of every table of `database`'s public schema (sorted): equal before
        and after means a source was not written."""
        import psycopg

        with psycopg.connect(self.url(database)) as connection:
            tables = [row[0] for row in connection.execute(
                "SELECT table_name FROM information_schema.tables"
                " WHERE table_schema = 'public' ORDER BY table_name")]  # fmt: skip
            return {
                table: sorted(connection.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
                for table in tables
            }

    def create_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """This process's PostgreSQL server (see the module doc)."""
    programs = require_programs()
    server = PostgresServer(programs)
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[str]:
    """A new, empty database on the server (its name), dropped after the test."""
    name = postgres_server.create_database()
    try:
        yield name
    finally:
        postgres_server.drop_database(name)
