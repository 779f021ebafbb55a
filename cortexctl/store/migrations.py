"""Named, transactional, recorded schema migrations.

Each migration is a function ``mNNN_name(con)``; it runs with its record in
``schema_migrations`` inside one transaction, and ``meta.schema_version``
becomes its number. A store whose version is newer than the newest migration
here was written by a newer cortexctl and is refused.
"""

from __future__ import annotations

from typing import Callable

from cortexctl.errors import IntegrityError, SchemaTooNew

MIGRATIONS: list[tuple[int, str, Callable]] = []

CURRENT, OLDER = "current", "older"


def migration(number: int):
    def register(fn: Callable) -> Callable:
        MIGRATIONS.append((number, fn.__name__, fn))
        return fn

    return register


@migration(1)
def m001_initial(con) -> None:
    con.execute(
        """
        CREATE TABLE heads (
            id VARCHAR NOT NULL PRIMARY KEY,
            type UTINYINT NOT NULL,
            actor VARCHAR NOT NULL,
            visibility VARCHAR NOT NULL,
            tags VARCHAR[] NOT NULL,
            frames VARCHAR[] NOT NULL,
            importance UTINYINT NOT NULL,
            session VARCHAR,
            current_version UINTEGER NOT NULL,
            created_at TIMESTAMP NOT NULL,
            updated_at TIMESTAMP NOT NULL,
            short VARCHAR NOT NULL,
            medium VARCHAR NOT NULL,
            tombstone_reason VARCHAR,
            tombstoned_at TIMESTAMP,
            tombstoned_by VARCHAR,
            access_count UBIGINT NOT NULL DEFAULT 0,
            citations UBIGINT NOT NULL DEFAULT 0,
            last_used TIMESTAMP
        )
        """
    )
    con.execute(
        """
        CREATE TABLE versions (
            id VARCHAR NOT NULL,
            version UINTEGER NOT NULL,
            type UTINYINT NOT NULL,
            data BLOB NOT NULL,
            hash BLOB NOT NULL,
            created_at TIMESTAMP NOT NULL,
            created_by VARCHAR NOT NULL,
            confidence DOUBLE NOT NULL,
            provenance VARCHAR NOT NULL,
            short VARCHAR NOT NULL,
            medium VARCHAR NOT NULL,
            forms_override BOOLEAN NOT NULL,
            PRIMARY KEY (id, version)
        )
        """
    )
    con.execute(
        "CREATE TABLE frames (id VARCHAR NOT NULL, verb VARCHAR NOT NULL,"
        " kind VARCHAR NOT NULL, ref VARCHAR NOT NULL)"
    )
    con.execute("CREATE INDEX frames_lookup ON frames (verb, kind, ref)")
    con.execute(
        """
        CREATE TABLE journal (
            seq UBIGINT NOT NULL PRIMARY KEY,
            kind VARCHAR NOT NULL,
            ts TIMESTAMP NOT NULL,
            actor VARCHAR NOT NULL,
            ref VARCHAR,
            payload BLOB NOT NULL
        )
        """
    )


@migration(2)
def m002_search(con) -> None:
    """Vectors (ground truth for the HNSW cache) and BM25 postings for find --near."""
    con.execute(
        """
        CREATE TABLE vectors (
            key UBIGINT NOT NULL,
            id VARCHAR NOT NULL,
            version UINTEGER NOT NULL,
            model VARCHAR NOT NULL,
            dim USMALLINT NOT NULL,
            vec BLOB NOT NULL
        )
        """
    )
    con.execute("CREATE TABLE vectors_dropped (key UBIGINT NOT NULL, model VARCHAR NOT NULL)")
    con.execute("CREATE TABLE lex_docs (doc UBIGINT NOT NULL, id VARCHAR NOT NULL, len UINTEGER NOT NULL)")
    con.execute("CREATE TABLE lex_postings (term BIGINT NOT NULL, doc UBIGINT NOT NULL, tf USMALLINT NOT NULL)")
    from cortexctl.store.search import backfill_lexical

    backfill_lexical(con)  # memories written before this version; their vectors are made by reindex


@migration(3)
def m003_salience(con) -> None:
    """Attest, compact and checkpoints: each head's confidence (a salience factor, copied
    from its current version), per-actor learned salience weights, attest rate-limit
    buckets, and checkpoint records."""
    con.execute("ALTER TABLE heads ADD COLUMN confidence DOUBLE NOT NULL DEFAULT 1.0")
    con.execute(
        "UPDATE heads SET confidence = v.confidence FROM versions v"
        " WHERE v.id = heads.id AND v.version = heads.current_version"
    )
    con.execute(
        """
        CREATE TABLE learned_weights (
            actor VARCHAR NOT NULL PRIMARY KEY,
            recency DOUBLE NOT NULL,
            importance DOUBLE NOT NULL,
            access DOUBLE NOT NULL,
            citations DOUBLE NOT NULL,
            confidence DOUBLE NOT NULL,
            steps UBIGINT NOT NULL,
            seq UBIGINT NOT NULL,
            updated_at TIMESTAMP NOT NULL
        )
        """
    )
    con.execute(
        "CREATE TABLE rate_buckets (actor VARCHAR NOT NULL, intent VARCHAR NOT NULL,"
        " tokens DOUBLE NOT NULL, updated_at TIMESTAMP NOT NULL, PRIMARY KEY (actor, intent))"
    )
    con.execute(
        "CREATE TABLE checkpoints (actor VARCHAR NOT NULL, intent VARCHAR NOT NULL, step VARCHAR NOT NULL,"
        " created_at TIMESTAMP NOT NULL, seq UBIGINT NOT NULL, record BLOB NOT NULL,"
        " PRIMARY KEY (actor, intent, step))"
    )


@migration(4)
def m004_grants(con) -> None:
    """Scoped grants for sub-agents: who granted whom which scope, until when, and its
    revocation (rows are kept when revoked: the journal replays them as they are)."""
    con.execute(
        "CREATE TABLE grants (id VARCHAR PRIMARY KEY, granter VARCHAR NOT NULL, subagent VARCHAR NOT NULL,"
        " types UTINYINT[] NOT NULL, tags VARCHAR[] NOT NULL, created_at TIMESTAMP NOT NULL,"
        " expires_at TIMESTAMP, revoked_at TIMESTAMP, revoked_by VARCHAR)"
    )


@migration(5)
def m005_valid_time(con) -> None:
    """Valid time and supersede links on the heads: when a memory holds in the world
    (``valid_from``, ``valid_to``; NULL is open) and which memory it replaced or was replaced
    by. NULL for every memory written before."""
    for name, sql_type in (("valid_from", "TIMESTAMP"), ("valid_to", "TIMESTAMP"), ("supersedes", "VARCHAR"),
                           ("superseded_by", "VARCHAR")):
        con.execute(f"ALTER TABLE heads ADD COLUMN {name} {sql_type}")


@migration(6)
def m006_implied_write_fields(con) -> None:
    """No table changes: from here on a ``write`` journal entry leaves out the head and version
    fields its current version or a new memory implies (``engine/rows.write_payload``). The number
    keeps a cortexctl that would read those entries as missing fields from opening the store."""


@migration(7)
def m007_half_vectors(con) -> None:
    """Stored vectors as float16 (``search.VECTOR_DTYPE``): half the bytes, and the precision the
    index file already searched with (``search.halve_vectors``)."""
    from cortexctl.store.search import halve_vectors

    halve_vectors(con)


def _version(con) -> int:
    """The store's schema version; 0 for a file with no cortexctl tables yet."""
    import duckdb

    try:
        rows = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    except duckdb.CatalogException:
        return 0
    if not rows or not str(rows[0][0]).isdigit():
        raise IntegrityError("the store's schema version record is missing or unreadable (damaged store)")
    return int(rows[0][0])


def latest() -> int:
    return MIGRATIONS[-1][0]


def state(con) -> str:
    """CURRENT or OLDER; raises SchemaTooNew for a store from a newer cortexctl."""
    have = _version(con)
    if have > latest():
        raise SchemaTooNew(
            f"store schema version {have} is newer than this cortexctl understands ({latest()})",
            hint="upgrade cortexctl to open this store",
        )
    return CURRENT if have == latest() else OLDER


def migrate(con, *, upto: int | None = None) -> list[str]:
    """Apply every pending migration (up to number ``upto``), each in its own transaction.
    Returns their names."""
    if state(con) == CURRENT:
        return []
    have = _version(con)
    applied = []
    for number, name, fn in MIGRATIONS:
        if number <= have or (upto is not None and number > upto):
            continue
        con.execute("BEGIN")
        try:
            if number == 1:
                con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
                con.execute(
                    "CREATE TABLE schema_migrations (number INTEGER PRIMARY KEY,"
                    " name VARCHAR NOT NULL, applied_at TIMESTAMP NOT NULL)"
                )
            fn(con)
            con.execute(
                "INSERT INTO schema_migrations VALUES (?, ?, now()::TIMESTAMP)", [number, name]
            )
            con.execute(
                "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(number)]
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        applied.append(name)
    return applied
