"""backup, restore, bundle verify, bundle drill: bundles of the whole store (SPEC §11)."""

from __future__ import annotations

from cortexctl.cli.spec import JSON, QUIET, command_for
from cortexctl.ops import lookup


def _human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def backup(config, *, dest, keep, max_age_days, encrypt, quiet, store, actor, wait, json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = open_cortex(config, store, actor, wait)
    with out.progress("backing up") as bar:
        result = lookup("backup").run(cx, dest=dest, keep=keep, max_age_days=max_age_days, encrypt=encrypt,
                                      progress=(lambda stage, done, total: bar(done, total)) if bar else None)
    if out.machine:
        out.emit(result.to_json())
        return
    if quiet:
        return
    memories = result.counts.get("heads", 0)
    out.line(f"{result.path}: {memories} memories, {result.counts.get('journal', 0)} journal entries, "
             f"{_human_bytes(result.bytes)}{', encrypted' if result.encrypted else ''} in {result.seconds:.1f}s")
    for name in result.pruned:
        out.line(f"pruned {name}")


def restore(config, *, path, mode, force, force_topology_mismatch, dry_run, confirm, quiet, store, actor, wait,
            json, jsonl) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output

    out = Output(json=json, jsonl=jsonl, quiet=quiet)
    cx = open_cortex(config, store, actor, wait)
    with out.progress("restoring") as bar:
        result = lookup("restore").run(cx, path=path, mode=mode, force=force,
                                       force_topology_mismatch=force_topology_mismatch, dry_run=dry_run,
                                       confirm=confirm,
                                       progress=(lambda stage, done, total: bar(done, total)) if bar else None)
    if out.machine:
        out.emit(result.to_json())
        return
    a = result.added
    if "heads" in a:  # the bundle as it is: replace, or merge into an empty store
        what = f"{a['heads']} memories, {a['versions']} versions, {a['journal']} journal entries"
    else:
        what = (f"{a['memories']} memories added, {a['versions']} versions added, "
                f"{a['updated_memories']} memories moved ahead, {a['checkpoints']} checkpoints added"
                + (f", {a['grants']} grants added" if a.get("grants") else "")
                + (f", {a['revocations']} grants revoked" if a.get("revocations") else ""))
    verb = "would restore" if dry_run else "restored"
    out.line(f"{verb} ({result.mode}) into {result.target}: {what}"
             + ("" if dry_run or result.verified is None else "; verify ok"))
    for c in result.conflicts:
        out.warn(f"conflict: memory {c['id']} version {c['version']} differs; the local one was kept")
    for note in result.notes:
        out.hint(note)


def bundle_verify(config, *, path, json) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output

    out = Output(json=json)
    info = lookup("bundle_verify").run(open_cortex(config, None, None, None), path=path)
    if out.machine:
        out.emit(info.to_json())
        return
    doc = info.to_json()
    out.line(f"ok: {doc['path']}: {doc['members']} members, {doc['records_checked']} records, "
             f"journal at {doc['journal_position']}, made {doc['created_at']} by cortexctl "
             f"{doc['cortexctl_version']}{', encrypted' if doc['encrypted'] else ''}")


def bundle_drill(config, *, path, quiet, json) -> None:
    from cortexctl.cli.common import open_cortex
    from cortexctl.cli.output import Output
    from cortexctl.errors import IntegrityError

    out = Output(json=json, quiet=quiet)
    with out.progress("drilling") as bar:
        report = lookup("bundle_drill").run(open_cortex(config, None, None, None), path=path,
                                            progress=(lambda stage, done, total: bar(done, total)) if bar else None)
    if out.machine:
        out.emit(report.to_json())
    elif report.ok:
        out.line(f"ok: {report.path} restores to a store that verifies: {report.counts.get('heads', 0)} memories, "
                 f"{report.records} records, journal at {report.journal_position} ({report.seconds:.1f}s)")
    if not report.ok:
        if not out.machine:
            for p in report.problems:
                out.warn(p)
        raise IntegrityError(f"drill of {report.path} failed: {len(report.problems)} problems")


COMMANDS = [
    command_for(
        lookup("backup"), ("backup",), "Write one consistent bundle of the whole store; prune old bundles.",
        run=backup, options=(QUIET,),
        notes="""Copies the store's database while writers are held off (readers go on;
a writer waits at most its --wait), exports every state table of the copy as
Parquet into a hidden partial directory in DIR, writes manifest.json (sha256,
bytes and rows of every member) and bundle-meta.json, fsyncs, reads the whole
bundle back as bundle verify does, and only then renames it to
backup-<UTC timestamp>. A killed backup leaves no backup-* directory; the next
backup removes its partial one. The index file is not bundled: restore builds it.""",
        examples=(
            "cortexctl backup",
            "cortexctl backup --dest /var/backups/cortexctl --keep 7 --max-age-days 30 --quiet",
            "CORTEXCTL_BACKUP_KEY='correct horse battery staple' cortexctl backup --encrypt --json",
        ),
        exits=(0, 2, 3, 4, 7),
        exit_notes={3: "no store", 4: "the store stayed busy for --wait seconds"},
    ),
    command_for(
        lookup("restore"), ("restore",), "Restore a bundle into the store: merge (idempotent) or replace (destructive).",
        run=restore, positional=("path",), options=(QUIET,),
        notes="""The whole bundle is checked first (as bundle verify does, plus its format,
schema and topology); a torn, partial, tampered or incompatible bundle is
refused with exit 7 and nothing written.

merge: memories the store lacks are added; versions are unioned by (id,
version); the same (id, version) with another hash is a conflict, reported,
and the local memory is kept; checkpoints and grants the store lacks are
added, and grants the bundle has revoked are revoked; learned
weights stay the store's. Journal entries are appended for what changed, so
restoring the same bundle twice changes nothing the second time. Into an empty
store, the bundle is restored as it is.

replace: the bundle's store is built beside this one, verified, and swapped
in with one atomic rename; a crash leaves the old store or the new one. A store
that holds data needs --force; the default store location also needs
CORTEXCTL_ALLOW_DESTRUCTIVE=1 and --confirm REPLACE (stores under the temp
directory need neither). Both modes end with a verify of the result.

The vector index file is a cache: after replace (and into an empty store) a
background process builds it once the command has returned, and find searches
exactly until it is in place (healthcheck says "being built in the
background"). Writes go on meanwhile. CORTEXCTL_FOLD=inline builds it before
the command returns.""",
        examples=(
            "cortexctl restore ~/.local/share/cortexctl/backups/backup-20261123T020000Z --mode merge",
            "cortexctl restore ./backup-20261123T020000Z --mode replace --store /srv/cortex --force --dry-run",
            "CORTEXCTL_ALLOW_DESTRUCTIVE=1 cortexctl restore ./backup-20261123T020000Z --mode replace --force "
            "--confirm REPLACE",
        ),
        exits=(0, 2, 3, 4, 7, 8),
        exit_notes={3: "no bundle at PATH", 7: "the bundle is damaged, tampered, incompatible, or the key is wrong",
                    8: "replace refused: the store holds data (--force), or the default store lacks the confirmation"},
    ),
    command_for(
        lookup("bundle_verify"), ("bundle", "verify"), "Check a bundle completely without touching any store.",
        run=bundle_verify, positional=("path",), common=(JSON,),
        group_help="Check and drill backup bundles.",
        notes="""Checks the bundle's structure (only regular files the manifest lists),
every member's size and sha256, that every member is Parquet with the columns
of its table and the row count the manifest and meta give, every record's
version hash, and the journal position in the meta. An encrypted bundle needs
its passphrase in $CORTEXCTL_BACKUP_KEY (config backup.key_env).""",
        examples=("cortexctl bundle verify ./backup-20261123T020000Z",
                  "cortexctl bundle verify ./backup-20261123T020000Z --json | jq .records_checked"),
        exits=(0, 2, 3, 7),
        exit_notes={2: "also: the bundle is encrypted and no passphrase is set", 3: "no bundle at PATH",
                    7: "the bundle is damaged, tampered or from a newer cortexctl, or the key is wrong"},
    ),
    command_for(
        lookup("bundle_drill"), ("bundle", "drill"),
        "Restore a bundle into a throwaway store, verify it, compare; the CI restore drill.", run=bundle_drill,
        positional=("path",), common=(QUIET, JSON),
        notes="""Checks the bundle as bundle verify does, restores it into a store in the
temp directory (all but the index file, a cache that restore builds), runs
verify there, compares its row counts, journal position and every record with
the bundle, prints a report and removes the store.""",
        examples=("cortexctl bundle drill ./backup-20261123T020000Z",
                  "cortexctl bundle drill \"$(ls -d backups/backup-* | tail -1)\" --json"),
        exits=(0, 2, 3, 7),
        exit_notes={3: "no bundle at PATH", 7: "the bundle or the store restored from it is not sound"},
    ),
]
