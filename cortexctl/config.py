"""Settings: defaults, a config file, the environment, flags — in that order of precedence.

Every environment variable cortexctl reads is named here, once. The config
file is TOML (``.toml``) or JSON (any other name), deep-merged over the
defaults: ``-c/--config PATH``, else ``$CORTEXCTL_CONFIG``, else
``config.toml`` in the user config dir (platformdirs). Secrets (API keys) are
read only from the environment variables the config names, never stored here,
never printed.

The store is a directory (the DuckDB backend) or a PostgreSQL database named by a
``postgresql://`` URI (``resolve_store`` says which, and ``dsn.redact`` hides a URI's
password wherever one is shown).
"""

from __future__ import annotations

import copy
import getpass
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cortexctl.dsn as dsn
from cortexctl.errors import ConfigError, check_nesting, too_deep

APP = "cortexctl"

ENV_STORE = "CORTEXCTL_STORE"
ENV_STORE_DSN = "CORTEXCTL_STORE_DSN"
ENV_ACTOR = "CORTEXCTL_ACTOR"
ENV_WAIT = "CORTEXCTL_WAIT"
ENV_CONFIG = "CORTEXCTL_CONFIG"
ENV_ALLOW_DESTRUCTIVE = "CORTEXCTL_ALLOW_DESTRUCTIVE"
ENV_EMBED_BASE_URL = "CORTEXCTL_EMBED_BASE_URL"
ENV_EMBED_MODEL = "CORTEXCTL_EMBED_MODEL"
ENV_EMBED_DIMENSIONS = "CORTEXCTL_EMBED_DIMENSIONS"
ENV_EMBED_PROVIDER = "CORTEXCTL_EMBED_PROVIDER"
ENV_CHAT_BASE_URL = "CORTEXCTL_CHAT_BASE_URL"
ENV_CHAT_MODEL = "CORTEXCTL_CHAT_MODEL"
ENV_VERIFY_JOBS = "CORTEXCTL_VERIFY_JOBS"

# key path -> environment variable
ENV_NAMES: dict[str, str] = {
    "store": ENV_STORE,
    "store.dsn": ENV_STORE_DSN,
    "actor": ENV_ACTOR,
    "wait": ENV_WAIT,
    "embedding.base_url": ENV_EMBED_BASE_URL,
    "embedding.model": ENV_EMBED_MODEL,
    "embedding.dimensions": ENV_EMBED_DIMENSIONS,
    "embedding.provider": ENV_EMBED_PROVIDER,
    "chat.base_url": ENV_CHAT_BASE_URL,
    "chat.model": ENV_CHAT_MODEL,
    "verify.jobs": ENV_VERIFY_JOBS,
}

DEFAULTS: dict[str, Any] = {
    "store": None,  # a path or a postgresql:// URI; a path resolved to the user data dir when unset
    # [store] in a config file may be a table: path (the "store" above), backend and dsn
    "store.backend": "auto",  # auto: a URI in store or a dsn means postgres, else duckdb
    "store.dsn": None,  # the PostgreSQL database's postgresql:// URI (backend postgres, or auto)
    "actor": None,  # resolved to the OS user name
    "wait": 5.0,
    "embedding": {
        "provider": "auto",  # auto: the endpoint when base_url is set, else hash; local: the model extra
        "base_url": None,
        "model": None,
        "api_key_env": "CORTEXCTL_EMBED_API_KEY",
        "timeout": 30.0,
        "dimensions": None,
        "batch_size": 64,
    },
    "chat": {
        "base_url": None,
        "model": None,
        "api_key_env": "CORTEXCTL_CHAT_API_KEY",
        "timeout": 60.0,
    },
    "backup": {
        "dest": None,  # resolved to "backups" beside the store directory
        "keep": 3,
        "max_age_days": 7.0,
        "key_env": "CORTEXCTL_BACKUP_KEY",
        "window_days": None,  # healthcheck: degraded when no bundle is newer than this (off when unset)
    },
    "pager": {
        "pinned_budget_tokens": 2000,
        "context_budget_tokens": 6000,
        "retrieval_top_k": 8,
        "min_pattern_successes": 3,
        "rules": None,  # None: the built-in inviolable rules (engine/pager.py, README)
    },
    "verify": {
        "jobs": 0,  # worker processes for verify (and restore, merge, drill); 0: one per CPU
    },
    "mcp": {
        "token_env": "CORTEXCTL_MCP_TOKEN",  # cortexctl mcp --transport http: the bearer token's variable
    },
}

STORE_BACKENDS = ("auto", "duckdb", "postgres")
_OTHER_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")  # a URL that is no postgresql:// URI is no store

# key path -> (python type(s), rule text)
_RULES: dict[str, tuple[tuple[type, ...], str]] = {
    "store": ((str,), "must be a path or a postgresql:// URI"),
    "store.backend": ((str,), "must be one of auto, duckdb, postgres"),
    "store.dsn": ((str,), "must be a postgresql:// URI"),
    "actor": ((str,), "must be a name of 1-256 printable characters"),
    "wait": ((int, float), "must be a number of seconds, 0 or more"),
    "embedding.base_url": ((str,), "must be an http(s) URL"),
    "embedding.model": ((str,), "must be a model name"),
    "embedding.api_key_env": ((str,), "must be an environment variable name"),
    "embedding.timeout": ((int, float), "must be a number of seconds above 0"),
    "embedding.dimensions": ((int,), "must be a whole number above 0"),
    "embedding.provider": ((str,), "must be one of auto, hash, openai, local"),
    "embedding.batch_size": ((int,), "must be a whole number from 1 to 2048"),
    "chat.base_url": ((str,), "must be an http(s) URL"),
    "chat.model": ((str,), "must be a model name"),
    "chat.api_key_env": ((str,), "must be an environment variable name"),
    "chat.timeout": ((int, float), "must be a number of seconds above 0"),
    "backup.dest": ((str,), "must be a path"),
    "backup.keep": ((int,), "must be a whole number, 1 or more"),
    "backup.max_age_days": ((int, float), "must be a number of days, 0 or more"),
    "backup.key_env": ((str,), "must be an environment variable name"),
    "backup.window_days": ((int, float), "must be a number of days above 0"),
    "pager.pinned_budget_tokens": ((int,), "must be a whole number from 1 to 1000000"),
    "pager.context_budget_tokens": ((int,), "must be a whole number from 1 to 1000000"),
    "pager.retrieval_top_k": ((int,), "must be a whole number from 1 to 1000"),
    "pager.min_pattern_successes": ((int,), "must be a whole number from 1 to 1000000"),
    "pager.rules": ((list,), "must be a list of 1 to 50 non-empty texts"),
    "verify.jobs": ((int,), "must be a whole number from 0 (one per CPU) to 256"),
    "mcp.token_env": ((str,), "must be an environment variable name"),
}


def user_config_path() -> Path:
    from platformdirs import user_config_dir

    return Path(user_config_dir(APP)) / "config.toml"


def default_store_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir(APP)) / "store"


def _flatten(tree: dict, prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in tree.items():
        path = f"{prefix}{k}"
        if isinstance(v, dict) and path in ("embedding", "chat", "backup", "pager", "verify", "mcp", "store"):
            out.update(_flatten(v, path + "."))
        else:
            out[path] = v
    if "store.path" in out:  # [store] path = "...": the same setting as store = "..."
        out["store"] = out.pop("store.path")
    return out


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _url_ok(value: str) -> bool:
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(value)
        parts.port  # raises ValueError for a port that is not a number from 0 to 65535
    except ValueError:  # also an unclosed IPv6 bracket
        return False
    return bool(parts.hostname)


def _check(path: str, value: Any, source: str) -> Any:
    if path not in _RULES:
        raise ConfigError(f"{source}: {path.replace('.', ' -> ')}: unknown setting")
    if value is None:
        return None
    types, rule = _RULES[path]
    bad = isinstance(value, bool) or not isinstance(value, types)
    if not bad and path in ("store", "store.dsn"):
        _check_store(path, value, source, rule)
    if not bad and path == "store.backend" and value not in STORE_BACKENDS:
        bad = True
    if not bad and path.endswith("base_url"):
        bad = not value.startswith(("http://", "https://")) or not _url_ok(value)
    if not bad and path in ("wait",) and value < 0:
        bad = True
    if not bad and path.endswith(("timeout", "dimensions")) and value <= 0:
        bad = True
    if not bad and path == "embedding.provider" and value not in ("auto", "hash", "openai", "local"):
        bad = True
    if not bad and path == "embedding.batch_size" and not 1 <= value <= 2048:
        bad = True
    if not bad and path == "embedding.dimensions" and value > 65535:
        bad = True
    if not bad and ((path == "backup.keep" and value < 1) or (path == "backup.max_age_days" and value < 0)
                                    or (path == "backup.window_days" and value <= 0)):
        bad = True
    if not bad and path.startswith("pager.") and isinstance(value, int):
        bad = not 1 <= value <= (1000 if path.endswith("top_k") else 1_000_000)
    if not bad and path == "verify.jobs" and not 0 <= value <= 256:
        bad = True
    if not bad and path == "pager.rules":
        bad = not 1 <= len(value) <= 50 or not all(isinstance(r, str) and r.strip() for r in value)
    if not bad and isinstance(value, str) and (not value.strip() or not _is_utf8(value) or "\x00" in value):
        bad = True
    if not bad and path == "actor" and (len(value) > 256 or not value.isprintable()):
        bad = True
    if not bad and isinstance(value, float) and not math.isfinite(value):
        bad = True
    if bad:
        shown = repr(dsn.redact(value) if isinstance(value, str) else value)
        shown = shown.encode("ascii", "backslashreplace").decode("ascii")
        raise ConfigError(f"{source}: {path.replace('.', ' -> ')}: {rule}, got {shown}")
    return value


def _check_store(path: str, value: str, source: str, rule: str) -> None:
    """A store location or DSN: a URI must be one libpq can read (its password never shown);
    libpq's key=value form is refused with a pointer to the URI form."""
    where = f"{source}: {path.replace('.', ' -> ')}"
    if dsn.is_keyword_form(value):
        raise ConfigError(f"{where}: a key=value connection string is not supported; give a postgresql:// URI "
                          f"(postgresql://USER@HOST:PORT/DATABASE)")
    if dsn.is_postgres(value):
        try:
            dsn.parts(value, env={})
        except ValueError as exc:
            raise ConfigError(f"{where}: {dsn.redact(value)}: {exc}") from None
    elif (path == "store.dsn" and value.strip()) or _OTHER_URL.match(value):
        # not echoed: it may be another kind of URL, with a password
        raise ConfigError(f"{where}: {rule} (postgresql://USER@HOST:PORT/DATABASE)")


MAX_FILE_BYTES = 16 * 1024 * 1024  # a config file is read at most this far


def _read_file(path: Path) -> dict:
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)  # a config file, not /dev/zero
        if len(raw) > MAX_FILE_BYTES:
            raise ConfigError(f"config {path}: larger than {MAX_FILE_BYTES >> 20} MiB")
    except IsADirectoryError:
        raise ConfigError(f"config {path}: is a directory, not a file") from None
    except FileNotFoundError:
        raise ConfigError(f"config {path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"config {path}: cannot be read ({exc.strerror})") from None
    try:
        if path.suffix == ".toml":
            import tomllib

            tree = tomllib.loads(raw.decode("utf-8"))
        else:
            tree = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"config {path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'} ({first})") from None
    except RecursionError:
        raise too_deep(f"config {path}", ConfigError) from None
    check_nesting(tree, f"config {path}", ConfigError)
    if not isinstance(tree, dict):
        raise ConfigError(f"config {path}: must hold a table/object of settings")
    return tree


@dataclass
class Settings:
    """The effective settings and where each value came from."""

    values: dict[str, Any] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    config_file: Path | None = None
    backend: str = "duckdb"  # the store's backend as resolved: "duckdb" or "postgres"
    location: str = ""  # what store.open_storage opens: the directory, or the full DSN (may hold a password)

    def get(self, path: str) -> Any:
        return self.values[path]

    @property
    def store(self) -> Path:
        """The store's directory (the DuckDB backend). ConfigError for a store on PostgreSQL:
        use ``location`` there."""
        if self.backend != "duckdb":
            raise ConfigError(f"the store is a PostgreSQL database ({dsn.redact(self.location)}), not a directory")
        return Path(self.location)

    @property
    def actor(self) -> str:
        return self.values["actor"]

    @property
    def wait(self) -> float:
        return float(self.values["wait"])


def load(
    *,
    config_path: str | os.PathLike | None = None,
    store: str | os.PathLike | None = None,
    actor: str | None = None,
    wait: float | None = None,
    env: dict[str, str] | None = None,
) -> Settings:
    """Resolve the settings: defaults < config file < environment < arguments."""
    env = os.environ if env is None else env
    values = _flatten(copy.deepcopy(DEFAULTS))
    sources = {k: "default" for k in values}

    if config_path is not None:
        if not str(config_path).strip():
            raise ConfigError("-c/--config must not be empty")
        cfg_file: Path | None = Path(config_path).expanduser()
    elif env.get(ENV_CONFIG):
        cfg_file = Path(env[ENV_CONFIG]).expanduser()
    else:
        cfg_file = user_config_path()
        if not cfg_file.exists():
            cfg_file = None
    if cfg_file is not None:
        for path, value in _flatten(_read_file(cfg_file)).items():
            values[path] = _check(path, value, f"config {cfg_file}")
            sources[path] = f"file {cfg_file}"

    for path, name in ENV_NAMES.items():
        raw = env.get(name)
        if raw is None or raw == "":
            continue
        value: Any = raw
        if path == "wait" or path.endswith(("dimensions", "jobs")):
            try:
                value = float(raw) if path == "wait" else int(raw)
            except ValueError:
                _check(path, raw, f"${name}")
        values[path] = _check(path, value, f"${name}")
        sources[path] = f"env {name}"

    for path, value, flag in (("store", store, "--store"), ("actor", actor, "--actor"), ("wait", wait, "--wait")):
        if value is not None:
            values[path] = _check(path, str(value) if path == "store" else value, flag)
            sources[path] = f"flag {flag}"

    backend, location = resolve_store(values, sources)
    if backend == "duckdb" and values["store"] is None:
        values["store"] = location
        sources["store"] = "default (user data dir)"
    if values["actor"] is None:
        try:
            values["actor"] = getpass.getuser()
        except Exception:
            values["actor"] = "unknown"
        sources["actor"] = "default (OS user)"
    return Settings(values=values, sources=sources, config_file=cfg_file, backend=backend, location=location)


def resolve_store(values: dict[str, Any], sources: dict[str, str]) -> tuple[str, str]:
    """The store's backend and location from ``store``, ``store.backend`` and ``store.dsn``:

    1. a ``postgresql://`` URI in ``store`` (flag, environment or file): PostgreSQL at that URI;
    2. else backend ``postgres``, or ``auto`` with ``store.dsn`` set and no path given by
       ``--store`` or ``CORTEXCTL_STORE``: PostgreSQL at ``store.dsn``;
    3. else DuckDB at the ``store`` path (the user data dir's ``store`` when unset).

    ConfigError for backend ``postgres`` with no DSN (or with a path from --store or
    CORTEXCTL_STORE), and for backend ``duckdb`` with a URI in ``store``."""
    store, backend, url = values["store"], values["store.backend"] or "auto", values["store.dsn"]
    if dsn.is_postgres(store):
        if backend == "duckdb":
            raise ConfigError(f"store.backend is duckdb ({sources['store.backend']}) but store is a postgresql:// "
                              f"URI ({sources['store']}): give a path, or set store.backend to postgres or auto")
        return "postgres", store
    path_given = store is not None and sources["store"].startswith(("flag", "env"))
    if backend == "postgres" and path_given:
        raise ConfigError(f"store.backend is postgres ({sources['store.backend']}) but store is a path "
                          f"({sources['store']}): give a postgresql:// URI there, or set store.backend to duckdb")
    if backend == "postgres" or (backend == "auto" and url and not path_given):
        if not url:
            raise ConfigError(f"store.backend is postgres ({sources['store.backend']}) but no store.dsn is set: "
                              f"set store.dsn or ${ENV_STORE_DSN}, or give a postgresql:// URI to --store")
        return "postgres", url
    return "duckdb", str(Path(store).expanduser() if store is not None else default_store_path())
