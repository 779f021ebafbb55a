"""config show: the effective settings and where each came from."""

from __future__ import annotations

import typer

from cortexctl.cli import options as o
from cortexctl.cli.common import exit_status
from cortexctl.cli.output import Output

CONFIG_EPILOG = """\b
Precedence: defaults < config file (-c/--config, $CORTEXCTL_CONFIG, or
config.toml in the user config dir) < CORTEXCTL_* environment < flags.
API keys are never shown: only the name of the variable that holds one.
\b
Examples:
  cortexctl config show
  cortexctl -c ./cortex.toml config show --json
""" + exit_status(0, 2, notes={2: "bad config file or value"})

config_app = typer.Typer(help="Show the effective configuration.", no_args_is_help=True)


@config_app.command("show", epilog=CONFIG_EPILOG)
def show(
    ctx: typer.Context,
    store: o.Store = None, actor: o.Actor = None, wait: o.Wait = None, json: o.Json = False, jsonl: o.Jsonl = False,
) -> None:
    """Print every setting, its value and its source."""
    from cortexctl import config

    out = Output(json=json, jsonl=jsonl)
    settings = config.load(config_path=(ctx.obj or {}).get("config"), store=store, actor=actor, wait=wait)
    rows = [(k, settings.values[k], settings.sources[k]) for k in settings.values]
    if out.machine:
        out.emit_many(
            ({"key": k, "value": v, "source": s} for k, v, s in rows),
            lambda docs: {"config_file": str(settings.config_file) if settings.config_file else None,
                          "settings": {d["key"]: {"value": d["value"], "source": d["source"]} for d in docs}},
        )
        return
    out.table(["key", "value", "source"], [(k, "" if v is None else v, s) for k, v, s in rows])


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config", epilog=CONFIG_EPILOG)
