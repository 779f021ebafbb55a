"""config show: the effective settings, with the source of each, and precedence."""

from __future__ import annotations

import pytest

from tests.conftest import assert_clean_error


def _settings(run):
    assert run.code == 0, run
    return run.json()["settings"]


def test_defaults_come_from_the_defaults(cli):
    s = _settings(cli("config", "show", "--json", use_store=False, env={"CORTEXCTL_ACTOR": ""}))
    assert s["wait"] == {"value": 5.0, "source": "default"}
    assert s["store"]["source"].startswith("default")
    assert s["actor"]["source"] == "default (OS user)"
    assert s["embedding.api_key_env"]["value"] == "CORTEXCTL_EMBED_API_KEY"


def test_precedence_is_file_then_env_then_flags(tmp_path, cli):
    cfg = tmp_path / "c.toml"
    cfg.write_text('actor = "from-file"\nwait = 2\n[embedding]\nmodel = "m-file"\ntimeout = 9\n')
    s = _settings(cli("-c", cfg, "config", "show", "--json", env={"CORTEXCTL_ACTOR": "", "CORTEXCTL_EMBED_MODEL": "m-env"}))
    assert s["actor"] == {"value": "from-file", "source": f"file {cfg}"}
    assert s["embedding.model"] == {"value": "m-env", "source": "env CORTEXCTL_EMBED_MODEL"}
    assert s["embedding.timeout"]["value"] == 9
    s = _settings(cli("-c", cfg, "config", "show", "--json", "--wait", "7", "--actor", "flagged"))
    assert s["wait"] == {"value": 7.0, "source": "flag --wait"}
    assert s["actor"] == {"value": "flagged", "source": "flag --actor"}


def test_json_config_files_and_the_env_config_path_work(tmp_path, cli):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"chat": {"base_url": "http://127.0.0.1:9/v1"}}')
    s = _settings(cli("config", "show", "--json", env={"CORTEXCTL_CONFIG": str(cfg)}))
    assert s["chat.base_url"] == {"value": "http://127.0.0.1:9/v1", "source": f"file {cfg}"}


def test_the_user_config_dir_file_is_read_when_present(tmp_path, cli):
    home_cfg = tmp_path / "home" / ".config" / "cortexctl"
    home_cfg.mkdir(parents=True)
    (home_cfg / "config.toml").write_text('actor = "homer"\n')
    s = _settings(cli("config", "show", "--json", env={"CORTEXCTL_ACTOR": ""}))
    assert s["actor"]["value"] == "homer"


def test_api_keys_are_never_printed(cli):
    r = cli("config", "show", "--json", env={"CORTEXCTL_EMBED_API_KEY": "sk-very-secret"})
    assert "sk-very-secret" not in r.out + r.err


def test_bad_config_values_name_the_key_path(tmp_path, cli):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[embedding]\nbase_url = "ftp://x"\n')
    r = cli("-c", cfg, "config", "show")
    assert_clean_error(r, 2)
    assert "embedding -> base_url" in r.err and "http(s) URL" in r.err


def test_plain_output_is_tab_separated_key_value_source(cli):
    lines = cli("config", "show", "--wait", "3").out.splitlines()
    assert "wait\t3.0\tflag --wait" in lines


# -- a store on PostgreSQL: the password never prints -----------------------------------------
URI = "postgresql://bob:s3cr3t@db.example:6543/memory"
SHOWN = "postgresql://bob:***@db.example:6543/memory"


def test_config_show_redacts_a_dsn_from_the_environment_in_every_format(cli):
    env = {"CORTEXCTL_STORE_DSN": URI}
    s = _settings(cli("config", "show", "--json", use_store=False, env=env))
    assert s["store.dsn"] == {"value": SHOWN, "source": "env CORTEXCTL_STORE_DSN"}
    assert s["store.backend"] == {"value": "auto", "source": "default"}
    for args in (("config", "show"), ("config", "show", "--json"), ("config", "show", "--jsonl")):
        run = cli(*args, use_store=False, env=env)
        assert run.code == 0 and "s3cr3t" not in run.out + run.err, run
    assert f"store.dsn\t{SHOWN}\tenv CORTEXCTL_STORE_DSN" in cli("config", "show", use_store=False, env=env).out


def test_config_show_redacts_a_uri_given_to_store_and_in_a_config_table(tmp_path, cli):
    run = cli("config", "show", "--json", "--store", URI + "?password=other", use_store=False)
    assert run.json()["settings"]["store"]["value"] == SHOWN + "?password=***"
    assert "s3cr3t" not in run.out and "other" not in run.out
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[store]\nbackend = "postgres"\ndsn = "{URI}"\n')
    s = _settings(cli("-c", cfg, "config", "show", "--json", use_store=False))
    assert s["store.dsn"] == {"value": SHOWN, "source": f"file {cfg}"}
    assert s["store.backend"] == {"value": "postgres", "source": f"file {cfg}"}


ENDPOINT = "http://user:pw-SECRET@127.0.0.1:9/v1?api_key=KEY-SECRET&model=m"


def test_config_show_redacts_credentials_in_endpoint_urls_in_every_format(tmp_path, cli):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[chat]\nbase_url = "{ENDPOINT}"\n')
    env = {"CORTEXCTL_EMBED_BASE_URL": "https://TOKEN-SECRET@127.0.0.1:9/v1?token=T-SECRET",
           "CORTEXCTL_EMBED_MODEL": "m"}
    for args in (("config", "show"), ("config", "show", "--json"), ("config", "show", "--jsonl")):
        run = cli("-c", cfg, *args, use_store=False, env=env)
        assert run.code == 0 and "SECRET" not in run.out + run.err, run
    s = _settings(cli("-c", cfg, "config", "show", "--json", use_store=False, env=env))
    assert s["chat.base_url"]["value"] == "http://user:***@127.0.0.1:9/v1?api_key=***&model=m"
    assert s["embedding.base_url"]["value"] == "https://***@127.0.0.1:9/v1?token=***"


def test_healthcheck_and_errors_that_quote_an_endpoint_never_show_its_credentials(cli, store):
    env = {"CORTEXCTL_EMBED_BASE_URL": "http://user:pw-SECRET@127.0.0.1:9/v1?api_key=KEY-SECRET",
           "CORTEXCTL_EMBED_MODEL": "m", "CORTEXCTL_CHAT_BASE_URL": ENDPOINT, "CORTEXCTL_CHAT_MODEL": "m"}
    runs = [cli("healthcheck", env=env), cli("healthcheck", "--json", env=env),
            cli("consolidate", "-", input="a transcript", env=env),
            cli("write", "fact", "x", env={**env, "CORTEXCTL_EMBED_BASE_URL": "http://u:pw-SECRET@[::1"})]
    assert runs[2].code == 9 and runs[3].code == 2, runs
    for run in runs:
        assert "SECRET" not in run.out + run.err, run


def test_a_json_config_file_takes_the_store_table_too(tmp_path, cli):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"store": {"path": "%s", "backend": "duckdb"}}' % (tmp_path / "s"))
    s = _settings(cli("-c", cfg, "config", "show", "--json", use_store=False))
    assert s["store"] == {"value": str(tmp_path / "s"), "source": f"file {cfg}"}


@pytest.mark.parametrize("toml, flags, words", [
    ('[store]\nbackend = "postgres"\n', (), "no store.dsn is set"),
    ('[store]\nbackend = "duckdb"\n', ("--store", URI), "store is a postgresql:// URI"),
    (f'[store]\nbackend = "postgres"\ndsn = "{URI}"\n', ("--store", "/tmp/here"), "store is a path"),
    ('[store]\nbackend = "sqlite"\n', (), "store -> backend: must be one of auto, duckdb, postgres"),
    ('[store]\ndsn = "host=db password=s3cr3t"\n', (), "key=value connection string is not supported"),
    ('', ("--store", "postgresql://bob:s3cr3t@db:notaport/m"), "bob:***@db:notaport"),
])
def test_contradictory_or_bad_store_settings_are_one_line_exit_2(tmp_path, cli, toml, flags, words):
    cfg = tmp_path / "c.toml"
    cfg.write_text(toml)
    for command in (("config", "show"), ("find", "--near", "x"), ("write", "fact", "x")):
        run = cli("-c", cfg, *command, *flags, use_store=False)
        assert_clean_error(run, 2)
        assert words in run.err and "s3cr3t" not in run.err, run


def test_a_dsn_in_the_environment_that_is_not_a_uri_is_one_line_exit_2(cli):
    run = cli("find", "--near", "x", use_store=False, env={"CORTEXCTL_STORE_DSN": "/var/lib/store"})
    assert_clean_error(run, 2)
    assert "$CORTEXCTL_STORE_DSN: store -> dsn: must be a postgresql:// URI" in run.err


def _without_psycopg(tmp_path) -> dict:
    """An environment whose Python cannot import psycopg (the postgres extra not installed)."""
    shadow = tmp_path / "no-psycopg"
    shadow.mkdir()
    (shadow / "psycopg.py").write_text("raise ModuleNotFoundError(\"No module named 'psycopg'\", name='psycopg')\n")
    return {"PYTHONPATH": str(shadow)}


def test_without_the_postgres_extra_a_postgres_store_is_one_line_naming_it(tmp_path, cli_proc):
    env = {**_without_psycopg(tmp_path), "CORTEXCTL_STORE_DSN": URI}
    for command in (("find", "--near", "x"), ("write", "fact", "x"), ("verify",)):
        run = cli_proc(*command, use_store=False, env=env)
        assert_clean_error(run, 2)
        assert run.err.strip().endswith(
            "the PostgreSQL backend needs the postgres extra: pip install 'cortexctl[postgres]'"), run
    assert cli_proc("config", "show", use_store=False, env=env).code == 0  # no store is opened


def test_healthcheck_reports_an_external_topology_without_the_password(tmp_path, cli_proc):
    env = {**_without_psycopg(tmp_path), "CORTEXCTL_STORE": URI, "PGPORT": "", "PGDATABASE": ""}
    run = cli_proc("healthcheck", "--json", use_store=False, env=env)
    doc = run.json()
    assert run.code != 0 and doc["status"] == "unhealthy"
    assert doc["topology"] == {"mode": "external", "backend": "postgres", "host": "db.example", "port": 6543,
                               "database": "memory", "coordinates": SHOWN, "resolved_via": "env CORTEXCTL_STORE"}
    assert any("postgres extra" in d for d in doc["details"])
    assert "s3cr3t" not in run.out + run.err
