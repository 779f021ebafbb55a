"""config show: the effective settings, with the source of each, and precedence."""

from __future__ import annotations

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
