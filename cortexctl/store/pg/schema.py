"""The PostgreSQL store's schema: named, transactional, recorded migrations, as for DuckDB.

A PostgreSQL store is one schema of a database (``cortexctl`` unless the URI's
``schema`` parameter names another), so several stores can share a database. Its
tables hold what the DuckDB store's hold, in PostgreSQL's types; vectors are pgvector's
``vector`` (float32, the ground truth) with one HNSW index per model over their
``halfvec`` form (``store/pg/vectors.py``). Migrations run under the store's writer
lock, each in the transaction that records it in ``schema_migrations``; a store whose
version is newer than the newest migration here is refused (``SchemaTooNew``).

Schema versions are numbered as the DuckDB store's are: a PostgreSQL store at version N
holds the tables of a DuckDB store at version N, so a bundle's ``schema_version`` means
the same on both backends. The first migration here is therefore number 4.
"""

from __future__ import annotations

from typing import Callable

from cortexctl.errors import IntegrityError, SchemaTooNew

MIGRATIONS: list[tuple[int, str, Callable]] = []


def migration(number: int):
    def register(fn: Callable) -> Callable:
        MIGRATIONS.append((number, fn.__name__, fn))
        return fn

    return register


@migration(4)
def m001_store(cur) -> None:
    """Every table of the DuckDB store at its schema version 4, in PostgreSQL's types."""
    cur.execute("""
        CREATE TABLE heads (
            id text PRIMARY KEY,
            type smallint NOT NULL,
            actor text NOT NULL,
            visibility text NOT NULL,
            tags text[] NOT NULL,
            frames text[] NOT NULL,
            importance smallint NOT NULL,
            session text,
            current_version integer NOT NULL,
            created_at timestamp NOT NULL,
            updated_at timestamp NOT NULL,
            short text NOT NULL,
            medium text NOT NULL,
            tombstone_reason text,
            tombstoned_at timestamp,
            tombstoned_by text,
            access_count bigint NOT NULL DEFAULT 0,
            citations bigint NOT NULL DEFAULT 0,
            last_used timestamp,
            confidence double precision NOT NULL DEFAULT 1.0
        )""")
    cur.execute("CREATE INDEX heads_actor ON heads (actor, visibility)")
    cur.execute("CREATE INDEX heads_session ON heads (session) WHERE session IS NOT NULL")
    cur.execute("CREATE INDEX heads_tags ON heads USING gin (tags)")
    cur.execute("""
        CREATE TABLE versions (
            id text NOT NULL,
            version integer NOT NULL,
            type smallint NOT NULL,
            data bytea NOT NULL,
            hash bytea NOT NULL,
            created_at timestamp NOT NULL,
            created_by text NOT NULL,
            confidence double precision NOT NULL,
            provenance text NOT NULL,
            short text NOT NULL,
            medium text NOT NULL,
            forms_override boolean NOT NULL,
            PRIMARY KEY (id, version)
        )""")
    cur.execute("CREATE TABLE frames (id text NOT NULL, verb text NOT NULL, kind text NOT NULL, ref text NOT NULL)")
    cur.execute("CREATE INDEX frames_lookup ON frames (verb, kind, ref)")
    cur.execute("CREATE INDEX frames_id ON frames (id)")
    cur.execute("""
        CREATE TABLE journal (
            seq bigint PRIMARY KEY,
            kind text NOT NULL,
            ts timestamp NOT NULL,
            actor text NOT NULL,
            ref text,
            payload bytea NOT NULL
        )""")
    cur.execute("CREATE INDEX journal_ref ON journal (ref) WHERE ref IS NOT NULL")
    cur.execute("""
        CREATE TABLE vectors (
            key bigint PRIMARY KEY,
            id text NOT NULL,
            version integer NOT NULL,
            model text NOT NULL,
            dim smallint NOT NULL,
            vec vector NOT NULL
        )""")
    cur.execute("CREATE INDEX vectors_id ON vectors (id, model)")
    cur.execute("CREATE INDEX vectors_model ON vectors (model, key)")
    cur.execute("CREATE TABLE lex_docs (doc bigint PRIMARY KEY, id text NOT NULL UNIQUE, len integer NOT NULL)")
    cur.execute("CREATE TABLE lex_postings (term bigint NOT NULL, doc bigint NOT NULL, tf smallint NOT NULL)")
    # covering: a term's postings are read from the index alone (an index-only scan, once vacuumed)
    cur.execute("CREATE INDEX lex_postings_term ON lex_postings (term) INCLUDE (doc, tf)")
    cur.execute("CREATE INDEX lex_postings_doc ON lex_postings (doc)")
    cur.execute("""
        CREATE TABLE learned_weights (
            actor text PRIMARY KEY,
            recency double precision NOT NULL,
            importance double precision NOT NULL,
            access double precision NOT NULL,
            citations double precision NOT NULL,
            confidence double precision NOT NULL,
            steps bigint NOT NULL,
            seq bigint NOT NULL,
            updated_at timestamp NOT NULL
        )""")
    cur.execute("CREATE TABLE rate_buckets (actor text NOT NULL, intent text NOT NULL,"
                " tokens double precision NOT NULL, updated_at timestamp NOT NULL, PRIMARY KEY (actor, intent))")
    cur.execute("CREATE TABLE checkpoints (actor text NOT NULL, intent text NOT NULL, step text NOT NULL,"
                " created_at timestamp NOT NULL, seq bigint NOT NULL, record bytea NOT NULL,"
                " PRIMARY KEY (actor, intent, step))")
    cur.execute("CREATE TABLE grants (id text PRIMARY KEY, granter text NOT NULL, subagent text NOT NULL,"
                " types smallint[] NOT NULL, tags text[] NOT NULL, created_at timestamp NOT NULL,"
                " expires_at timestamp, revoked_at timestamp, revoked_by text)")
    cur.execute("CREATE INDEX grants_subagent ON grants (subagent)")


@migration(5)
def m005_valid_time(cur) -> None:
    """Valid time and supersede links on the heads, as the DuckDB store's migration 5."""
    cur.execute("ALTER TABLE heads ADD COLUMN valid_from timestamp, ADD COLUMN valid_to timestamp,"
                " ADD COLUMN supersedes text, ADD COLUMN superseded_by text")


@migration(6)
def m006_implied_write_fields(cur) -> None:
    """No table changes, as the DuckDB store's migration 6: ``write`` entries leave out implied fields."""


@migration(7)
def m007_half_vectors(cur) -> None:
    """No table changes: the DuckDB store's migration 7 holds vectors as float16, and so does a bundle
    from version 7 on (its ``vec`` BLOBs; ``store/pg/bundle.py`` converts). PostgreSQL keeps
    pgvector's ``vector``."""


def latest() -> int:
    return MIGRATIONS[-1][0]


def version(cur) -> int:
    """The store's schema version; 0 when the schema holds no cortexctl tables yet."""
    cur.execute("SELECT to_regclass('meta') IS NOT NULL")
    if not cur.fetchone()[0]:
        return 0
    cur.execute("SELECT value FROM meta WHERE key = 'schema_version'")
    row = cur.fetchone()
    if row is None or not str(row[0]).isdigit():
        raise IntegrityError("the store's schema version record is missing or unreadable (damaged store)")
    return int(row[0])


def check(have: int) -> bool:
    """True when the store is current; SchemaTooNew for a store from a newer cortexctl."""
    if have > latest():
        raise SchemaTooNew(
            f"store schema version {have} is newer than this cortexctl understands ({latest()})",
            hint="upgrade cortexctl to open this store",
        )
    return have == latest()


def migrate(cur, have: int) -> list[str]:
    """Apply every migration above ``have`` inside the caller's transaction (which holds the
    store's writer lock); returns their names."""
    applied = []
    for number, name, fn in MIGRATIONS:
        if number <= have:
            continue
        if have == 0 and number == MIGRATIONS[0][0]:
            cur.execute("CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)")
            cur.execute("CREATE TABLE schema_migrations (number integer PRIMARY KEY, name text NOT NULL,"
                        " applied_at timestamp NOT NULL)")
        fn(cur)
        cur.execute("INSERT INTO schema_migrations VALUES (%s, %s, now() AT TIME ZONE 'UTC')", [number, name])
        cur.execute("INSERT INTO meta VALUES ('schema_version', %s)"
                    " ON CONFLICT (key) DO UPDATE SET value = excluded.value", [str(number)])
        applied.append(name)
    if applied and have:
        # the rows of heads and vectors are counted again by the next write (store/pg/vectors.py
        # ROW_COUNTS): a migration that made a table anew would have left its counting triggers behind
        cur.execute("DELETE FROM meta WHERE key LIKE %s OR key = 'changes'", ["rows:%"])
    return applied
