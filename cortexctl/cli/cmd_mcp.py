"""mcp: serve the store to agents over the Model Context Protocol (SPEC §16)."""

from __future__ import annotations

from cortexctl.cli.spec import ACTOR, STORE, WAIT, Command, Option

DEFAULT_LISTEN = "127.0.0.1:8765"


def parse_listen(value: str, allow_remote: bool) -> tuple[str, int]:
    """HOST:PORT (or [IPV6]:PORT) as (host, port); a host that is not loopback needs --allow-remote."""
    import ipaddress

    from cortexctl.errors import UsageError

    host, sep, port_text = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not (port_text.isascii() and port_text.isdigit()) or not 1 <= int(port_text) <= 65535:
        raise UsageError(f"--listen must be HOST:PORT with a port from 1 to 65535, not {value!r}")
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if not loopback and not allow_remote:
        raise UsageError(f"--listen {value}: {host} is not a loopback address; add --allow-remote to serve "
                         "other machines (the bearer token is then all that guards the store)")
    return host, int(port_text)


def mcp(config, *, transport, listen, allow_remote, store, actor, wait) -> None:
    import os

    from cortexctl import config as config_mod
    from cortexctl.errors import UsageError

    settings = config_mod.load(config_path=config, store=store, actor=actor, wait=wait)
    host, port, token = "127.0.0.1", 0, None
    if transport == "http":
        host, port = parse_listen(listen or DEFAULT_LISTEN, allow_remote)
        env = settings.get("mcp.token_env")
        token = os.environ.get(env) or None
        if token is None or not token.strip():
            raise UsageError(f"cortexctl mcp --transport http needs a bearer token in ${env} (config mcp.token_env)")
    elif listen is not None or allow_remote:
        raise UsageError("--listen and --allow-remote go with --transport http")

    from cortexctl.serve import sdk_missing

    missing = sdk_missing()
    if missing:
        raise UsageError(missing)
    if transport == "stdio":  # answers initialize, tools/list and tool calls while the SDK loads (serve/early.py)
        from cortexctl.serve.calls import Serving
        from cortexctl.serve.early import serve_stdio

        def cortex():
            from cortexctl.engine.cortex import Cortex

            return Cortex(settings=settings, resident=True)

        serving = Serving(make=cortex)

        def start():
            from cortexctl.serve import import_sdk

            import_sdk()
            from cortexctl.serve import server

            return server.start(serving)

        def run(app, wire):
            from cortexctl.serve.server import run_stdio

            run_stdio(app, wire)

        serve_stdio(start, run, serving)
        return
    from cortexctl.engine.cortex import Cortex
    from cortexctl.serve.server import serve

    serve(Cortex(settings=settings, resident=True), transport=transport, host=host, port=port, token=token)


def _tools_paragraph() -> str:
    """The served tools, named from the operations that declare one (cortexctl/ops)."""
    import textwrap

    from cortexctl import ops

    names = [op.name for op in ops.tools()]
    text = (f"Tools: {', '.join(names[:-1])} and {names[-1]}; each answers with the document the command's "
            "--json prints (an error is a result with isError and the one-line message). Resources: "
            "cortex://m/ID, cortex://m/ID/v/N and cortex://pinned. Needs the MCP SDK: pip\0install 'cortexctl[mcp]'.")
    return textwrap.fill(text, 78, break_on_hyphens=False, break_long_words=False).replace("\0", " ")


COMMANDS = [
    Command(
        ("mcp",), "Serve the store to agents over the Model Context Protocol (stdio or HTTP).", mcp,
        options=(
            Option("transport", ("--transport",), "stdio (default) or http (streamable HTTP).", default="stdio",
                   metavar="T", choices=("stdio", "http")),
            Option("listen", ("--listen",), f"With --transport http: the address [default {DEFAULT_LISTEN}].",
                   metavar="HOST:PORT"),
            Option("allow_remote", ("--allow-remote",), "Allow a --listen address that is not loopback.",
                   type=bool, default=False),
            STORE, ACTOR, WAIT,
        ),
        notes=_tools_paragraph() + """
\b
The server holds the store only inside a call, so a shell, cron or another
server works beside it; its own calls run one at a time. --actor is the actor
every call acts as. Logs go to stderr; stdout carries protocol messages only.
While the SDK loads (about a second), initialize and tools/list are answered
with the SDK's answers of an earlier start, kept in the user cache directory
(mcp-answers.json) while they still hold for this install.
\b
--transport http serves streamable HTTP at http://HOST:PORT/mcp and answers
401 to any request without "Authorization: Bearer TOKEN", TOKEN being the
value of $CORTEXCTL_MCP_TOKEN (config mcp.token_env names the variable).
It binds 127.0.0.1 unless --listen names another address; an address that
is not loopback also needs --allow-remote (put TLS in front of it).""",
        examples=(
            "cortexctl mcp",
            "cortexctl mcp --store ~/agents/brain --actor coder",
            "CORTEXCTL_MCP_TOKEN=$(openssl rand -hex 32) cortexctl mcp --transport http --listen 127.0.0.1:8765",
        ),
        exits=(0, 2),
        exit_notes={2: "usage error, no token for http, or the MCP SDK not installed"}, op="mcp",
    ),
]
