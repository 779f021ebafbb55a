"""Embedding over a real OpenAI-compatible endpoint on 127.0.0.1: batching, retries, a dead
endpoint, a wrong dimension, switching models; and the hash embedder as the default."""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import assert_clean_error, assert_store_verifies
from tests.embed_server import dead_url


def _lines(n: int, word: str = "memory") -> str:
    return "".join(orjson.dumps({"type": "fact", "text": f"{word} number {i} about deploy keys"}).decode() + "\n"
                   for i in range(n))


def _config(tmp_path, **embedding) -> str:
    body = "[embedding]\n" + "".join(
        f"{k} = {v!r}\n" if isinstance(v, str) else f"{k} = {v}\n" for k, v in embedding.items()
    )
    path = tmp_path / "config.toml"
    path.write_text(body.replace("'", '"'))
    return str(path)


def test_the_default_install_uses_the_hash_embedder(cli):
    uri = cli("write", "fact", "The deploy key rotates monthly").out.strip()
    run = cli("find", "--near", "rotate the deploy key", "--json")
    assert run.code == 0, run
    hit = run.json()["results"][0]
    assert hit["uri"] == uri
    assert "semantic" in hit["lanes"] and "lexical" in hit["lanes"]
    out = cli("reindex", "--json").json()
    assert out["model"].startswith("hash-v1/") and out["embedded"] == 0


def test_import_embeds_in_batches_of_the_configured_size(cli, embed_server, tmp_path, store):
    cfg = _config(tmp_path, batch_size=4)
    run = cli("-c", cfg, "import", "-", "--json", input=_lines(10), env=embed_server.env())
    assert run.code == 0, run
    assert run.json()["pending_embeddings"] == 0
    assert embed_server.batch_sizes() == [4, 4, 2]
    assert all(r["body"]["model"] == "test-embed" for r in embed_server.requests)
    hit = cli("find", "--near", "memory number 3", "--json", env=embed_server.env()).json()["results"][0]
    assert "semantic" in hit["lanes"] and hit["similarity"] > 0
    assert_store_verifies(store)


def test_a_429_then_success_stores_the_vector(cli, embed_server):
    embed_server.fail_next = [429]
    run = cli("write", "fact", "rate limited once", "--json", env=embed_server.env())
    assert run.code == 0, run
    assert run.json()["embedding"] == "stored"
    assert len(embed_server.requests) == 2
    assert run.err == ""


def test_server_errors_are_retried_with_backoff(cli, embed_server):
    embed_server.fail_next = [500, 503]
    run = cli("write", "fact", "flaky server", "--json", env=embed_server.env())
    assert run.code == 0 and run.json()["embedding"] == "stored", run
    assert len(embed_server.requests) == 3


def test_an_api_key_is_sent_from_the_named_variable_and_never_printed(cli, embed_server):
    env = embed_server.env(CORTEXCTL_EMBED_API_KEY="s3cret-key")
    assert cli("write", "fact", "keyed", env=env).code == 0
    assert embed_server.requests[-1]["auth"] == "Bearer s3cret-key"
    shown = cli("config", "show", "--json", env=env)
    assert "s3cret-key" not in shown.out + shown.err


def test_a_dead_endpoint_never_fails_a_write_and_find_answers_from_the_other_lanes(cli, embed_server, store):
    dead = {"CORTEXCTL_EMBED_BASE_URL": dead_url(), "CORTEXCTL_EMBED_MODEL": "test-embed"}
    run = cli("write", "fact", "The staging database password rotates weekly", "--json", env=dead)
    assert run.code == 0, run
    assert run.json()["embedding"] == "pending"
    assert "embedding pending" in run.err and "unreachable" in run.err
    found = cli("find", "--near", "staging database password", "--json", env=dead)
    assert found.code == 0, found
    doc = found.json()
    assert doc["results"][0]["uri"] == run.json()["uri"]
    assert "semantic" not in doc["results"][0]["lanes"] and "lexical" in doc["results"][0]["lanes"]
    assert any("semantic lane skipped" in w for w in doc["warnings"])
    # reindex against the dead endpoint fails clearly; against a live one it embeds what waited
    assert_clean_error(cli("reindex", env=dead), 9)
    done = cli("reindex", "--json", env=embed_server.env())
    assert done.code == 0, done
    assert done.json()["embedded"] == 1
    hit = cli("find", "--near", "staging database password", "--json", env=embed_server.env()).json()["results"][0]
    assert "semantic" in hit["lanes"]
    assert_store_verifies(store)


def test_an_import_against_a_dead_endpoint_is_imported_pending(cli, embed_server):
    dead = {"CORTEXCTL_EMBED_BASE_URL": dead_url(), "CORTEXCTL_EMBED_MODEL": "test-embed"}
    run = cli("import", "-", "--json", input=_lines(5), env=dead)
    assert run.code == 0, run
    assert run.json()["imported"] == 5 and run.json()["pending_embeddings"] == 5
    assert cli("reindex", "--json", env=embed_server.env()).json()["embedded"] == 5


def test_a_wrong_dimension_is_a_clear_error(cli, embed_server):
    env = embed_server.env(CORTEXCTL_EMBED_DIMENSIONS=8)  # the server makes 16
    run = cli("write", "fact", "dimension check", "--json", env=env)
    assert run.code == 0 and run.json()["embedding"] == "pending", run
    assert "16-dimensional" in run.err and "dimensions is 8" in run.err
    bad = cli("reindex", env=env)
    assert_clean_error(bad, 2)
    assert "16-dimensional" in bad.err


def test_a_model_that_changes_dimension_is_refused(cli, embed_server):
    assert cli("write", "fact", "first", env=embed_server.env()).code == 0
    embed_server.dims["test-embed"] = 24
    run = cli("write", "fact", "second", "--json", env=embed_server.env())
    assert run.code == 0 and run.json()["embedding"] == "pending", run
    assert "24" in run.err


def test_switching_models_re_embeds_everything(cli, embed_server, store):
    for text in ("alpha deploy", "beta rollback", "gamma incident"):
        assert cli("write", "fact", text, env=embed_server.env("model-a")).code == 0
    before = len(embed_server.requests)
    out = cli("reindex", "--json", env=embed_server.env("model-b"))
    assert out.code == 0, out
    doc = out.json()
    assert doc["model"] == "openai:model-b" and doc["embedded"] == 3 and doc["dropped"] == 3
    assert {r["body"]["model"] for r in embed_server.requests[before:]} == {"model-b"}
    hit = cli("find", "--near", "beta rollback", "--json", env=embed_server.env("model-b")).json()["results"][0]
    assert "semantic" in hit["lanes"] and hit["text"] == "beta rollback"
    # and back to the built-in hash embedder
    back = cli("reindex", "--json").json()
    assert back["model"].startswith("hash-v1/") and back["embedded"] == 3 and back["dropped"] == 3
    assert_store_verifies(store)


def test_an_update_re_embeds_the_new_text(cli, embed_server):
    uri = cli("write", "fact", "old words here", env=embed_server.env()).out.strip()
    assert cli("update", uri, "completely different sentence", env=embed_server.env()).code == 0
    assert cli("reindex", "--json", env=embed_server.env()).json()["embedded"] == 0
    hit = cli("find", "--near", "completely different sentence", "--json",
              env=embed_server.env()).json()["results"][0]
    assert hit["uri"] == uri and "semantic" in hit["lanes"]


@pytest.mark.parametrize("value, message", [
    ("ftp://x", "base_url"),
    ("http://", None),
])
def test_a_bad_base_url_is_a_config_error(cli, value, message):
    run = cli("find", "--near", "x", env={"CORTEXCTL_EMBED_BASE_URL": value, "CORTEXCTL_EMBED_MODEL": "m"})
    if message:
        assert_clean_error(run, 2)
        assert message in run.err
    else:
        assert run.code in (0, 2), run
        assert "Traceback" not in run.err


def test_a_base_url_without_a_model_is_a_config_error(cli, embed_server):
    run = cli("write", "fact", "x", env={"CORTEXCTL_EMBED_BASE_URL": embed_server.url})
    assert_clean_error(run, 2)
    assert "embedding -> model" in run.err


def test_an_endpoint_that_changes_dimension_under_the_same_model(cli, embed_server, store):
    uri = cli("write", "fact", "first words", env=embed_server.env()).out.strip()
    assert cli("write", "fact", "other words", env=embed_server.env()).code == 0
    embed_server.dims["test-embed"] = 24
    found = cli("find", "--near", "first words", "--json", env=embed_server.env())
    assert found.code == 0, found
    assert any("24 dimensions" in w and "16" in w for w in found.json()["warnings"])
    upd = cli("update", uri, "second words", "--json", env=embed_server.env())
    assert upd.code == 0 and upd.json()["embedding"] == "pending", upd
    done = cli("reindex", "--json", env=embed_server.env())
    assert done.code == 0, done
    assert done.json()["embedded"] == 2 and done.json()["dropped"] == 1  # the 16-dimensional one is replaced
    hit = cli("find", "--near", "second words", "--json", env=embed_server.env()).json()["results"][0]
    assert "semantic" in hit["lanes"]
    assert_store_verifies(store)
