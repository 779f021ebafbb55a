"""Backup bundles: write one from a store, check one, drill one, restore one.

A bundle is a directory ``backup-<UTC timestamp>`` holding:

- one Parquet file per state table (``heads.parquet``, ``versions.parquet``,
  ``journal.parquet``, ``vectors.parquet``, ...; ``store.bundle.NOT_BUNDLED`` says
  which tables stay out and why; no index file: restore rebuilds it from the vectors);
- ``manifest.json``: every member with its table, sha256, size in bytes and row count;
- ``bundle-meta.json``: the bundle format, the cortexctl version, when it was made,
  the store's schema version, topology, embedding model and dimension, journal
  position, row counts, the manifest's sha256 and, for a sealed bundle, how its
  key is derived.

Writing: the store's database is copied while our writers are held off (readers
go on), the copy is exported table by table into a hidden partial directory in
the destination, which is fsynced, read back and checked like ``bundle verify``,
then renamed to its final name. A killed backup leaves only a partial directory,
which the next backup removes. Nothing a bundle holds is ever executed: members
are read as Parquet into tables made by this cortexctl's own migrations.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Sequence

from cortexctl.errors import IntegrityError, NotFound, Refused, UsageError, check_nesting, too_deep
from cortexctl.files import fsync_path

if TYPE_CHECKING:
    from cortexctl.engine.context import Context

FORMAT = 1
META = "bundle-meta.json"
MANIFEST = "manifest.json"
PREFIX = "backup-"
PARTIAL = ".backup-partial-"
STAMP = "%Y%m%dT%H%M%SZ"
NAME = re.compile(r"^backup-(\d{8}T\d{6}Z)(?:-(\d{1,4}))?$")
MEMBER = re.compile(r"^[a-z][a-z0-9_]{0,62}\.parquet$")
MAX_META_BYTES = 1 << 20
MAX_MANIFEST_BYTES = 4 << 20
MAX_VALUE_BYTES = 16 << 20  # any one text or blob value in a member (a version's data: MAX_DATA_BYTES)
TOPOLOGY = {"mode": "embedded"}
CONFIRM = "REPLACE"
KEY_CHECK = b"cortexctl bundle key check"

Progress = Callable[[str, int, int], None]


def default_dest(settings) -> Path:
    """Where bundles go: config backup.dest, else backups/ beside the store directory (for a
    store on PostgreSQL, backups/ in the user data dir, beside the default store's place)."""
    from cortexctl.config import default_store_path

    dest = settings.get("backup.dest")
    if dest:
        return Path(dest).expanduser()
    home = settings.store if settings.backend == "duckdb" else default_store_path()
    return home.parent / "backups"


def passphrase(settings) -> str | None:
    """The bundle passphrase from the environment variable config names (None when unset)."""
    value = os.environ.get(settings.get("backup.key_env") or "")
    return value or None


# -- results ------------------------------------------------------------------------------------
@dataclass
class BundleInfo:
    """A bundle that passed every check, and what it holds."""

    path: str
    meta: dict
    members: list[dict]
    records: int = 0

    def to_json(self) -> dict:
        return {"ok": True, "path": self.path, "format": self.meta["format"],
                "created_at": self.meta["created_at"], "cortexctl_version": self.meta["cortexctl_version"],
                "schema_version": self.meta["schema_version"], "encrypted": bool(self.meta.get("encryption")),
                "journal_position": self.meta["journal_position"], "counts": self.meta["counts"],
                "members": len(self.members), "bytes": sum(m["bytes"] for m in self.members),
                "records_checked": self.records}


@dataclass
class BackupResult:
    path: str
    counts: dict
    bytes: int
    seconds: float
    encrypted: bool
    pruned: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"path": self.path, "counts": self.counts, "bytes": self.bytes, "seconds": round(self.seconds, 3),
                "encrypted": self.encrypted, "pruned": self.pruned}


@dataclass
class RestoreResult:
    mode: str
    target: str
    dry_run: bool
    added: dict = field(default_factory=dict)  # what was (or would be) written, by kind
    conflicts: list[dict] = field(default_factory=list)
    verified: bool | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"mode": self.mode, "target": self.target, "dry_run": self.dry_run, "added": self.added,
                "conflicts": self.conflicts, "verified": self.verified, "notes": self.notes}


@dataclass
class DrillReport:
    path: str
    counts: dict
    journal_position: int
    records: int
    problems: list[str]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict:
        return {"ok": self.ok, "path": self.path, "counts": self.counts, "journal_position": self.journal_position,
                "records_checked": self.records, "problems": self.problems, "seconds": round(self.seconds, 3)}


# -- helpers --------------------------------------------------------------------------------------
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _write_json(path: Path, doc: dict) -> None:
    path.write_bytes(json.dumps(doc, indent=2, sort_keys=True).encode() + b"\n")


def _remove_stale_partials(dest: Path) -> list[str]:
    """Partial bundles of backups that are no longer running (killed, or crashed)."""
    from cortexctl.store import scratch

    removed = []
    for entry in dest.iterdir():
        if not entry.name.startswith(PARTIAL):
            continue
        pid = entry.name[len(PARTIAL):].split("-", 1)[0]
        if pid.isdigit() and scratch.exists(int(pid)) and int(pid) != os.getpid():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)
        removed.append(entry.name)
    return removed


def bundles_in(dest: Path) -> list[tuple[datetime, Path]]:
    """The bundles in ``dest`` by their names' timestamps, newest first."""
    found = []
    for entry in dest.iterdir():
        m = NAME.match(entry.name)
        if m and entry.is_dir() and not entry.is_symlink():
            found.append((datetime.strptime(m.group(1), STAMP), int(m.group(2) or 0), entry))
    found.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [(at, path) for at, _n, path in found]


def retention(dest: Path, now: datetime, *, keep: int, max_age_days: float, spare: Path) -> list[str]:
    """Prune bundles beyond the newest ``keep`` that are older than ``max_age_days``; never ``spare``."""
    pruned = []
    for i, (at, path) in enumerate(bundles_in(dest)):
        # in seconds: any number of days is an age limit (a timedelta stops at 999,999,999 days)
        if i < keep or path == spare or (now - at).total_seconds() <= max_age_days * 86400:
            continue
        shutil.rmtree(path)
        pruned.append(path.name)
    return pruned


def _final_name(dest: Path, now: datetime) -> Path:
    base = PREFIX + now.strftime(STAMP)
    path, n = dest / base, 0
    while path.exists():
        n += 1
        path = dest / f"{base}-{n}"
    return path


# -- backup ----------------------------------------------------------------------------------------
def backup(ctx: Context, *, dest: str | os.PathLike | None = None, keep: int | None = None,
           max_age_days: float | None = None, encrypt: bool = False, progress: Progress | None = None) -> BackupResult:
    """Write one bundle of the whole store into ``dest`` and apply retention (see the module docstring)."""
    settings = ctx.settings
    keep = int(settings.get("backup.keep") if keep is None else keep)
    max_age = float(settings.get("backup.max_age_days") if max_age_days is None else max_age_days)
    if keep < 1:
        raise UsageError(f"keep must be 1 or more (got {keep})", field="keep")
    if not max_age >= 0:  # NaN too
        raise UsageError(f"max_age_days must be 0 or more (got {max_age:g})", field="max_age_days")
    key_pass = None
    if encrypt:
        key_pass = passphrase(settings)
        if key_pass is None:
            raise UsageError(f"backup --encrypt needs a passphrase in ${settings.get('backup.key_env')}",
                             field="encrypt")
    if dest is not None and not str(dest).strip():  # an unset shell variable: not the current directory
        raise UsageError("dest must not be empty", field="dest")
    ctx.require_store()
    dest = Path(dest).expanduser() if dest is not None else default_dest(settings)
    if dest.exists() and not dest.is_dir():
        raise UsageError(f"dest {dest} is not a directory", field="dest")
    home = ctx.storage.local_dir()
    if home is not None and (dest.resolve() == home.resolve() or home.resolve() in dest.resolve().parents):
        raise UsageError(f"dest {dest} is inside the store; choose a directory outside it", field="dest")
    try:
        dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create dest {dest}: {exc.strerror}", field="dest") from None
    if not os.access(dest, os.W_OK | os.X_OK):
        raise UsageError(f"dest {dest}: cannot write there (Permission denied)", field="dest")

    started = time.monotonic()
    old_umask = os.umask(0o077)  # members hold private memories: 0600 files, 0700 directories
    try:
        return _backup(ctx, dest, keep, max_age, encrypt, key_pass, progress, started)
    finally:
        os.umask(old_umask)


def _backup(ctx: Context, dest: Path, keep: int, max_age: float, encrypt: bool, key_pass: str | None,
            progress: Progress | None, started: float) -> BackupResult:
    from cortexctl import __version__
    from cortexctl.store import bundle as sb
    from cortexctl.store import scratch

    _remove_stale_partials(dest)
    partial = dest / f"{PARTIAL}{os.getpid()}-{os.urandom(4).hex()}"
    partial.mkdir(mode=0o700)
    plain = scratch.make(scratch.areas(ctx.storage), "backup") if encrypt else None
    try:
        if plain:
            (plain / "members").mkdir(mode=0o700)
        step = progress or (lambda *a: None)
        step("copy", 0, 1)
        # an encrypted bundle's plaintext (the copy, the members) stays in the store's scratch space
        members, facts = ctx.storage.export_bundle(plain / "members" if plain else partial)
        step("copy", 1, 1)
        salt = os.urandom(16) if encrypt else None
        key = None
        if encrypt:
            from cortexctl import seal

            key = seal.derive(key_pass, salt)
            for i, m in enumerate(members):
                plain_path = plain / "members" / m["name"]
                seal.seal_file(key, plain_path, partial / m["name"], m["name"])
                plain_path.unlink()
                step("seal", i + 1, len(members))
        for m in members:
            path = partial / m["name"]
            m["bytes"] = path.stat().st_size
            m["sha256"] = _sha256(path)
        manifest = {"format": FORMAT, "members": members}
        _write_json(partial / MANIFEST, manifest)
        manifest_sha = _sha256(partial / MANIFEST)
        now = ctx.clock()
        active = ctx.embedder
        meta = {
            "format": FORMAT,
            "cortexctl_version": __version__,
            "created_at": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "schema_version": facts["schema_version"],
            "topology": dict(TOPOLOGY),
            "embedding": {"model": active.model, "dim": active.dim},
            "vectors": facts["vectors"],
            "journal_position": facts["journal_position"],
            "counts": {m["table"]: m["rows"] for m in members},
            "manifest_sha256": manifest_sha,
            "encryption": None,
        }
        if encrypt:
            from cortexctl import seal

            meta["encryption"] = {"scheme": seal.SCHEME, "kdf": dict(seal.SCRYPT), "salt": salt.hex(),
                                  "key_check": seal.seal_bytes(key, KEY_CHECK, manifest_sha.encode()).hex()}
        _write_json(partial / META, meta)
        sb.fsync_tree(partial)
        step("check", 0, 1)
        check(partial, scratch.areas(ctx.storage), passphrase=key_pass)  # read back what was written, as bundle verify would
        step("check", 1, 1)
        final = _final_name(dest, now)
        os.rename(partial, final)
        fsync_path(dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    finally:
        scratch.remove(plain)
    pruned = retention(dest, now, keep=keep, max_age_days=max_age, spare=final)
    return BackupResult(path=str(final), counts=meta["counts"], bytes=sum(m["bytes"] for m in members),
                        seconds=time.monotonic() - started, encrypted=encrypt, pruned=pruned)


# -- reading and checking a bundle --------------------------------------------------------------
def _read_json(path: Path, limit: int, what: str) -> dict:
    try:
        if path.is_symlink() or not path.is_file():
            raise IntegrityError(f"bundle has no {what} ({path.name})")
        if path.stat().st_size > limit:
            raise IntegrityError(f"{path.name} is larger than {limit} bytes")
        doc = json.loads(path.read_bytes())
    except RecursionError:
        raise too_deep(path.name, IntegrityError) from None
    except (OSError, ValueError) as exc:
        raise IntegrityError(f"{path.name} is not readable JSON ({type(exc).__name__})") from None
    check_nesting(doc, path.name, IntegrityError)
    if not isinstance(doc, dict):
        raise IntegrityError(f"{path.name} is not a JSON object")
    return doc


def _int(doc: dict, key: str, where: str, *, low: int = 0) -> int:
    value = doc.get(key)
    if type(value) is not int or value < low:
        raise IntegrityError(f"{where}: {key} is missing or not a whole number")
    return value


def _check_meta(meta: dict) -> None:
    from cortexctl.store import migrations

    fmt = meta.get("format")
    if type(fmt) is not int:
        raise IntegrityError("bundle-meta.json has no format number")
    if fmt > FORMAT:
        raise IntegrityError(f"bundle format {fmt} is newer than this cortexctl understands ({FORMAT}); upgrade cortexctl")
    if fmt != FORMAT:
        raise IntegrityError(f"bundle format {fmt} is not one this cortexctl reads")
    schema = _int(meta, "schema_version", "bundle-meta.json", low=1)
    if schema > migrations.latest():
        raise IntegrityError(f"bundle schema version {schema} is newer than this cortexctl understands "
                             f"({migrations.latest()}); upgrade cortexctl")
    _int(meta, "journal_position", "bundle-meta.json")
    for key in ("cortexctl_version", "created_at", "manifest_sha256"):
        if not isinstance(meta.get(key), str):
            raise IntegrityError(f"bundle-meta.json: {key} is missing")
    if not isinstance(meta.get("counts"), dict) or not isinstance(meta.get("topology"), dict):
        raise IntegrityError("bundle-meta.json: counts or topology is missing")
    enc = meta.get("encryption")
    if enc is not None and not (isinstance(enc, dict) and isinstance(enc.get("salt"), str)
                                and isinstance(enc.get("key_check"), str) and isinstance(enc.get("kdf"), dict)):
        raise IntegrityError("bundle-meta.json: encryption is not readable")


def _check_structure(root: Path, manifest: dict, *, sealed: bool) -> list[dict]:
    """The manifest against the files, reading no more than a few bytes of each: names, sizes
    and each member's framing (Parquet's magic and footer, or a sealed member's header)."""
    members = manifest.get("members")
    if manifest.get("format") != FORMAT or not isinstance(members, list):
        raise IntegrityError("manifest.json: format or members missing")
    seen: set[str] = set()
    tables: set[str] = set()
    for m in members:
        if not isinstance(m, dict):
            raise IntegrityError("manifest.json: a member is not an object")
        name, table = m.get("name"), m.get("table")
        if not isinstance(name, str) or not MEMBER.match(name) or name in (META, MANIFEST):
            raise IntegrityError(f"manifest.json names a member that is not allowed: {str(name)[:80]!r}")
        if table != name[: -len(".parquet")]:
            raise IntegrityError(f"manifest.json: member {name} names table {str(table)[:80]!r}")
        if name in seen or table in tables:
            raise IntegrityError(f"manifest.json lists member {name} twice")
        seen.add(name)
        tables.add(table)
        for key in ("bytes", "rows"):
            _int(m, key, f"manifest.json member {name}")
        if not isinstance(m.get("sha256"), str) or not re.fullmatch(r"[0-9a-f]{64}", m["sha256"]):
            raise IntegrityError(f"manifest.json member {name}: sha256 is missing")
    present = set()
    for entry in os.scandir(root):
        if entry.name in (META, MANIFEST):
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                raise IntegrityError(f"bundle member {entry.name} is not a regular file")
            continue
        if entry.is_symlink():
            raise IntegrityError(f"bundle holds a symbolic link: {entry.name}")
        if not entry.is_file(follow_symlinks=False):
            raise IntegrityError(f"bundle holds something that is not a file: {entry.name}")
        if entry.name not in seen:
            raise IntegrityError(f"bundle holds a file the manifest does not list: {entry.name[:80]}")
        present.add(entry.name)
    for name in seen - present:
        raise IntegrityError(f"bundle member {name} is missing")
    for m in members:
        size = os.stat(root / m["name"], follow_symlinks=False).st_size
        if size != m["bytes"]:
            raise IntegrityError(f"bundle member {m['name']} is {size} bytes; the manifest says {m['bytes']}")
    for m in members:
        _check_framing(root / m["name"], m["name"], sealed)
    return members


def _check_framing(path: Path, name: str, sealed: bool) -> None:
    from cortexctl import seal

    size = path.stat().st_size
    with open(path, "rb") as fh:
        if sealed:
            if fh.read(len(seal.MAGIC)) != seal.MAGIC:
                raise IntegrityError(f"bundle member {name} is not a sealed member")
            return
        head = fh.read(4)
        fh.seek(max(0, size - 8))
        tail = fh.read(8)
    footer = int.from_bytes(tail[:4], "little") if len(tail) == 8 else -1
    if head != b"PAR1" or tail[4:] != b"PAR1" or not 0 < footer <= size - 12:
        raise IntegrityError(f"bundle member {name} is not a Parquet file (damaged or tampered)")


def _check_hashes(root: Path, members: list[dict]) -> None:
    for m in members:
        if _sha256(root / m["name"]) != m["sha256"]:
            raise IntegrityError(f"bundle member {m['name']} does not match its sha256 (damaged or tampered)")


@dataclass
class Opened:
    """A checked bundle: its meta, its members and their plain Parquet files (in ``work``)."""

    root: Path
    meta: dict
    members: list[dict]
    files: dict[str, Path]
    records: int


@contextmanager
def opened(path: str | os.PathLike, areas: Sequence[Path], *, passphrase: str | None = None) -> Iterator[Opened]:
    """Check a whole bundle (structure, hashes, sizes, Parquet, columns, rows, record hashes,
    meta against members); yields it with its members readable. Decrypted members and work
    files go in a private directory in the store's scratch ``areas`` (``store/scratch.py``),
    removed afterwards."""
    from cortexctl.store import scratch

    if not str(path).strip():  # Path("") is ".": the current directory is no bundle a user named
        raise UsageError("path must not be empty", field="path")
    root = Path(path).expanduser()
    if not root.exists():
        raise NotFound(f"no bundle at {root}")
    if root.is_symlink() or not root.is_dir():
        raise UsageError(f"bundle {root} is not a directory", field="path")
    meta = _read_json(root / META, MAX_META_BYTES, "bundle-meta.json")
    _check_meta(meta)
    manifest = _read_json(root / MANIFEST, MAX_MANIFEST_BYTES, "manifest")
    if _sha256(root / MANIFEST) != meta["manifest_sha256"]:
        raise IntegrityError("manifest.json does not match the sha256 in bundle-meta.json (damaged or tampered)")
    enc = meta.get("encryption")
    members = _check_structure(root, manifest, sealed=bool(enc))
    key = _key(enc, meta, members, root, passphrase) if enc and passphrase is not None else None
    _check_hashes(root, members)
    if enc and key is None:
        _key(enc, meta, members, root, passphrase)  # no passphrase: says so (the hashes were sound)
    work = scratch.make(areas, "bundle")
    held: list[int] = []
    try:
        with scratch.private():
            files = {m["table"]: root / m["name"] for m in members}
            if key is not None:
                files = _unseal(key, members, root, work)
            files = _glob_free(files, held)
            records = _check_content(meta, members, files, work)
        yield Opened(root=root, meta=meta, members=members, files=files, records=records)
    finally:
        for fd in held:
            os.close(fd)
        scratch.remove(work)


_GLOB = frozenset("*?[]{}")  # what DuckDB's file readers take a path's characters for
_FD_DIR = "/proc/self/fd"  # a directory named by a descriptor of it (Linux)


def _glob_free(files: dict[str, Path], held: list[int]) -> dict[str, Path]:
    """``files`` named so that DuckDB reads each one and no other. It takes the path it is given to
    ``read_parquet`` as a pattern: a member under a directory whose name holds ``[1]`` was read
    from ``1/`` beside it, a file other than the one whose hash was checked. Such members are named
    through a descriptor of their directory (``/proc/self/fd/N/<member>``), held open in ``held``
    until the bundle is let go; member names themselves hold no such character."""
    if not any(_GLOB & set(str(path)) for path in files.values()):
        return files
    if not os.path.isdir(_FD_DIR):
        raise UsageError("a bundle whose path holds any of * ? [ ] { } cannot be read here (DuckDB takes "
                         "them for a pattern): move or link it to a plain path", field="path")
    fds: dict[Path, int] = {}
    out = {}
    for table, path in files.items():
        if path.parent not in fds:
            fds[path.parent] = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
            held.append(fds[path.parent])
        out[table] = Path(_FD_DIR, str(fds[path.parent]), path.name)
    return out


def _key(enc: dict, meta: dict, members: list[dict], root: Path, key_pass: str | None) -> bytes:
    """The bundle's key, proven right, and each member's first and last chunk opened with it
    (before any member is hashed: a made-up member is refused without reading all of it)."""
    from cortexctl import seal

    if key_pass is None:
        raise UsageError("the bundle is encrypted: set the passphrase in the environment variable that "
                         "backup.key_env names (default CORTEXCTL_BACKUP_KEY)", field="key")
    try:
        salt = bytes.fromhex(enc["salt"])
        check_blob = bytes.fromhex(enc["key_check"])
    except ValueError:
        raise IntegrityError("bundle-meta.json: encryption is not readable") from None
    key = seal.derive(key_pass, salt, enc["kdf"])
    try:
        right = seal.open_bytes(key, check_blob, meta["manifest_sha256"].encode()) == KEY_CHECK
    except IntegrityError:
        right = False
    if not right:
        raise IntegrityError("the bundle key is wrong (or the bundle meta was tampered with)")
    for m in members:
        seal.check_file(key, root / m["name"], m["name"])
    return key


def _unseal(key: bytes, members: list[dict], root: Path, work: Path) -> dict:
    from cortexctl import seal

    files = {}
    for m in members:
        out = work / m["name"]
        seal.open_file(key, root / m["name"], out, m["name"])
        files[m["table"]] = out
    return files


def _check_content(meta: dict, members: list[dict], files: dict[str, Path], work: Path) -> int:
    from cortexctl.memory import codec
    from cortexctl.memory.schema import MAX_DATA_BYTES
    from cortexctl.store import bundle as sb

    expected = sb.expected_schema(meta["schema_version"])
    tables = {m["table"] for m in members}
    if tables != set(expected):
        missing, extra = sorted(set(expected) - tables), sorted(tables - set(expected))
        raise IntegrityError(f"bundle tables do not match schema version {meta['schema_version']}"
                             + (f": missing {', '.join(missing)}" if missing else "")
                             + (f": unexpected {', '.join(extra)[:200]}" if extra else ""))
    if set(meta["counts"]) != tables:
        raise IntegrityError("bundle-meta.json counts do not name the bundle's tables")
    with sb.Members(files, work) as bundle:
        for m in members:
            cols, rows = bundle.facts(m["table"])
            want = [name for name, _ in expected[m["table"]]]
            if [c for c, _ in cols] != want:
                raise IntegrityError(f"bundle member {m['name']} has columns {[c for c, _ in cols]} "
                                     f"where table {m['table']} has {want}")
            if rows != m["rows"] or meta["counts"].get(m["table"]) != rows:
                raise IntegrityError(f"bundle member {m['name']} holds {rows} rows; the manifest says "
                                     f"{m['rows']} and the meta {meta['counts'].get(m['table'])}")
            for column, size in bundle.widest(m["table"], cols).items():
                limit = MAX_DATA_BYTES if (m["table"], column) == ("versions", "data") else MAX_VALUE_BYTES
                if size > limit:
                    raise IntegrityError(f"bundle member {m['name']}: a value of {column} is {size} bytes, "
                                         f"over the {limit}-byte limit")
        records, bad = bundle.hash_mismatch(codec.HASH_DOMAIN)
        if bad is not None:
            raise IntegrityError(f"bundle record {bad[0]} version {bad[1]}: hash does not match its data")
        top = bundle.journal_end()
        if top != meta["journal_position"]:
            raise IntegrityError(f"bundle journal ends at {top}; the meta says {meta['journal_position']}")
    return records


def check(path: str | os.PathLike, areas: Sequence[Path], *, passphrase: str | None = None) -> BundleInfo:
    """``bundle verify``: every check of ``opened`` (its work in the scratch ``areas``); touches no store."""
    with opened(path, areas, passphrase=passphrase) as b:
        return BundleInfo(path=str(b.root), meta=b.meta, members=b.members, records=b.records)


# -- restore ------------------------------------------------------------------------------------------
def _is_throwaway(path: Path) -> bool:
    tmp = Path(os.path.realpath(tempfile.gettempdir()))
    real = Path(os.path.realpath(path))
    return tmp in real.parents


def _holds_data(ctx: Context) -> bool:
    if not ctx.storage.exists():
        return False
    with ctx.reading() as tx:
        return tx is not None and (tx.count_heads() > 0 or tx.journal_bounds()[0] > 0)


def _topology(meta: dict, force: bool, notes: list[str]) -> None:
    if meta["topology"] != TOPOLOGY:
        if not force:
            raise IntegrityError(f"bundle topology {json.dumps(meta['topology'])[:120]} does not match this "
                                 f"store's {json.dumps(TOPOLOGY)} (--force-topology-mismatch restores it anyway)")
        notes.append("topology mismatch overridden")


def restore(ctx: Context, path: str | os.PathLike, *, mode: str, force: bool = False,
            force_topology_mismatch: bool = False, dry_run: bool = False, confirm: str | None = None,
            progress: Progress | None = None) -> RestoreResult:
    """Restore a bundle into the store: ``merge`` (idempotent union) or ``replace`` (destructive, guarded)."""
    from cortexctl.config import ENV_ALLOW_DESTRUCTIVE, default_store_path
    from cortexctl.store import scratch

    if mode not in ("merge", "replace"):
        raise UsageError(f"mode must be merge or replace (got {mode!r})", field="mode")
    ctx.storage.check_location()
    target = ctx.storage.location
    local = ctx.storage.local_dir()
    with opened(path, scratch.areas(ctx.storage), passphrase=passphrase(ctx.settings)) as b:
        result = RestoreResult(mode=mode, target=target, dry_run=dry_run)
        _topology(b.meta, force_topology_mismatch, result.notes)
        full = _holds_data(ctx)
        if mode == "replace" and full:
            if not force:
                raise Refused(f"store {target} holds data; restore --mode replace overwrites it only with --force")
            # the default store is the one a slip of --store replaces; a server's database is named on purpose
            at_default = local is not None and Path(os.path.realpath(local)) == Path(
                os.path.realpath(default_store_path()))
            if at_default and not _is_throwaway(local):
                if os.environ.get(ENV_ALLOW_DESTRUCTIVE) != "1" or confirm != CONFIRM:
                    raise Refused(f"replacing the default store needs {ENV_ALLOW_DESTRUCTIVE}=1 and "
                                  f"--confirm {CONFIRM}")
        if mode == "replace" or not full:
            result.added = {t: b.meta["counts"][t] for t in sorted(b.meta["counts"])}
            if not full and mode == "merge":
                result.notes.append("the store is empty: the bundle is restored as it is")
            if not dry_run:
                _replace(ctx, b, progress, notes=result.notes)
                result.verified = True
            return result
        from cortexctl.engine import merge

        merge.merge(ctx, b, result, dry_run=dry_run)
        if not dry_run:
            _reindex(ctx, progress)
            report = _verify(ctx)
            result.verified = report.ok
            if not report.ok:
                raise IntegrityError(f"the merged store does not verify: {report.problems[0].message}")
        return result


def _reindex(ctx: Context, progress: Progress | None, *, later: bool = False) -> dict:
    from cortexctl.engine import semantic

    return semantic.reindex(ctx, rebuild=True, progress=progress, later=later)["index"]


def _verify(ctx: Context):
    from cortexctl.engine.verify import verify

    return verify(ctx)


def _replace(ctx: Context, b: Opened, progress: Progress | None, *, build_index: bool = True,
             notes: list[str] | None = None):
    """Replace the store with the bundle's (``Storage.restore_bundle``): the new store is
    reindexed and verified before it is swapped in. Returns that verify's report.

    The index file is a cache and building it was most of the time a large restore took: the
    backend may leave it to a background build once the store is in place (``later``; find
    searches exactly until then). ``build_index`` False (the drill) leaves it to be built on
    first use."""
    from cortexctl.engine.context import Context

    reports = []
    notes = [] if notes is None else notes

    def check(staged_storage) -> None:
        staged = Context(ctx.settings, staged_storage, clock=ctx.clock, embedder=ctx.embedder)
        if build_index:
            if _reindex(staged, progress, later=True).get("action") == "background":
                notes.append("index: being built in the background (find searches exactly until it is in "
                             "place; healthcheck says when)")
        report = _verify(staged)
        if not report.ok:
            raise IntegrityError(f"the restored store does not verify: {report.problems[0].message}")
        reports.append(report)

    ctx.storage.restore_bundle(b.files, b.meta["schema_version"], check)
    return reports[0]


# -- drill -------------------------------------------------------------------------------------------------
def drill(settings, path: str | os.PathLike, areas: Sequence[Path], *, clock=None,
          progress: Progress | None = None) -> DrillReport:
    """Restore into a throwaway store (in the scratch ``areas``), verify it, compare it with the
    bundle; remove it."""
    from cortexctl.engine.context import Context
    from cortexctl.store import bundle as sb
    from cortexctl.store import open_storage
    from cortexctl.store import scratch

    started = time.monotonic()
    with scratch.space(areas, "drill") as tmp:
        with opened(path, areas, passphrase=passphrase(settings)) as b:
            ctx = Context(settings, open_storage(tmp / "store"), **({"clock": clock} if clock else {}))
            # the staged store was verified before the swap: the rename changes no byte of it
            problems = [f"{p.check}: {p.message}" for p in _replace(ctx, b, progress, build_index=False).problems]
            with ctx.storage.reading() as tx:
                counts = tx.table_counts(sorted(b.meta["counts"]))
                position = tx.journal_bounds()[2] or 0
                mine = tx.version_digest()
            for table, n in b.meta["counts"].items():
                if counts.get(table) != n:
                    problems.append(f"{table}: {counts.get(table)} rows restored, the bundle holds {n}")
            if position != b.meta["journal_position"]:
                problems.append(f"journal ends at {position}, the bundle at {b.meta['journal_position']}")
            with sb.Members(b.files, tmp) as bundle:
                theirs = bundle.version_digest()
            if mine != theirs:
                problems.append("the restored records differ from the bundle's")
            return DrillReport(path=str(b.root), counts=counts, journal_position=position, records=b.records,
                               problems=problems, seconds=time.monotonic() - started)
