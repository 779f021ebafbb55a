"""Actor isolation held by PostgreSQL itself: a find's transaction sees only what its actor may see.

A finding transaction (``PgStorage.reading(as_actor=...)``) runs as the role ``cortexctl_viewer``
(``SET LOCAL ROLE``) with the acting actor declared in the setting ``cortexctl.viewer`` and the
actors who ever granted it a scope in ``cortexctl.granters`` (read from ``grants`` by the same
statement, in the transaction's snapshot). Row-level security policies, restrictive and binding the
role itself (``current_user``, not a member inheriting its rights), hold it to:

- ``heads``: the actor's own memories, public ones, and the scoped memories of an actor who has
  granted it a scope (any grant, live or not: the engine's rule, ``rules.visibility``, is the exact
  one and always narrower; this is the floor no query can go under);
- ``versions``, ``frames``, ``journal``: rows of a memory whose head it sees (a journal entry
  without a memory, or the actor's own, too).

So a query that forgot the visibility rule still cannot hand one actor another's private memory:
the database leaves the row out. Every other role (the store's owner, a role granted the tables'
rights) meets a permissive policy that lets every row through: writers, ``verify``, ``backup`` and
``restore`` see the whole store as before, at no cost (the owner is not subject to row security at
all). Term postings and vectors hold no text and stay unrestricted (so pgvector's HNSW index and the
postings' covering index keep serving find). What it costs a warm find at 100k memories:
``bench/pg_bench.py --find-only`` (1.03-1.06x the same finds unheld).

It guards against a bug, not a hostile client: whoever holds the store's password may declare any
actor, or read the tables as their owner.

Made by the store's first write in a process (``PgStorage._make_current``), by a migration and by
a restore; recorded in ``meta`` 'isolation' (its version). The role is the server's (one for every
store on it): a user with CREATEROLE makes it and grants it to itself (from PostgreSQL 16 WITH
INHERIT FALSE, SET TRUE); otherwise the administrator makes it and grants it (README, "Sharing one
memory across machines"). A member that inherits the role's rights is not held by them: the policies
bind ``current_user``. A user who may not take the role on, or whose role may not use pgvector's
schema, reads with the engine's rule alone, and ``healthcheck`` says so (degraded).
"""

from __future__ import annotations

ROLE = "cortexctl_viewer"
SETTING = "cortexctl.viewer"
GRANTERS = "cortexctl.granters"  # the actors who ever granted the viewer a scope, as a text[] literal
VERSION = 1  # raised with any change to the policies: stores made before get them from their next write
VIEWER = f"current_setting('{SETTING}', true)"

# the restrictive policies of the viewer role, by table (the granters are looked up once, by ``hold``,
# not by a subquery in every statement: a policy's subquery is planned with each statement)
SEEN = {
    "heads": (f"visibility = 'public' OR actor = {VIEWER} OR (visibility = 'scoped'"
              f" AND actor = ANY(coalesce(nullif(current_setting('{GRANTERS}', true), ''), '{{}}')::text[]))"),
    "versions": "EXISTS (SELECT 1 FROM heads h WHERE h.id = versions.id)",
    "frames": "EXISTS (SELECT 1 FROM heads h WHERE h.id = frames.id)",
    "journal": f"ref IS NULL OR actor = {VIEWER} OR EXISTS (SELECT 1 FROM heads h WHERE h.id = journal.ref)",
}


def install(con, schema: str) -> bool:
    """Make the viewer role (when missing), grant it reading of ``schema``'s tables and put the
    policies on them, in a savepoint of the caller's transaction (which holds the writer lock; the
    search path names ``schema``). False, with nothing changed, when this user may not."""
    import psycopg

    from cortexctl.store.pg import quote_ident

    try:
        with con.transaction():
            con.execute(f"""DO $do$ BEGIN
                IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{ROLE}') THEN
                    CREATE ROLE {ROLE} NOLOGIN;
                END IF;
            EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;  -- made meanwhile by another store
            END $do$""")
            may = con.execute("SELECT pg_has_role(current_user, %s, %s)", [ROLE, _taking(con)]).fetchone()[0]
            if not may:  # to take it on (a user with CREATEROLE who just made it has ADMIN on it, not SET)
                with_ = " WITH INHERIT FALSE, SET TRUE" if con.info.server_version >= 160000 else ""
                con.execute(f"GRANT {ROLE} TO CURRENT_USER{with_}")
            con.execute(f"GRANT USAGE ON SCHEMA {quote_ident(schema)} TO {ROLE}")
            con.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {quote_ident(schema)} TO {ROLE}")
            row = con.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace"
                              " WHERE e.extname = 'vector'").fetchone()
            if row is not None and row[0] != schema:  # pgvector's schema: readable by every role, as a rule
                try:
                    with con.transaction():
                        con.execute(f"GRANT USAGE ON SCHEMA {quote_ident(row[0])} TO {ROLE}")
                except psycopg.errors.InsufficientPrivilege:
                    pass
            for table, seen in SEEN.items():
                con.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
                con.execute(f"DROP POLICY IF EXISTS {table}_any ON {table}")
                con.execute(f"DROP POLICY IF EXISTS {table}_seen ON {table}")
                con.execute(f"CREATE POLICY {table}_any ON {table} USING (true) WITH CHECK (true)")
                # for the role itself, not for a member who inherits its rights (a grant made without
                # INHERIT FALSE): only a view that took the role on is held
                con.execute(f"CREATE POLICY {table}_seen ON {table} AS RESTRICTIVE FOR SELECT"
                            f" USING (current_user <> '{ROLE}' OR {seen})")
            con.execute("INSERT INTO meta VALUES ('isolation', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                        [str(VERSION)])
        return True
    except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction):
        return False


def installed(con) -> bool:
    """The store has this cortexctl's policies, or a newer one's (never put back to older ones)."""
    row = con.execute("SELECT value FROM meta WHERE key = 'isolation'").fetchone()
    return row is not None and str(row[0]).isdigit() and int(row[0]) >= VERSION


# the store has exactly this cortexctl's policies (a newer cortexctl's may ask for settings this one
# does not make: its views go unheld, the engine's rule alone), this user may take the role on, and
# the role may use pgvector's schema (a GRANT this user could not give only warns)
HOLDABLE = ("EXISTS (SELECT 1 FROM meta, pg_roles r WHERE key = 'isolation' AND value = %s AND r.rolname = %s"
            " AND pg_has_role(current_user, r.oid, %s) AND NOT EXISTS (SELECT 1 FROM pg_extension e"
            " WHERE e.extname = 'vector' AND NOT has_schema_privilege(r.oid, e.extnamespace, 'USAGE')))")


def _taking(con) -> str:
    """The privilege a role needs to take the viewer role on: SET from PostgreSQL 16, membership before."""
    return "SET" if con.info.server_version >= 160000 else "MEMBER"


def state(con) -> str:
    """"database" when this user's finds are held to their actor by the database, else "engine"."""
    held = con.execute(f"SELECT {HOLDABLE}", [str(VERSION), ROLE, _taking(con)]).fetchone()[0]
    return "database" if held else "engine"


def hold(con, actor: str) -> bool:
    """Hold the open transaction to what ``actor`` sees (the viewer role, the actor declared); False,
    with nothing changed, when the store has no policies or this user may not take the role on."""
    row = con.execute(f"SELECT set_config(%s, (SELECT coalesce(array_agg(DISTINCT granter), '{{}}')::text FROM grants"
                      f" WHERE subagent = %s), true), set_config(%s, %s, true), set_config('role', %s, true)"
                      f" WHERE {HOLDABLE}", [GRANTERS, actor, SETTING, actor, ROLE, str(VERSION), ROLE,
                                              _taking(con)]).fetchone()
    return row is not None


__all__ = ["ROLE", "SETTING", "GRANTERS", "SEEN", "install", "installed", "state", "hold"]
