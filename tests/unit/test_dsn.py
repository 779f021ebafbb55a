"""cortexctl.dsn: telling a PostgreSQL URI from a path, hiding its password, reading its parts."""

from __future__ import annotations

import pytest

from cortexctl import dsn

NO_ENV: dict[str, str] = {}


@pytest.mark.parametrize("text", ["postgresql://h/db", "postgres://h/db", "POSTGRESQL://h/db", "postgresql://"])
def test_uris_are_postgres(text):
    assert dsn.is_postgres(text)


@pytest.mark.parametrize("text", ["/var/lib/cortex", "~/store", "postgresql:/x", "host=db dbname=m", "", None,
                                  "./postgresql://x", "mysql://h/db"])
def test_paths_and_other_text_are_not(text):
    assert not dsn.is_postgres(text)


def test_the_keyword_form_is_recognised_to_be_refused():
    assert dsn.is_keyword_form("host=db dbname=memory")
    assert dsn.is_keyword_form("dbname = memory")
    assert not dsn.is_keyword_form("/srv/host=db")
    assert not dsn.is_keyword_form("postgresql://h/db?host=/tmp")


@pytest.mark.parametrize("given, shown", [
    ("postgresql://bob:s3cr3t@db.example:6543/mem?sslmode=require",
     "postgresql://bob:***@db.example:6543/mem?sslmode=require"),
    ("postgres://bob@h/db", "postgres://bob@h/db"),
    ("postgresql://h/db", "postgresql://h/db"),
    ("postgresql://:s3cr3t@h/db", "postgresql://:***@h/db"),
    ("postgresql://bob:@h/db", "postgresql://bob:***@h/db"),
    ("postgresql:///mem?host=/tmp/x&password=s3cr3t", "postgresql:///mem?host=/tmp/x&***"),
    ("postgresql://h/db?PassWord=s3cr3t&sslmode=verify-full", "postgresql://h/db?***&sslmode=verify-full"),
    ("postgresql://bob:s3%40cr3t@h/db", "postgresql://bob:***@h/db"),
    # unencoded characters that libpq would misread still never show
    ("postgresql://bob:s3@cr/3#t@h:5/db", "postgresql://bob:***@h:5/db"),
    ("postgresql://bob:s3?cr3t@h/db?sslmode=require", "postgresql://bob:***@h/db?sslmode=require"),
    ("postgresql://bob:s3cr3t@h/db?application_name=a@b", "postgresql://bob:***@h/db?application_name=a@b"),
])
def test_redact_hides_the_password_and_keeps_the_rest(given, shown):
    want = shown.replace("&***", "&password=***").replace("?***", "?PassWord=***")
    assert dsn.redact(given) == want
    assert "s3cr3t" not in dsn.redact(given) and "cr3t" not in dsn.redact(given)


def test_redact_leaves_a_path_alone():
    assert dsn.redact("/home/bob/store") == "/home/bob/store"


def test_parts_of_a_full_uri():
    assert dsn.parts("postgresql://bob:s3cr3t@db.example:6543/mem", NO_ENV) == {
        "host": "db.example", "port": 6543, "database": "mem", "user": "bob"}


def test_parts_defaults_port_5432_and_database_the_user():
    assert dsn.parts("postgres://alice@db", NO_ENV) == {"host": "db", "port": 5432, "database": "alice",
                                                         "user": "alice"}


def test_parts_reads_a_socket_directory_and_query_parameters():
    got = dsn.parts("postgresql:///mem?host=/tmp/pg%20sock&port=5433&user=carol", NO_ENV)
    assert got == {"host": "/tmp/pg sock", "port": 5433, "database": "mem", "user": "carol"}


def test_parts_of_ipv6_and_several_hosts():
    assert dsn.parts("postgresql://u@[::1]:5444/x", NO_ENV)["host"] == "::1"
    assert dsn.parts("postgresql://u@[::1]:5444/x", NO_ENV)["port"] == 5444
    got = dsn.parts("postgresql://u@h1:6000,h2:6001/d", NO_ENV)
    assert got["host"] == "h1,h2" and got["port"] == 6000


def test_parts_takes_what_the_uri_leaves_out_from_the_libpq_environment():
    env = {"PGHOST": "envhost", "PGPORT": "7000", "PGUSER": "eve", "PGDATABASE": "envdb"}
    assert dsn.parts("postgresql://", env) == {"host": "envhost", "port": 7000, "database": "envdb", "user": "eve"}
    assert dsn.parts("postgresql://u@h:1/d", env) == {"host": "h", "port": 1, "database": "d", "user": "u"}


def test_parts_without_a_host_is_libpqs_local_socket():
    assert dsn.parts("postgresql:///mem", NO_ENV)["host"] is None


@pytest.mark.parametrize("bad", ["postgresql://h:notaport/db", "postgresql://h:0/db", "postgresql://h:70000/db",
                                 "postgresql://h/db?port=x"])
def test_parts_refuses_a_bad_port(bad):
    with pytest.raises(ValueError, match="port"):
        dsn.parts(bad, NO_ENV)


def test_parts_never_holds_the_password():
    got = dsn.parts("postgresql://bob:s3cr3t@h/db?password=other", NO_ENV)
    assert "s3cr3t" not in repr(got) and "other" not in repr(got)


@pytest.mark.parametrize("given, shown", [
    ("http://user:pw-SECRET@host:8080/v1", "http://user:***@host:8080/v1"),
    ("https://TOKEN-SECRET@api.example/v1", "https://***@api.example/v1"),
    ("https://api.example/v1?api_key=SECRET&model=m", "https://api.example/v1?api_key=***&model=m"),
    ("http://h/v1?access_token=SECRET&X-Amz-Signature=SECRET&client_secret=SECRET&q=1",
     "http://h/v1?access_token=***&X-Amz-Signature=***&client_secret=***&q=1"),
    ("http://127.0.0.1:11434/v1", "http://127.0.0.1:11434/v1"),
    ("http://u:pw-SECRET@[::1", "http://u:***@[::1"),
])
def test_redact_hides_the_credentials_of_any_url(given, shown):
    assert dsn.redact(given) == shown
    assert "SECRET" not in dsn.redact(given)


def test_redact_text_hides_every_url_in_a_message():
    text = "endpoint http://a:SECRET@h/x unreachable; also 'https://h/?token=SECRET' and postgresql://b:SECRET@d/m"
    assert dsn.redact_text(text) == ("endpoint http://a:***@h/x unreachable; also 'https://h/?token=***' and "
                                     "postgresql://b:***@d/m")
    assert dsn.redact_text("no url here: a:b@c") == "no url here: a:b@c"
