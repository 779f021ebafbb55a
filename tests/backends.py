"""The CLI on both backends: fixtures for a test module that runs its cases on a DuckDB directory and on
a PostgreSQL schema (a real server: tests/pg.py). Import ``location`` and ``run`` into the module."""

from __future__ import annotations

import pytest

from tests.conftest import run_in_process

BACKENDS = ["duckdb", "postgres"]


@pytest.fixture(params=BACKENDS)
def location(request, tmp_path) -> str:
    """The store: a directory in tmp_path, or a ``postgresql://`` URI of a new schema."""
    if request.param == "duckdb":
        return str(tmp_path / "store")
    from tests.pg import store_uri

    return store_uri("cli")


@pytest.fixture
def run(location):
    """cortexctl in this process against ``location``: run("write", "fact", "x")."""
    def go(*args, input=None, env=None):
        return run_in_process(location, *args, input=input, env=env)

    return go


def ok(r):
    """``r``, a run that must have exited 0."""
    assert r.code == 0, r
    return r
