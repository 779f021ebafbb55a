"""healthcheck: is the store fine? A stable payload for monitoring (SPEC §12)."""

from __future__ import annotations

from cortexctl.cli.spec import ACTOR, JSON, STORE, WAIT, Option, command_for
from cortexctl.ops import lookup


def healthcheck(config, *, strict, store, actor, wait, json) -> None:
    from cortexctl import config as config_mod
    from cortexctl.cli.output import Output
    from cortexctl.engine import health
    from cortexctl.engine.reports import HealthReport
    from cortexctl.errors import CortexError, IntegrityError

    out = Output(json=json)
    # the payload from the settings as the command line gives them: a config that cannot be read is
    # reported as unhealthy, not raised, so the command reads them itself (the tool's Cortex has them)
    report = HealthReport(health.report(lambda: config_mod.load(config_path=config, store=store, actor=actor,
                                                                wait=wait)))
    doc = report.doc
    if out.machine:
        out.emit(report.to_json())
    else:
        _render(out, doc)
    if doc["status"] == health.UNHEALTHY and doc.get("damaged"):
        raise IntegrityError(f"{doc['status']}: {doc['details'][0]}")
    if doc["status"] == health.UNHEALTHY or (strict and doc["status"] == health.DEGRADED):
        raise CortexError(f"{doc['status']}: {doc['details'][0]}")


def _render(out, doc: dict) -> None:
    out.line(f"status: {doc['status']}")
    s = doc["store"]
    if s and s.get("memories") is not None:
        out.line(f"store: {s['path']} (schema {s['schema_version']}): {s['memories']} memories "
                 f"({s['tombstoned']} forgotten), {s['versions']} versions, {s['journal_entries']} journal entries, "
                 f"{s['pending_embeddings'] or 0} waiting for embedding, {s['size_bytes']} bytes")
    elif s:
        out.line(f"store: {s['path']} (not readable)")
    t = doc["topology"]
    if t and t["mode"] == "external":
        out.line(f"store: {t['backend']} at {t['host'] or 'the local socket'}:{t['port']}, database {t['database']}")
        if s and s.get("isolation"):
            out.line("isolation: " + ("database (each find held to its actor by row-level security)"
                                      if s["isolation"] == "database" else "engine (cortexctl's rule alone)"))
    if t:
        out.line(f"store chosen by: {t['resolved_via']}")
    i = doc["index"]
    if i and i["state"]:
        graph = f", connectivity {i['connectivity']}" if i.get("connectivity") else ""
        if (i.get("files") or 1) > 1:
            graph += f", in {i['files']} files by visibility class"
        out.line(f"index: {i['state']} ({i['count']} vectors, {i['model']}, dimension {i['dimension']}{graph})")
        if i.get("split_on_rebuild"):
            out.line("index: a file holds visibility classes that grew in it, or more than 200,000 vectors; "
                     "cortexctl reindex --rebuild splits it, into files the finds of those who do not see "
                     "a class pass over")
        if i.get("denser_on_rebuild"):
            out.line("index: a file's graph holds more vectors than it was built for; cortexctl reindex "
                     "--rebuild builds files whose graphs suit their size, for recall")
    e = doc["providers"]["embedding"]
    if e:
        where = f" at {e['host']}" if e["host"] else ""
        out.line(f"embedding: {e['active'] or 'misconfigured'} {e['model'] or ''}{where}; probe {e['probe']}")
    c = doc["providers"]["summary"]
    if c:
        out.line("chat: " + (f"{c['model']} at {c['endpoint']}; key ${c['credential']['env']} "
                             f"{'set' if c['credential']['configured'] else 'not set'}" if c["active"] else "not configured"))
    b = doc["backup"]
    if b:
        last = b["last"]
        out.line(f"last backup: {last['path']} ({last['age_hours']:.1f} hours ago)" if last
                 else f"last backup: none in {b['dest']}")
    if doc["identity"]:
        out.line(f"actor: {doc['identity']['actor']} ({doc['identity']['source']})")
    for d in doc["details"]:
        out.line(f"- {d}")


COMMANDS = [
    command_for(
        lookup("healthcheck"), ("healthcheck",), "Is the store fine? Status, counts, index, providers, last backup.",
        run=healthcheck, common=(STORE, ACTOR, WAIT, JSON),
        options=(Option("strict", ("--strict",), "Exit 1 when degraded too, not only when unhealthy.",
                        type=bool, default=False),),
        notes="""Status is unhealthy when the configuration cannot be read or the store is
missing, unreadable, damaged or from a newer cortexctl; degraded when the
embedding endpoint does not answer a 2-second probe, memories wait for their
embedding, the index file is out of step, the last background fold of the
index file and search snapshot failed (its error is kept in cortex.fold.log
until a fold or reindex completes), a remote chat endpoint has no key,
no bundle is newer than config backup.window_days (when set), or on
PostgreSQL the database does not hold finds to their actor (this user is not
a member of the role cortexctl_viewer: store.isolation is engine); else healthy.
It reads the database through once (every block, so that DuckDB checks its
checksums: about 1.4 s at 100,000 memories; DuckDB held to 512 MB, spilling
into the store's scratch area), checks the index files against their
record (and names the graph's connectivity and how many files the vectors are
split over by visibility class, saying when reindex --rebuild would build a
graph suited to a file's size or split a file whose classes or size grew) and the
search snapshot block by
block; verify proves every record. The --json payload's
fields may be added to, never renamed or removed; secrets never appear. Its
topology is embedded (a store directory) or external (a PostgreSQL server:
host, port and database; never the password).""",
        examples=("cortexctl healthcheck", "cortexctl healthcheck --json | jq .status",
                  "cortexctl healthcheck --strict --store /srv/agent/brain || alert"),
        exits=(0, 1, 2, 7),
        exit_notes={1: "unhealthy (or degraded, with --strict)",
                    7: "unhealthy: a file of the store is damaged (named in the details and in damaged)"},
    ),
]
