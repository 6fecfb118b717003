"""A joined node's access to the main box's database, given at its join and taken back at its removal.

- PostgreSQL, when the app's own role may create roles (superuser or CREATEROLE): each node gets a
  role of its own (``qwenweb-node-<name>``, a random password) that may read and write the app's
  tables (those of later migrations too) but not change their shape. Removing the node revokes
  what it was granted, ends its sessions where the app's role may, and drops the role.
- PostgreSQL otherwise: the node gets the app's own account; its password cannot be revoked per node
  (the staff page says so).
- SQLite: only a node on this same machine can share the file; it gets the file's path.
"""

from __future__ import annotations

import contextlib
import secrets
from typing import Literal

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from psycopg import sql

PREFIX = "qwenweb-node-"
Access = Literal["sqlite", "role", "shared"]


def role_name(node: str) -> str:
    return PREFIX + node


def access() -> Access:
    """How nodes reach the database here."""
    if connection.vendor != "postgresql":
        return "sqlite"
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    return "role" if row and row[0] else "shared"


def address(host: str) -> dict:
    """Where the node finds the database (no credentials): the registration's answer. ``host``: the
    database's host as the node reaches it, for one that listens on this box's loopback only."""
    database = settings.DATABASES["default"]
    if connection.vendor != "postgresql":
        return {"engine": "sqlite", "path": str(database["NAME"])}
    own = database.get("HOST") or "127.0.0.1"
    where = host if own in ("127.0.0.1", "localhost", "::1") else own
    return {"engine": "postgresql", "host": where, "port": int(database.get("PORT") or 5432), "name": database["NAME"]}


def grant(node: str, host: str) -> dict:
    """The node's database, with its credentials: the join's answer (run inside the join's transaction)."""
    found = address(host)
    kind = access()
    if kind == "sqlite":
        return found
    if kind == "shared":
        database = settings.DATABASES["default"]
        return {**found, "user": database["USER"], "password": database["PASSWORD"]}
    revoke(node)  # a role of that name left by a removal that failed half-way
    password = secrets.token_urlsafe(32)
    _execute_each(_grants(node, password))
    return {**found, "user": role_name(node), "password": password}


def revoke(node: str) -> None:
    """Drop the node's own role, when it has one (run inside the removal's transaction)."""
    if access() != "role":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role_name(node)])
        if cursor.fetchone() is None:
            return
    _execute_each(_revokes(node)[:1])
    # In a savepoint, as it may be refused: the app's role may not end others' sessions (they lose every right below).
    with contextlib.suppress(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", [role_name(node)])
    _execute_each(_revokes(node)[1:])


def _grants(node: str, password: str) -> list[sql.Composed]:
    role, database, schema = sql.Identifier(role_name(node)), _database(), _schema()
    tables, sequences = "SELECT, INSERT, UPDATE, DELETE", "USAGE, SELECT, UPDATE"
    return [
        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(role, sql.Literal(password)),
        sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(database, role),
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, role),
        sql.SQL(f"GRANT {tables} ON ALL TABLES IN SCHEMA {{}} TO {{}}").format(schema, role),
        sql.SQL(f"GRANT {sequences} ON ALL SEQUENCES IN SCHEMA {{}} TO {{}}").format(schema, role),
        # Tables later migrations make (the app's role makes them) are the node's to use too.
        sql.SQL(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {{}} GRANT {tables} ON TABLES TO {{}}").format(schema, role),
        sql.SQL(f"ALTER DEFAULT PRIVILEGES IN SCHEMA {{}} GRANT {sequences} ON SEQUENCES TO {{}}").format(schema, role),
    ]


def _revokes(node: str) -> list[sql.Composed]:
    role, database, schema = sql.Identifier(role_name(node)), _database(), _schema()
    return [
        sql.SQL("ALTER ROLE {} NOLOGIN").format(role),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} REVOKE ALL ON TABLES FROM {}").format(schema, role),
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} REVOKE ALL ON SEQUENCES FROM {}").format(schema, role),
        sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA {} FROM {}").format(schema, role),
        sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA {} FROM {}").format(schema, role),
        sql.SQL("REVOKE ALL ON SCHEMA {} FROM {}").format(schema, role),
        sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(database, role),
        sql.SQL("DROP ROLE {}").format(role),
    ]


def _database() -> sql.Identifier:
    return sql.Identifier(settings.DATABASES["default"]["NAME"])


def _schema() -> sql.Identifier:
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_schema()")
        return sql.Identifier(cursor.fetchone()[0])


def _execute_each(statements: list[sql.Composed]) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)
