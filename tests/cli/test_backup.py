"""backup, restore, bundle verify and bundle drill: what goes in, what comes back, and every guard."""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from cortexctl import Cortex, FindQuery
from cortexctl.engine import bundle as eb
from cortexctl.engine.merge import MERGED_TABLES
from cortexctl.store import bundle as sb
from tests import tamper
from tests.conftest import leftovers


_FILLED: dict[str, tuple[Path, dict]] = {}  # actor -> the filled store and its IDs


@pytest.fixture(scope="module", autouse=True)
def _filled_stores(tmp_path_factory):
    """``_fill`` writes its store once per module; each test gets a copy."""
    _FILLED.clear()
    _FILLED["base"] = (tmp_path_factory.mktemp("filled"), {})
    yield
    _FILLED.clear()


def _fill(cx: Cortex) -> dict:
    """A store with a bit of everything: versions, tags, a forget, attests, learned weights, a checkpoint."""
    if cx.store.path.exists():
        return _write_fill(cx)
    if cx.actor not in _FILLED:
        template = _FILLED["base"][0] / cx.actor
        _FILLED[cx.actor] = (template, _write_fill(Cortex(store=template, actor=cx.actor)))
    template, ids = _FILLED[cx.actor]
    shutil.copytree(template, cx.store.path)
    return dict(ids)


def _write_fill(cx: Cortex) -> dict:
    a = cx.write("fact", "The deploy key rotates monthly", tags=["ops"]).id
    b = cx.write("preference", "tabs over spaces").id
    c = cx.write("goal", "ship v2 before the end of the year").id
    cx.update(a, "The deploy key rotates weekly")
    cx.tag(b, add=["style"])
    gone = cx.write("fact", "a memory that will be forgotten").id
    cx.forget(gone, reason="wrong")
    cx.attest("deploy-1", "success", [a, b])
    cx.attest("deploy-2", "failure", [a], reason="factual_error")
    cx.compact("rel-1", "3", 800, [a, b, c])
    return {"a": a, "b": b, "c": c, "gone": gone}


def _export(cli, store: Path) -> bytes:
    run = cli("export", "--store", str(store), use_store=False)
    assert run.code == 0, run
    return run.out.encode()


def _backup(cli, dest: Path, *extra: str) -> Path:
    run = cli("backup", "--dest", str(dest), "--json", *extra)
    assert run.code == 0, run
    return Path(run.json()["path"])


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_every_state_table_is_bundled_or_named_as_left_out_and_has_a_merge_rule(cx, cli, tmp_path):
    cx.write("fact", "x")
    tables = tamper.tables(cx.store.path)
    path = _backup(cli, tmp_path / "bk")
    manifest = json.loads((path / "manifest.json").read_text())
    bundled = {m["table"] for m in manifest["members"]}
    assert bundled | set(sb.NOT_BUNDLED) == tables, "a new table must go into bundles or into NOT_BUNDLED"
    assert not bundled & set(sb.NOT_BUNDLED)
    assert bundled <= set(MERGED_TABLES), f"no merge rule for {sorted(bundled - set(MERGED_TABLES))}"
    assert "rate_buckets" not in bundled and not list(path.glob("*.usearch*"))


def test_a_bundle_restored_into_an_empty_store_answers_as_the_original(cx, cli, tmp_path):
    _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    meta = json.loads((path / "bundle-meta.json").read_text())
    assert meta["format"] == eb.FORMAT and meta["topology"] == {"mode": "embedded"}
    assert meta["counts"]["heads"] == 4 and meta["journal_position"] > 0
    assert meta["embedding"]["model"] and meta["embedding"]["dim"] > 0
    for mode in ("replace", "merge"):
        target = tmp_path / f"restored-{mode}"
        run = cli("restore", str(path), "--mode", mode, "--store", str(target), use_store=False)
        assert run.code == 0, run
        assert _export(cli, target) == _export(cli, cx.store.path)
        other = Cortex(store=target, actor="alice")
        assert other.load_checkpoint("rel-1", "3") == cx.load_checkpoint("rel-1", "3")
        q = "SELECT * FROM learned_weights ORDER BY actor"
        assert tamper.rows(target, q) == tamper.rows(cx.store.path, q)
        query = FindQuery(near="how often does the deploy key rotate", k=3)
        assert [h.id for h in other.find(query)] == [h.id for h in cx.find(query)]
        assert other.verify().ok
        assert cli("verify", "--store", str(target), use_store=False).code == 0


def test_bundle_files_are_private_and_the_partial_directory_is_gone(cx, cli, tmp_path):
    cx.write("fact", "private fact")
    path = _backup(cli, tmp_path / "bk")
    assert (path.stat().st_mode & 0o777) == 0o700
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in path.iterdir())
    assert [p.name for p in (tmp_path / "bk").iterdir()] == [path.name]


def test_a_byte_identical_copy_of_a_store_verifies(cx, cli, tmp_path):
    _fill(cx)
    assert cli("reindex", "--rebuild").code == 0
    copy = tmp_path / "copy"
    shutil.copytree(cx.store.path, copy)  # new modification times, same bytes
    run = cli("verify", "--store", str(copy), use_store=False)
    assert run.code == 0, run


def test_merging_the_same_bundle_twice_changes_nothing_the_second_time(cx, cli, tmp_path):
    _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    cx.write("fact", "written after the backup")
    before = _export(cli, cx.store.path)
    for _ in range(2):
        run = cli("restore", str(path), "--mode", "merge", "--json")
        assert run.code == 0, run
        assert run.json()["added"] == {"memories": 0, "versions": 0, "updated_memories": 0, "checkpoints": 0,
                                         "grants": 0, "revocations": 0}
        assert run.json()["verified"] is True
    assert _export(cli, cx.store.path) == before


def test_merging_diverged_stores_keeps_every_version_of_both_and_reports_a_conflict(cx, cli, tmp_path):
    ids = _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    twin = tmp_path / "twin"
    assert cli("restore", str(path), "--mode", "replace", "--store", str(twin), use_store=False).code == 0
    other = Cortex(store=twin, actor="alice")
    mine_new = cx.write("fact", "only in the first store").id
    theirs_new = other.write("fact", "only in the twin").id
    other.update(ids["b"], "tabs, always")  # the twin is ahead on b: its version 2 comes over
    other.tag(ids["b"], add=["twin"])
    cx.update(ids["c"], "ship v2 in November")  # both write version 2 of c: a conflict
    other.update(ids["c"], "ship v2 in December")
    path2 = _backup(cli, tmp_path / "bk2", "--store", str(twin))
    run = cli("restore", str(path2), "--mode", "merge", "--json")
    assert run.code == 0, run
    assert run.json()["added"]["memories"] == 1 and run.json()["added"]["updated_memories"] == 1
    assert run.json()["conflicts"] == [{"id": ids["c"], "version": 2, "kept": "local"}]
    assert cx.show(theirs_new).short and cx.show(mine_new).short
    b = cx.show(ids["b"])
    assert b.version == 2 and "twin" in b.tags and "style" in b.tags
    assert "November" in cx.show(ids["c"]).short
    assert cli("verify").code == 0
    again = cli("restore", str(path2), "--mode", "merge", "--json")
    assert again.code == 0 and again.json()["added"]["versions"] == 0 and len(again.json()["conflicts"]) == 1


def test_merge_keeps_a_local_forget_when_the_bundle_is_ahead(cx, cli, tmp_path):
    a = cx.write("fact", "one").id
    path = _backup(cli, tmp_path / "bk")
    twin = tmp_path / "twin"
    assert cli("restore", str(path), "--mode", "replace", "--store", str(twin), use_store=False).code == 0
    Cortex(store=twin, actor="alice").update(a, "one, amended")
    cx.forget(a, reason="obsolete")
    path2 = _backup(cli, tmp_path / "bk2", "--store", str(twin))
    assert cli("restore", str(path2), "--mode", "merge").code == 0
    m = cx.show(a)
    assert m.version == 2 and m.tombstone is not None
    assert cli("verify").code == 0


def test_replace_refuses_a_store_that_holds_data_without_force(cx, cli, tmp_path):
    cx.write("fact", "a")
    path = _backup(cli, tmp_path / "bk")
    cx.write("fact", "b")
    before = _files(cx.store.path)
    run = cli("restore", str(path), "--mode", "replace")
    assert run.code == 8 and "--force" in run.err and run.err.count("\n") == 1, run
    assert _files(cx.store.path) == before
    run = cli("restore", str(path), "--mode", "replace", "--force", "--json")
    assert run.code == 0, run
    assert cx.verify().ok and len(cx.find(FindQuery(k=10))) == 1


@pytest.mark.slow
def test_replace_at_the_default_store_needs_the_environment_and_the_confirmation(cli_proc, tmp_path):
    data, tmpdir = tmp_path / "home-data", tmp_path / "tmpdir"  # the default store, not under TMPDIR
    tmpdir.mkdir()
    env = {"XDG_DATA_HOME": str(data), "TMPDIR": str(tmpdir), "CORTEXCTL_STORE": ""}
    env_clean = {k: v for k, v in env.items() if v}
    run = cli_proc("write", "fact", "in the default store", env=env_clean, use_store=False)
    assert run.code == 0, run
    store = data / "cortexctl" / "store"
    assert store.is_dir()
    run = cli_proc("backup", "--dest", str(tmp_path / "bk"), "--json", env=env_clean, use_store=False)
    assert run.code == 0, run
    bundle = run.json()["path"]
    before = _files(store)
    for extra, more_env in ((["--force"], {}), (["--force", "--confirm", "REPLACE"], {}),
                            (["--force"], {"CORTEXCTL_ALLOW_DESTRUCTIVE": "1"}),
                            (["--force", "--confirm", "yes"], {"CORTEXCTL_ALLOW_DESTRUCTIVE": "1"})):
        run = cli_proc("restore", bundle, "--mode", "replace", *extra, env={**env_clean, **more_env}, use_store=False)
        assert run.code == 8, (extra, more_env, run)
        assert "CORTEXCTL_ALLOW_DESTRUCTIVE=1" in run.err
        assert _files(store) == before
    run = cli_proc("restore", bundle, "--mode", "replace", "--force", "--confirm", "REPLACE",
                   env={**env_clean, "CORTEXCTL_ALLOW_DESTRUCTIVE": "1"}, use_store=False)
    assert run.code == 0, run


def test_dry_runs_write_nothing(cx, cli, tmp_path):
    _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    empty = tmp_path / "empty"
    run = cli("restore", str(path), "--mode", "replace", "--dry-run", "--store", str(empty), "--json",
              use_store=False)
    assert run.code == 0 and run.json()["dry_run"] and run.json()["added"]["heads"] == 4, run
    assert not empty.exists()
    twin = tmp_path / "twin"
    assert cli("restore", str(path), "--mode", "replace", "--store", str(twin), use_store=False).code == 0
    Cortex(store=twin, actor="alice").write("fact", "new in the twin")
    path2 = _backup(cli, tmp_path / "bk2", "--store", str(twin))
    before = _files(cx.store.path)
    run = cli("restore", str(path2), "--mode", "merge", "--dry-run", "--json")
    assert run.code == 0 and run.json()["added"]["memories"] == 1, run
    assert _files(cx.store.path) == before


def test_retention_keeps_the_newest_k_and_prunes_the_rest_once_older_than_n_days(cx, tmp_path):
    cx.write("fact", "x")
    dest = tmp_path / "bk"
    now = datetime(2026, 11, 23, 2, 0, 0)
    made = []
    for days_ago in (30, 20, 10, 6, 2):  # five nightly-ish bundles, oldest first
        cx.context.clock = lambda at=now - timedelta(days=days_ago): at
        made.append(Path(cx.backup(dest=dest, keep=100, max_age_days=0).path).name)
    assert [p.name for _, p in eb.bundles_in(dest)] == made[::-1]
    cx.context.clock = lambda: now
    result = cx.backup(dest=dest, keep=3, max_age_days=7)
    kept = [p.name for _, p in eb.bundles_in(dest)]
    # newest three are kept whatever their age; of the rest, those older than 7 days go
    assert kept == [Path(result.path).name, made[4], made[3]]
    assert sorted(result.pruned) == sorted(made[:3])
    # an age past what a timedelta holds (found by fuzzing: exit 70), or none at all, prunes nothing younger
    for days in (1e9, float("inf")):
        assert cx.backup(dest=dest, keep=1, max_age_days=days).pruned == []
    cx.context.clock = lambda: now + timedelta(hours=1)
    result = cx.backup(dest=dest, keep=1, max_age_days=0)
    assert [p.name for _, p in eb.bundles_in(dest)] == [Path(result.path).name]


def test_two_backups_in_one_second_get_two_names(cx, tmp_path):
    cx.write("fact", "x")
    cx.context.clock = lambda: datetime(2026, 11, 23, 2, 0, 0)
    a, b = cx.backup(dest=tmp_path / "bk"), cx.backup(dest=tmp_path / "bk")
    assert Path(a.path).name == "backup-20261123T020000Z" and Path(b.path).name == "backup-20261123T020000Z-1"
    assert [p for _, p in eb.bundles_in(tmp_path / "bk")] == [Path(b.path), Path(a.path)]


def test_quiet_prints_nothing_and_json_summarizes(cx, cli, tmp_path):
    cx.write("fact", "x")
    run = cli("backup", "--dest", str(tmp_path / "bk"), "--quiet")
    assert run.code == 0 and run.out == "" and run.err == "", run
    run = cli("backup", "--dest", str(tmp_path / "bk"), "--json")
    assert run.code == 0
    assert set(run.json()) == {"path", "counts", "bytes", "seconds", "encrypted", "pruned"}
    assert run.json()["counts"]["heads"] == 1 and run.json()["bytes"] > 0


def test_bundle_verify_and_drill_report_a_sound_bundle(cx, cli, tmp_path):
    _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    before = _files(cx.store.path)
    run = cli("bundle", "verify", str(path), "--json")
    assert run.code == 0 and run.json()["ok"] and run.json()["records_checked"] == 5, run
    run = cli("bundle", "drill", str(path), "--json")
    assert run.code == 0 and run.json()["ok"] and run.json()["problems"] == [], run
    assert run.json()["journal_position"] == json.loads((path / "bundle-meta.json").read_text())["journal_position"]
    assert _files(cx.store.path) == before  # neither touches the store


def test_encrypted_bundles_round_trip_and_refuse_a_wrong_or_missing_key(cx, cli, tmp_path):
    _fill(cx)
    secret = "correct horse battery staple 7f3a"
    key = {"CORTEXCTL_BACKUP_KEY": secret}
    run = cli("backup", "--dest", str(tmp_path / "bk"), "--encrypt", "--json", env=key)
    assert run.code == 0 and run.json()["encrypted"], run
    path = Path(run.json()["path"])
    for p in path.iterdir():
        assert secret.encode() not in p.read_bytes()
    heads = (path / "heads.parquet").read_bytes()
    assert b"PAR1" not in heads[:16] and b"deploy key" not in heads
    assert cli("bundle", "verify", str(path), env=key).code == 0
    wrong = cli("bundle", "verify", str(path), env={"CORTEXCTL_BACKUP_KEY": "not it"})
    assert wrong.code == 7 and "key" in wrong.err and secret not in wrong.err, wrong
    missing = cli("bundle", "verify", str(path))
    assert missing.code == 2 and "CORTEXCTL_BACKUP_KEY" in missing.err, missing
    target = tmp_path / "restored"
    assert cli("restore", str(path), "--mode", "replace", "--store", str(target), env={"CORTEXCTL_BACKUP_KEY": "x"},
               use_store=False).code == 7
    assert not target.exists()
    run = cli("restore", str(path), "--mode", "replace", "--store", str(target), env=key, use_store=False)
    assert run.code == 0 and secret not in run.out + run.err, run
    assert _export(cli, target) == _export(cli, cx.store.path)
    no_key = cli("backup", "--dest", str(tmp_path / "bk"), "--encrypt")
    assert no_key.code == 2 and "CORTEXCTL_BACKUP_KEY" in no_key.err


@pytest.mark.parametrize("args, code, words", [
    (["backup", "--keep", "0"], 2, "--keep"),
    (["backup", "--max-age-days", "-1"], 2, "--max-age-days"),
    (["backup", "--max-age-days", "nan"], 2, "--max-age-days"),
    (["backup", "--dest", "{file}"], 2, "not a directory"),
    (["backup", "--dest", "{store}/inside"], 2, "inside the store"),
    (["restore", "{bundle}"], 2, "--mode"),
    (["restore", "{bundle}", "--mode", "bogus"], 2, "--mode must be one of merge, replace"),
    (["restore", "{missing}", "--mode", "merge"], 3, "no bundle"),
    (["restore", "{file}", "--mode", "merge"], 2, "not a directory"),
    (["bundle", "verify", "{missing}"], 3, "no bundle"),
    (["bundle", "verify", "{file}"], 2, "not a directory"),
    (["bundle", "drill", "{missing}"], 3, "no bundle"),
    (["bundle", "verify"], 2, "PATH"),
])
def test_bad_input_is_one_line_and_the_documented_exit_code(cx, cli, tmp_path, args, code, words):
    cx.write("fact", "x")
    bundle = _backup(cli, tmp_path / "bk")
    (tmp_path / "file").write_text("not a bundle")
    fill = {"file": str(tmp_path / "file"), "store": str(cx.store.path), "bundle": str(bundle),
            "missing": str(tmp_path / "nope")}
    before = _files(cx.store.path)
    run = cli(*[a.format(**fill) for a in args])
    assert run.code == code, run
    assert words in run.err and run.err.count("\n") == 1 and "Traceback" not in run.err, run
    assert _files(cx.store.path) == before


def test_backup_of_a_missing_store_is_not_found(cli, tmp_path):
    run = cli("backup", "--dest", str(tmp_path / "bk"), "--store", str(tmp_path / "none"), use_store=False)
    assert run.code == 3 and run.err.count("\n") == 1, run
    assert not (tmp_path / "none").exists()


def _forge(path: Path, table: str, sql: str) -> None:
    """Rewrite one member with ``sql`` over its rows (``t``) and fix the manifest and meta to match:
    what a forger who knows the format would do."""
    import hashlib

    member = path / f"{table}.parquet"
    rows = tamper.rewrite_member(member, sql)
    manifest = json.loads((path / "manifest.json").read_text())
    for m in manifest["members"]:
        if m["table"] == table:
            m.update(bytes=member.stat().st_size, sha256=hashlib.sha256(member.read_bytes()).hexdigest(), rows=rows)
    (path / "manifest.json").write_text(json.dumps(manifest))
    meta = json.loads((path / "bundle-meta.json").read_text())
    meta["counts"][table] = rows
    meta["manifest_sha256"] = hashlib.sha256((path / "manifest.json").read_bytes()).hexdigest()
    (path / "bundle-meta.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("table, sql, words", [
    ("journal", "UPDATE t SET payload = repeat('x', 17 * 1024 * 1024)::BLOB WHERE seq = 1", "over the"),
    ("versions", "UPDATE t SET data = repeat('x', 70000)::BLOB", "over the"),
    ("versions", "UPDATE t SET data = 'tampered'::BLOB WHERE version = 1", "hash does not match"),
    ("heads", "UPDATE t SET current_version = 9", "does not verify"),
])
def test_a_forged_bundle_is_refused_and_nothing_is_written(cx, cli, tmp_path, table, sql, words):
    _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    _forge(path, table, sql)
    before = _files(cx.store.path)
    for args in (["restore", str(path), "--mode", "merge"], ["bundle", "drill", str(path)],
                 ["restore", str(path), "--mode", "replace", "--force"]):
        run = cli(*args)
        if words == "does not verify" and args[0] == "bundle":
            assert run.code == 7, run
            continue
        assert run.code == 7 and (words in run.err or args[0] == "bundle"), (args, run)
        assert run.err.count("\n") == 1 and "Traceback" not in run.err, run
        assert _files(cx.store.path) == before


def test_a_failed_restore_into_a_new_location_leaves_nothing_there(cx, cli, tmp_path):
    _fill(cx)
    path = _backup(cli, tmp_path / "bk")
    _forge(path, "heads", "UPDATE t SET current_version = 9")
    target = tmp_path / "new-store"
    run = cli("restore", str(path), "--mode", "replace", "--store", str(target), use_store=False)
    assert run.code == 7, run
    assert not target.exists() and leftovers(tmp_path) == []


def test_restore_says_the_index_is_built_in_the_background_and_healthcheck_follows_it(cx, cli, tmp_path,
                                                                                      monkeypatch):
    from cortexctl.store import fold

    _fill(cx)
    bundle = _backup(cli, tmp_path / "bk")
    monkeypatch.delenv("CORTEXCTL_FOLD")  # the default: folds in the background
    target = tmp_path / "restored"
    run = cli("restore", str(bundle), "--mode", "replace", "--store", str(target), use_store=False)
    assert run.code == 0, run
    assert "verify ok" in run.out and "index: being built in the background" in run.err, run
    fold.wait_idle(target)
    health = cli("healthcheck", "--json", "--store", str(target), use_store=False)
    doc = health.json()
    assert doc["index"]["state"] == "ok" and doc["index"]["building"] is False, doc["index"]
    assert health.code == 0 and doc["status"] == "healthy", doc["details"]
    run = cli("restore", str(bundle), "--mode", "replace", "--store", str(target), "--force", "--json",
              use_store=False)
    assert run.code == 0 and any("being built in the background" in n for n in run.json()["notes"]), run
    fold.wait_idle(target)
    assert cli("verify", "--store", str(target), use_store=False).code == 0
