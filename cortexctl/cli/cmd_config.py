"""config show: the effective settings and where each came from."""

from __future__ import annotations

from cortexctl.cli.spec import command_for
from cortexctl.ops import lookup


def config_show(config, *, store, actor, wait, json, jsonl) -> None:
    from cortexctl import config as config_mod
    from cortexctl.cli.output import Output
    from cortexctl.engine.documents import ConfigAnswer

    out = Output(json=json, jsonl=jsonl)
    # config_show's document from the settings alone: no store is opened, so a bad one is no obstacle
    answer = ConfigAnswer.of(config_mod.load(config_path=config, store=store, actor=actor, wait=wait))
    if out.machine:
        out.emit_many(answer.docs(), answer.to_json)
        return
    out.table(["key", "value", "source"], [(k, "" if v is None else v, s) for k, v, s in answer.rows])


COMMANDS = [
    command_for(
        lookup("config_show"), ("config", "show"), "Print every setting, its value and its source.", run=config_show,
        group_help="Show the effective configuration.",
        notes="""Precedence: defaults < config file (-c/--config, $CORTEXCTL_CONFIG, or
config.toml in the user config dir) < CORTEXCTL_* environment < flags.
API keys are never shown: only the name of the variable that holds one; the
credentials in any URL (a PostgreSQL URI's password, an endpoint's
user:password or api_key/token parameter) are shown as ***.""",
        examples=("cortexctl config show", "cortexctl -c ./cortex.toml config show --json"),
        exits=(0, 2), exit_notes={2: "bad config file or value"},
    ),
]
