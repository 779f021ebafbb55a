"""PostgreSQL connection URIs: telling one from a path, hiding its password, reading its parts;
and hiding the credentials of any URL cortexctl prints (``redact``, ``redact_text``).

Only the URI form is understood (``postgresql://`` or ``postgres://``, as libpq reads it):
``postgresql://USER:PASSWORD@HOST:PORT/DATABASE?PARAM=VALUE&...``. libpq's other form,
``key=value`` words (``host=db dbname=memory``), is not a store location here. Nothing in
this module connects to anything; it imports only the standard library.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote

SCHEMES = ("postgresql://", "postgres://")
DEFAULT_PORT = 5432
MASK = "***"

# libpq's key=value form starts with a connection keyword and "=" (host=..., dbname=...)
_KEYWORDS = re.compile(r"^\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|options|"
                       r"application_name|connect_timeout|target_session_attrs)\s*=", re.IGNORECASE)


def is_postgres(text: object) -> bool:
    """``text`` is a PostgreSQL connection URI (``postgresql://`` or ``postgres://``)."""
    return isinstance(text, str) and text[:13].lower().startswith(SCHEMES)


def is_keyword_form(text: object) -> bool:
    """``text`` looks like libpq's ``key=value`` connection string (``host=db dbname=x``),
    which cortexctl does not accept: a URI is asked for instead."""
    return isinstance(text, str) and bool(_KEYWORDS.match(text))


def _split(dsn: str) -> tuple[str, str | None, str, str | None, str]:
    """(scheme with "://", userinfo or None without an ``@``, hosts and path, query or None,
    fragment). The userinfo ends at the last ``@`` before the query, so an unencoded ``@``,
    ``/`` or ``#`` in a password stays in it; an unencoded ``?`` too, when no ``=`` comes
    before that ``@`` (a ``?`` followed by ``=`` is the query)."""
    cut = dsn.index("://") + 3
    scheme, rest = dsn[:cut], dsn[cut:]
    head, sep, query = rest.partition("?")
    at = head.rfind("@")
    if at < 0 and "@" in rest:
        # an "@" after a "?": in the query (a value), or a password holding an unencoded "?"
        ats = [i for i, c in enumerate(rest) if c == "@" and "=" not in rest[:i]]
        if ats:
            at = ats[-1]
            head, sep, query = rest[at + 1:].partition("?")
            head = rest[:at + 1] + head
    userinfo = None
    if at >= 0:
        userinfo, head = head[:at], head[at + 1:]
    fragment = ""
    if "#" in query:
        query, fragment = query.split("#", 1)
    return scheme, userinfo, head, (query if sep else None), fragment


# Query parameters whose value is a credential, by a word in their name (password, api_key,
# access_token, client_secret, sig, X-Amz-Credential, ...).
_SECRET_PARAM = re.compile(r"pass|pwd|secret|token|key|auth|sig|credential|session", re.IGNORECASE)
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*")


def redact(dsn: str) -> str:
    """The URL with its credentials replaced by ``***``: the password in the userinfo (the user
    name is kept; an http(s) userinfo without a password is a token, all of it hidden) and the
    value of every query parameter named like a credential (``password``, ``api_key``,
    ``token``, ...); everything else kept. Text that is not a URL is returned as it is."""
    if not isinstance(dsn, str) or not _URL.match(dsn):
        return dsn
    scheme, userinfo, head, query, fragment = _split(dsn)
    out = scheme
    if userinfo is not None:
        user, colon, _ = userinfo.partition(":")
        if colon:
            out += f"{user}:{MASK}@"
        else:
            out += f"{user}@" if is_postgres(dsn) else f"{MASK}@"
    out += head
    if query is not None:
        params = []
        for item in query.split("&"):
            key, eq, _ = item.partition("=")
            params.append(f"{key}={MASK}" if eq and _SECRET_PARAM.search(unquote(key)) else item)
        out += "?" + "&".join(params)
    if fragment:
        out += "#" + fragment
    return out


def redact_text(text: str) -> str:
    """``text`` with every URL in it passed through ``redact`` (for a message that quotes one)."""
    if not isinstance(text, str) or "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)


def parts(dsn: str, env: dict[str, str] | None = None) -> dict:
    """Where the URI points: {host, port, database, user}, as libpq resolves them. A host given
    as ``?host=/run/postgresql`` (a socket directory) is that directory; several hosts are
    joined by ``,``. What the URI leaves out comes from ``PGHOST``, ``PGPORT``, ``PGUSER``,
    ``PGDATABASE`` in ``env`` (the process environment by default), else: host None (libpq's
    local socket), port 5432, user the OS user, database the user's name. ValueError for a
    port that is not a number from 1 to 65535. Never the password."""
    env = os.environ if env is None else env
    if not is_postgres(dsn):
        raise ValueError("not a postgresql:// URI")
    _, userinfo, head, query, _ = _split(dsn)
    hostspec, _, path = head.partition("/")
    user = unquote(userinfo.partition(":")[0]) if userinfo else None
    hosts, ports = [], []
    for item in hostspec.split(",") if hostspec else []:
        if item.startswith("["):  # [IPv6]:port
            host, _, tail = item[1:].partition("]")
            port = tail[1:] if tail.startswith(":") else ""
        else:
            host, _, port = item.partition(":")
        hosts.append(unquote(host))
        ports.append(port)
    database = unquote(path) or None
    params: dict[str, str] = {}
    for item in (query or "").split("&"):
        key, eq, value = item.partition("=")
        if eq:
            params[unquote(key).strip().lower()] = unquote(value)
    host = params.get("host") or ",".join(h for h in hosts if h) or env.get("PGHOST") or None
    port_text = params.get("port") or next((p for p in ports if p), "") or env.get("PGPORT") or str(DEFAULT_PORT)
    port_text = port_text.split(",")[0]
    if not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise ValueError(f"port {port_text!r} is not a number from 1 to 65535")
    user = params.get("user") or user or env.get("PGUSER") or _os_user()
    database = params.get("dbname") or database or env.get("PGDATABASE") or user
    return {"host": host, "port": int(port_text), "database": database, "user": user}


def _os_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except Exception:
        return "unknown"


def hide_credentials(err) -> None:
    """Redact every URL in a ``CortexError``'s message, hint and problems, in place (an error
    quoting an endpoint or a store URI), before any front end shows it."""
    err.message = redact_text(err.message)
    if err.hint:
        err.hint = redact_text(err.hint)
    if getattr(err, "problems", None):
        err.problems = [redact_text(p) if isinstance(p, str) else p for p in err.problems]
    err.args = (err.message, *err.args[1:])


__all__ = ["is_postgres", "is_keyword_form", "redact", "redact_text", "hide_credentials", "parts", "DEFAULT_PORT", "MASK"]
