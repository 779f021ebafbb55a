"""Settings: which store is used, a directory (DuckDB) or a PostgreSQL database, from store,
store.backend and store.dsn; the contradictions that are ConfigErrors; passwords never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from cortexctl import config
from cortexctl.engine.documents import ConfigAnswer
from cortexctl.engine.health import topology
from cortexctl.errors import ConfigError

URI = "postgresql://bob:s3cr3t@db.example:6543/memory"
OTHER = "postgres://carol:hunter2@other:5432/team"


def load(tmp_path, toml: str | None = None, env: dict | None = None, **kw) -> config.Settings:
    path = None
    if toml is not None:
        path = tmp_path / "c.toml"
        path.write_text(toml)
    return config.load(config_path=path, env=env or {}, **kw)


def refused(tmp_path, *args, **kw) -> str:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, *args, **kw)
    message = caught.value.message
    assert "\n" not in message and "s3cr3t" not in message and "hunter2" not in message
    return message


def test_the_default_is_the_duckdb_directory_in_the_user_data_dir(tmp_path):
    s = load(tmp_path)
    assert (s.backend, s.location) == ("duckdb", str(config.default_store_path()))
    assert s.store == config.default_store_path()
    assert s.values["store.backend"] == "auto" and s.values["store.dsn"] is None


@pytest.mark.parametrize("how", ["flag", "env", "file string", "file table"])
def test_a_uri_as_the_store_is_postgres_wherever_it_is_given(tmp_path, how):
    if how == "flag":
        s = load(tmp_path, store=URI)
    elif how == "env":
        s = load(tmp_path, env={"CORTEXCTL_STORE": URI})
    elif how == "file string":
        s = load(tmp_path, f'store = "{URI}"\n')
    else:
        s = load(tmp_path, f'[store]\npath = "{URI}"\n')
    assert (s.backend, s.location) == ("postgres", URI)


def test_a_dsn_from_the_environment_is_used_when_no_path_is_given(tmp_path):
    s = load(tmp_path, env={"CORTEXCTL_STORE_DSN": URI})
    assert (s.backend, s.location) == ("postgres", URI)
    assert s.sources["store.dsn"] == "env CORTEXCTL_STORE_DSN"


def test_a_dsn_in_the_config_table_is_used_with_backend_auto(tmp_path):
    s = load(tmp_path, f'[store]\ndsn = "{URI}"\n')
    assert (s.backend, s.location) == ("postgres", URI)


def test_with_backend_auto_a_path_from_the_flag_or_environment_wins_over_a_dsn(tmp_path):
    s = load(tmp_path, f'[store]\ndsn = "{URI}"\n', store=tmp_path / "here")
    assert (s.backend, s.location) == ("duckdb", str(tmp_path / "here"))
    s = load(tmp_path, env={"CORTEXCTL_STORE_DSN": URI, "CORTEXCTL_STORE": str(tmp_path / "env")})
    assert (s.backend, s.location) == ("duckdb", str(tmp_path / "env"))


def test_with_backend_auto_a_dsn_wins_over_a_path_from_the_config_file(tmp_path):
    s = load(tmp_path, f'[store]\npath = "{tmp_path / "file"}"\ndsn = "{URI}"\n')
    assert (s.backend, s.location) == ("postgres", URI)
    s = load(tmp_path, f'store = "{tmp_path / "file"}"\n', env={"CORTEXCTL_STORE_DSN": URI})
    assert (s.backend, s.location) == ("postgres", URI)


def test_a_uri_in_store_wins_over_store_dsn(tmp_path):
    s = load(tmp_path, f'[store]\ndsn = "{OTHER}"\n', store=URI)
    assert s.location == URI


def test_backend_postgres_uses_the_dsn_and_ignores_a_path_from_the_file(tmp_path):
    s = load(tmp_path, f'[store]\nbackend = "postgres"\npath = "{tmp_path}"\ndsn = "{URI}"\n')
    assert (s.backend, s.location) == ("postgres", URI)


def test_backend_duckdb_keeps_the_path_even_with_a_dsn(tmp_path):
    s = load(tmp_path, f'[store]\nbackend = "duckdb"\npath = "{tmp_path / "d"}"\ndsn = "{URI}"\n')
    assert (s.backend, s.location) == ("duckdb", str(tmp_path / "d"))


def test_a_table_path_is_the_same_setting_as_a_string_store(tmp_path):
    s = load(tmp_path, f'[store]\npath = "{tmp_path / "t"}"\n')
    assert s.values["store"] == str(tmp_path / "t") and "store.path" not in s.values
    assert s.store == tmp_path / "t"


def test_a_path_with_a_tilde_is_expanded(tmp_path):
    s = load(tmp_path, store="~/memory")
    assert s.location == str(Path("~/memory").expanduser())


# -- refused -----------------------------------------------------------------------------------
def test_backend_postgres_without_a_dsn_is_refused(tmp_path):
    message = refused(tmp_path, '[store]\nbackend = "postgres"\n')
    assert "store.dsn" in message and "CORTEXCTL_STORE_DSN" in message


def test_backend_postgres_with_a_path_from_the_flag_is_refused(tmp_path):
    message = refused(tmp_path, f'[store]\nbackend = "postgres"\ndsn = "{URI}"\n', store=tmp_path / "x")
    assert "store is a path" in message and "--store" in message


def test_backend_duckdb_with_a_uri_is_refused(tmp_path):
    message = refused(tmp_path, '[store]\nbackend = "duckdb"\n', store=URI)
    assert "duckdb" in message and "postgresql:// URI" in message


@pytest.mark.parametrize("toml, words", [
    ('[store]\nbackend = "mysql"\n', "one of auto, duckdb, postgres"),
    ('[store]\nbackend = 1\n', "one of auto, duckdb, postgres"),
    ('[store]\ndsn = "/var/lib/store"\n', "must be a postgresql:// URI"),
    ('[store]\ndsn = "host=db dbname=memory password=s3cr3t"\n', "key=value connection string is not supported"),
    ('store = "host=db dbname=memory"\n', "key=value connection string is not supported"),
    ('[store]\ncolour = "blue"\n', "store -> colour: unknown setting"),
    (f'[store]\ndsn = "{URI.replace("6543", "99999")}"\n', "not a number from 1 to 65535"),
])
def test_bad_store_settings_are_one_line_config_errors(tmp_path, toml, words):
    message = refused(tmp_path, toml)
    assert words in message


def test_a_bad_uri_on_the_flag_is_shown_redacted(tmp_path):
    message = refused(tmp_path, store=URI.replace("6543", "port"))
    assert "--store" in message and "bob:***@db.example" in message


def test_settings_store_is_no_path_for_a_postgres_store(tmp_path):
    s = load(tmp_path, store=URI)
    with pytest.raises(ConfigError, match="PostgreSQL database") as caught:
        s.store
    assert "s3cr3t" not in caught.value.message


# -- shown ---------------------------------------------------------------------------------------
def test_config_shows_the_dsn_redacted_and_every_store_key(tmp_path):
    s = load(tmp_path, '[store]\nbackend = "postgres"\n', env={"CORTEXCTL_STORE_DSN": URI})
    answer = ConfigAnswer.of(s)
    doc = answer.to_json()["settings"]
    assert doc["store.dsn"] == {"value": "postgresql://bob:***@db.example:6543/memory",
                                "source": "env CORTEXCTL_STORE_DSN"}
    assert doc["store.backend"]["value"] == "postgres" and doc["store"]["value"] is None
    assert "s3cr3t" not in repr(answer.rows) and "s3cr3t" not in repr(answer.docs())


def test_the_topology_of_a_postgres_store_names_host_port_database_and_never_the_password(tmp_path, monkeypatch):
    for name in ("PGHOST", "PGPORT", "PGUSER", "PGDATABASE"):
        monkeypatch.delenv(name, raising=False)
    s = load(tmp_path, env={"CORTEXCTL_STORE_DSN": URI})
    assert topology(s) == {"mode": "external", "backend": "postgres", "host": "db.example", "port": 6543,
                           "database": "memory", "coordinates": "postgresql://bob:***@db.example:6543/memory",
                           "resolved_via": "env CORTEXCTL_STORE_DSN"}
    s = load(tmp_path, store="postgresql:///mem?host=/tmp/pg&password=s3cr3t")
    got = topology(s)
    assert (got["host"], got["port"], got["database"], got["resolved_via"]) == ("/tmp/pg", 5432, "mem", "flag --store")
    assert "s3cr3t" not in repr(got)


def test_the_topology_of_a_duckdb_store_is_embedded(tmp_path):
    s = load(tmp_path, store=tmp_path / "s")
    assert topology(s) == {"mode": "embedded", "backend": "duckdb", "coordinates": str(tmp_path / "s"),
                           "resolved_via": "flag --store"}


def test_bundles_of_a_postgres_store_go_to_backups_in_the_user_data_dir(tmp_path):
    from cortexctl.engine.bundle import default_dest

    assert default_dest(load(tmp_path, store=URI)) == config.default_store_path().parent / "backups"
    assert default_dest(load(tmp_path, store=tmp_path / "s")) == tmp_path / "backups"
    assert default_dest(load(tmp_path, f'[backup]\ndest = "{tmp_path / "b"}"\n', store=URI)) == tmp_path / "b"


def test_a_dsn_of_another_scheme_is_refused_without_echoing_it(tmp_path):
    message = refused(tmp_path, env={"CORTEXCTL_STORE_DSN": "mysql://bob:s3cr3t@db/memory"})
    assert "must be a postgresql:// URI" in message and "mysql" not in message


@pytest.mark.parametrize("url", ["mysql://bob:s3cr3t@db/memory", "https://bob:s3cr3t@example.com/x", "file:///srv/x"])
def test_a_url_of_another_scheme_is_no_store_path(tmp_path, url):
    message = refused(tmp_path, store=url)
    assert "--store: store: must be a path or a postgresql:// URI" in message
