"""healthcheck: healthy, degraded and unhealthy as monitoring sees them; a stable payload; no secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import tamper
from tests.embed_server import dead_url

# The documented payload (README "healthcheck"): keys may be added, never renamed or removed.
TOP = {"status", "timestamp", "store", "topology", "index", "snapshot", "providers", "features", "backup", "identity",
       "details", "damaged", "version", "uptime"}
STORE = {"path", "exists", "size_bytes", "schema_version", "memories", "by_type", "tombstoned", "versions",
         "journal_entries", "pending_embeddings"}
TOPOLOGY = {"mode", "backend", "coordinates", "resolved_via"}
INDEX = {"path", "exists", "count", "model", "dimension", "consistent", "state", "connectivity",
         "denser_on_rebuild", "building"}
EMBEDDING = {"active", "host", "model", "dimensions", "probe"}
SUMMARY = {"active", "host", "model", "endpoint", "local", "credential"}
CREDENTIAL = {"env", "configured", "required"}
BACKUP = {"dest", "last", "window_days"}
SNAPSHOT = {"state", "problem", "fold_failed"}
IDENTITY = {"actor", "source"}


def _check(cli, *extra, env=None, use_store=True):
    run = cli("healthcheck", "--json", *extra, env=env, use_store=use_store)
    return run, json.loads(run.out) if run.out else None


def test_a_fresh_default_store_is_healthy_and_the_payload_has_the_documented_keys(cli):
    assert cli("write", "fact", "hello", use_store=False).code == 0  # the default store, under XDG_DATA_HOME
    run, doc = _check(cli, use_store=False)
    assert run.code == 0 and doc["status"] == "healthy", run
    assert set(doc) >= TOP
    assert set(doc["store"]) >= STORE and set(doc["topology"]) >= TOPOLOGY and set(doc["index"]) >= INDEX
    assert set(doc["providers"]["embedding"]) >= EMBEDDING and set(doc["providers"]["summary"]) >= SUMMARY
    assert set(doc["providers"]["summary"]["credential"]) >= CREDENTIAL
    assert set(doc["backup"]) >= BACKUP and set(doc["identity"]) >= IDENTITY and set(doc["snapshot"]) >= SNAPSHOT
    assert doc["snapshot"]["fold_failed"] is None
    assert doc["store"]["memories"] == 1 and doc["store"]["by_type"] == {"fact": 1}
    assert doc["topology"] == {"mode": "embedded", "backend": "duckdb", "coordinates": doc["store"]["path"],
                               "resolved_via": "default (user data dir)"}
    assert doc["identity"] == {"actor": "alice", "source": "env CORTEXCTL_ACTOR"}
    assert doc["index"]["consistent"] is True and doc["details"] == ["all checks passed"]
    human = cli("healthcheck", use_store=False)
    assert human.code == 0 and human.out.startswith("status: healthy\n"), human


def test_a_dead_embedding_endpoint_is_degraded_and_writes_still_succeed(cli):
    env = {"CORTEXCTL_EMBED_BASE_URL": dead_url(), "CORTEXCTL_EMBED_MODEL": "m"}
    assert cli("write", "fact", "written while the endpoint is down", env=env).code == 0
    run, doc = _check(cli, env=env)
    assert run.code == 0 and doc["status"] == "degraded", run
    assert doc["providers"]["embedding"]["probe"].startswith("failed")
    assert doc["store"]["pending_embeddings"] == 1
    assert any("wait for their embedding" in d for d in doc["details"])
    strict = cli("healthcheck", "--strict", env=env)
    assert strict.code == 1 and strict.err.startswith("cortexctl: degraded:"), strict


def test_a_live_embedding_endpoint_is_probed(cli, embed_server):
    assert cli("write", "fact", "embedded by the endpoint", env=embed_server.env()).code == 0
    run, doc = _check(cli, env=embed_server.env())
    assert run.code == 0 and doc["status"] == "healthy", run
    e = doc["providers"]["embedding"]
    assert (e["active"], e["probe"], e["dimensions"], e["host"]) == ("openai", "ok", 16, embed_server.url[:-3])


def test_a_corrupted_store_is_unhealthy_and_exits_7_naming_the_file(cli, store):
    assert cli("write", "fact", "x").code == 0
    tamper.flip_every(tamper.db_file(store), 97)
    run, doc = _check(cli)
    assert run.code == 7 and doc["status"] == "unhealthy", run
    assert "cannot be read" in doc["details"][0] and run.err.count("\n") == 1
    assert doc["damaged"] == [str(tamper.db_file(store))] and str(tamper.db_file(store)) in run.err


def test_a_store_whose_blocks_do_not_fit_the_read_budget_is_read_again_unbounded_and_is_healthy(cli, store, monkeypatch):
    """healthcheck reads every block through a bounded view; one that runs out of its budget is read
    again unbounded rather than called unhealthy, and leaves nothing in the scratch area."""
    from cortexctl.store import db, scratch

    for n in range(3):
        assert cli("write", "fact", f"memory {n} of a store read under a small budget").code == 0
    monkeypatch.setattr(db, "READ_MEMORY", "1MB")
    from cortexctl.store import open_storage
    from cortexctl.store.interface import OverBudget

    with pytest.raises(OverBudget):  # every block does not fit: what follows is the fall-back
        with open_storage(store).reading(bounded=True) as tx:
            tx.health_counts()
    run, doc = _check(cli)
    assert run.code == 0 and doc["status"] == "healthy", run
    assert doc["store"]["memories"] == 3 and doc["store"]["journal_entries"] == 3
    area = scratch.for_store_dir(Path(store))[0]
    assert not area.exists() or not any(area.iterdir())


def test_a_missing_store_is_unhealthy_and_is_not_created(cli, tmp_path):
    run, doc = _check(cli, "--store", str(tmp_path / "typo"), use_store=False)
    assert run.code == 1 and doc["status"] == "unhealthy" and "no store" in doc["details"][0], run
    assert doc["topology"]["resolved_via"] == "flag --store"
    assert not (tmp_path / "typo").exists()


def test_an_unparsable_config_is_reported_not_raised(cli, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    run = cli("-c", str(bad), "healthcheck", "--json")
    doc = json.loads(run.out)
    assert run.code == 1 and doc["status"] == "unhealthy" and "configuration" in doc["details"][0], run
    assert set(doc) >= TOP and "Traceback" not in run.err and run.err.count("\n") == 1


def test_secrets_never_appear(cli, tmp_path):
    sentinel = "sk-SENTINEL-4c1d"
    cfg = tmp_path / "c.toml"
    cfg.write_text('[chat]\nbase_url = "https://chat.example.com/v1"\nmodel = "m"\n')
    env = {"CORTEXCTL_EMBED_BASE_URL": f"http://user:{sentinel}@127.0.0.1:9/v1", "CORTEXCTL_EMBED_MODEL": "m",
           "CORTEXCTL_EMBED_API_KEY": sentinel, "CORTEXCTL_CHAT_API_KEY": sentinel, "CORTEXCTL_BACKUP_KEY": sentinel}
    assert cli("write", "fact", "x", env=env).code == 0
    for args in (("healthcheck", "--json"), ("healthcheck",), ("healthcheck", "--strict")):
        run = cli("-c", str(cfg), *args, env=env)
        assert sentinel not in run.out + run.err, run
    doc = json.loads(cli("-c", str(cfg), "healthcheck", "--json", env=env).out)
    assert doc["providers"]["summary"]["credential"] == {"env": "CORTEXCTL_CHAT_API_KEY", "configured": True,
                                                          "required": True}
    assert doc["providers"]["summary"]["endpoint"] == "https://chat.example.com/v1/chat/completions"


def test_a_remote_chat_endpoint_without_its_key_is_degraded(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[chat]\nbase_url = "https://chat.example.com/v1"\nmodel = "m"\n')
    assert cli("write", "fact", "x").code == 0
    doc = json.loads(cli("-c", str(cfg), "healthcheck", "--json").out)
    assert doc["status"] == "degraded" and "CORTEXCTL_CHAT_API_KEY" in doc["details"][0]
    cfg.write_text('[chat]\nbase_url = "http://127.0.0.1:11434/v1"\nmodel = "m"\n')
    doc = json.loads(cli("-c", str(cfg), "healthcheck", "--json").out)
    assert doc["status"] == "healthy" and doc["providers"]["summary"]["local"] is True


def test_no_backup_within_the_configured_window_is_degraded(cli, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[backup]\nwindow_days = 1\ndest = "{tmp_path / "bk"}"\n')
    assert cli("write", "fact", "x").code == 0
    doc = json.loads(cli("-c", str(cfg), "healthcheck", "--json").out)
    assert doc["status"] == "degraded" and doc["backup"]["last"] is None
    assert cli("-c", str(cfg), "backup", "--quiet").code == 0
    doc = json.loads(cli("-c", str(cfg), "healthcheck", "--json").out)
    assert doc["status"] == "healthy" and Path(doc["backup"]["last"]["path"]).parent == tmp_path / "bk"
    assert 0 <= doc["backup"]["last"]["age_hours"] < 1


def test_an_index_file_out_of_step_is_degraded(cli, store):
    for i in range(3):
        assert cli("write", "fact", f"note {i}").code == 0
    assert cli("reindex", "--rebuild").code == 0
    index = store / "cortex.usearch"
    index.write_bytes(index.read_bytes()[:-64])
    doc = json.loads(cli("healthcheck", "--json").out)
    assert doc["status"] == "degraded" and doc["index"]["consistent"] is False, doc


def test_a_store_read_that_fails_after_a_ctrl_c_is_the_interrupt_not_an_unhealthy_store(cli, store, monkeypatch):
    """DuckDB turns a ^C or SIGTERM that lands in its query into an error of its own: once one has
    arrived, healthcheck stops as interrupted (130, nothing on stdout) instead of calling the store
    unhealthy. The read's error here is a damaged file's, with a ^C recorded as arrived."""
    import signal

    from cortexctl import errors

    assert cli("write", "fact", "x").code == 0
    tamper.flip_every(tamper.db_file(store), 97)
    monkeypatch.setattr(errors, "_SIGNALLED", [signal.SIGINT])
    run = cli("healthcheck", "--json")
    assert (run.code, run.out, run.err) == (130, "", "cortexctl: interrupted\n"), run
