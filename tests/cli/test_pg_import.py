"""import into PostgreSQL: the same file gives the same store as on DuckDB, and bad input writes nothing.

The PostgreSQL backend loads an import by binary COPY (postings laid out by numpy) and, for a large
one, drops the model's HNSW index while the batches go in and builds it once at the end
(``store/pg/vectors.py``'s ``BulkLoader``). These cases hold that path to the DuckDB backend's
answers: the same export, verify green, the same find results and scores.
"""

from __future__ import annotations

import orjson
import pytest

from tests.conftest import cli_state, run_in_process

WORDS = ("deploy key rotation bastion latency budget payments friday smoke tests staging database "
         "coverage incident retry flaky pipeline cache warm cold replica shard").split()


def _lines(n: int) -> list[bytes]:
    """n varied import lines: tags, frames, sessions, owners, visibilities, words repeated in a text."""
    out = []
    for i in range(n):
        words = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(3 + i % 5)]
        line = {"type": ("fact", "event", "belief", "preference")[i % 4],
                "text": f"memory {i}: {' '.join(words)} {words[0]} {words[0]}" if i % 3 == 0 else
                        f"memory {i} about {' '.join(words)}",
                "tags": [f"t{i % 5}"] + (["ops"] if i % 2 else []),
                "importance": 1 + i % 10, "actor": f"agent{i % 3}",
                "visibility": ("private", "public", "scoped")[i % 3],
                "created_at": f"2026-0{1 + i % 9}-1{i % 10}T0{i % 10}:00:00Z"}
        if i % 4 == 0:
            line["frames"] = [f"modify:file:/srv/app/{i % 11}.py"]
        if i % 6 == 0:
            line["session"] = f"s-{i % 13}"
        out.append(orjson.dumps(line))
    return out


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> bytes:
    """An export of 1,200 varied memories (IDs, hashes, a forgotten one, counters): what both backends import."""
    where = tmp_path_factory.mktemp("source")
    src = where / "lines.jsonl"
    src.write_bytes(b"\n".join(_lines(1200)) + b"\n")
    store = where / "store"
    r = run_in_process(store, "import", str(src), "--keep-actors", "--json", env={"CORTEXCTL_ACTOR": "agent0"})
    assert r.code == 0 and r.json()["imported"] == 1200, r
    run = lambda *a: run_in_process(store, *a, env={"CORTEXCTL_ACTOR": "agent0"})  # noqa: E731
    found = run("find", "--near", "deploy key", "--json", "-k", "2").json()["results"]
    assert run("attest", "--intent", "rel-1", "--outcome", "success", found[0]["uri"]).code == 0  # counters travel
    assert run("forget", found[1]["uri"], "--reason", "stale").code == 0  # and tombstones
    out = run("export")
    assert out.code == 0, out
    return out.out.encode()


def _import(location: str, dump, batch: int):
    return run_in_process(location, "import", str(dump), "--keep-actors", "--batch-size", str(batch), "--json",
                          env={"CORTEXCTL_ACTOR": "agent0"})


def test_an_import_into_postgresql_equals_the_same_import_into_duckdb(tmp_path, exported):
    from tests.pg import store_uri

    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(exported)
    count = len(exported.splitlines())
    stores = {"duckdb": str(tmp_path / "duck"), "postgres": store_uri("import")}
    for name, location in stores.items():
        r = _import(location, dump, 250)  # several batches, each one COPY per table, the index dropped and rebuilt
        assert r.code == 0, (name, r)
        assert (r.json()["imported"], r.json()["batches"], r.json()["first_seq"], r.json()["last_seq"]) == (
            count, -(-count // 250), 1, count), (name, r.json())
    run = {name: (lambda *a, actor="agent0", loc=loc: run_in_process(loc, *a, env={"CORTEXCTL_ACTOR": actor}))
           for name, loc in stores.items()}
    for actor in ("agent0", "agent1"):
        assert run["postgres"]("export", actor=actor).out == run["duckdb"]("export", actor=actor).out
    assert run["postgres"]("export").out.encode() == exported
    for name in stores:
        report = run[name]("verify", "--json")
        assert report.code == 0 and report.json()["ok"], (name, report)
        health = run[name]("healthcheck", "--json").json()
        assert health["index"]["consistent"], (name, health["index"])
    for query in (("find", "--near", "deploy key rotation", "--json", "-k", "20"),  # every lane, repeated words among them
                  ("find", "--near", "flaky retry in the pipeline", "--json", "-k", "20"),
                  ("find", "--tag", "ops", "--type", "event", "--json", "-k", "50"),
                  ("find", "--near", "smoke tests", "--json", "-k", "20", "--actor", "agent2")):
        actor = query[-1] if query[-2] == "--actor" else "agent0"
        got = {name: [(x["id"], x["score"]) for x in run[name](*query, actor=actor).json()["results"]]
               for name in stores}
        assert [i for i, _ in got["postgres"]] == [i for i, _ in got["duckdb"]] and got["duckdb"], (query, got)
        # the same scores but for the salience lane's recency, which the clock moves between the two finds
        # (the time between them can round the sixth decimal either way), and the semantic lane's
        # similarity: DuckDB holds a vector as float16, PostgreSQL as float32 (``Storage.vector_dtype``),
        # and rounding a unit vector moves its similarity to a unit query by at most 2^-11
        assert all(abs(a - b) <= 2e-6 + 2 ** -11 for (_, a), (_, b) in zip(got["postgres"], got["duckdb"])), (query, got)


def test_an_import_into_postgresql_keeps_its_order_of_postings_after_later_writes(tmp_path, exported):
    """Memories written after an import get doc numbers above the imported ones, and find ranks both."""
    from tests.pg import store_uri

    dump = tmp_path / "dump.jsonl"
    dump.write_bytes(exported)
    uri = store_uri("import-then-write")
    assert _import(uri, dump, 500).code == 0
    run = lambda *a: run_in_process(uri, *a, env={"CORTEXCTL_ACTOR": "agent0"})  # noqa: E731
    key = run("write", "fact", "bastion bastion bastion replica shard").out.strip()
    top = run("find", "--near", "bastion replica shard", "--json", "-k", "3").json()["results"]
    assert top[0]["uri"] == key, top
    assert run("verify", "--json").json()["ok"]


@pytest.mark.parametrize("backend_store", ["duckdb", "postgres"], indirect=True)
def test_an_import_with_a_bad_line_or_a_taken_id_writes_nothing_on_either_backend(tmp_path, backend_cli,
                                                                                  exported):
    run = backend_cli
    lines = exported.splitlines()
    assert run("import", "-", "--keep-actors", input=lines[0] + b"\n").code == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\n".join(lines[1:40] + [b'{"type": "fact"}'] + lines[40:60]) + b"\n")
    _refused(run, bad, "line 40: fact.statement: is required", "1 of 60 lines invalid")
    taken = tmp_path / "taken.jsonl"
    taken.write_bytes(b"\n".join(lines[1:30] + [lines[0]]) + b"\n")
    _refused(run, taken, "line 30: memory ", "already exists in the store")


def _refused(run, path, problem: str, summary: str) -> None:
    """``import path`` is refused: a line for the problem, one saying nothing was imported, exit 10,
    nothing printed on stdout and the store as it was."""
    before = cli_state(run)
    r = run("import", str(path), "--keep-actors")
    assert r.code == 10 and r.out == "", r
    lines = r.err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"cortexctl: {problem}") and summary in r.err, r
    assert "nothing was imported" in lines[1], r
    assert cli_state(run) == before


@pytest.mark.slow
def test_an_import_into_postgresql_killed_mid_way_leaves_whole_batches_and_verifies(tmp_path):
    """SIGKILL ``cortexctl import`` into PostgreSQL once a batch of the run is in, or at a random moment:
    only whole batches are stored, verify is green, and the import run again finishes the file."""
    import os
    import random
    import subprocess
    import time

    from tests import tamper
    from tests.conftest import cortexctl_argv
    from tests.pg import store_uri
    from tests.reliability.test_kills import _kill, _lines

    total, batch = 6000, 500
    uri = store_uri("killed-import")
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(_lines(total, "more"))
    made = tmp_path / "made"  # lines with IDs, so that the import run again skips what is in
    assert run_in_process(made, "import", str(plain), env={"CORTEXCTL_ACTOR": "alice"}).code == 0
    src = tmp_path / "m.jsonl"
    src.write_text(run_in_process(made, "export", env={"CORTEXCTL_ACTOR": "alice"}).out)
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORTEXCTL_")}
    env.update(CORTEXCTL_STORE=uri, CORTEXCTL_ACTOR="alice", TMPDIR=str(tmp_path))
    argv = cortexctl_argv() + ["import", str(src), "--batch-size", str(batch), "--skip-existing", "-q"]
    rng = random.Random(21)

    def heads() -> int:
        return tamper.rows(uri, "SELECT count(*) FROM heads")[0][0] if tamper.rows(
            uri, "SELECT to_regclass('heads') IS NOT NULL")[0][0] else 0

    landed = 0
    for attempt in range(12):
        before = heads()
        checked = [time.monotonic()]

        def a_batch_is_in() -> bool:  # asked every 2 ms: the store is read every 50 ms
            if time.monotonic() - checked[0] < 0.05:
                return False
            checked[0] = time.monotonic()
            return heads() > before

        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        landed += _kill(proc, until=a_batch_is_in if attempt % 2 == 0 else None, delay=rng.uniform(0.5, 8.0),
                        what="import")
        now = heads()
        assert (now - before) % batch == 0, f"a partial batch: {now - before} memories"
        report = run_in_process(uri, "verify", "--json", env={"CORTEXCTL_ACTOR": "alice"})
        if now == 0 and report.code == 3:  # killed before the store was made: nothing to verify
            continue
        assert report.code == 0 and report.json()["ok"], report
        if landed >= 3 or now == total:
            break
    assert landed >= 1, "no kill landed while the import ran"
    done = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert heads() == total
    assert run_in_process(uri, "verify", "--json", env={"CORTEXCTL_ACTOR": "alice"}).json()["ok"]
