"""generate-man (hidden): roff man pages generated from the command declarations.

``cortexctl generate-man man/`` writes cortexctl(1) and one page per command;
a test checks the committed pages match what this generates.
"""

from __future__ import annotations

from cortexctl import __version__
from cortexctl.cli.spec import Argument, Command, Option

EXIT_CODES = [
    ("0", "ok"),
    ("1", "failed (including a change to a forgotten memory, unforget of a memory that is not forgotten, "
          "or a store from a newer cortexctl); for find, as for grep: nothing matched"),
    ("2", "usage error: bad arguments, malformed or ambiguous references, missing files, bad config"),
    ("3", "not found: no such memory, version or store"),
    ("4", "store busy: still locked after --wait seconds"),
    ("5", "rate limited"),
    ("6", "budget unreachable"),
    ("7", "integrity error: a corrupt or tampered store or bundle; verify found problems"),
    ("8", "refused: destructive without confirmation, or a memory another actor owns"),
    ("9", "provider unreachable (an embedding or chat endpoint, or a store's PostgreSQL server)"),
    ("10", "invalid input data: a value that breaks a type's schema, bad JSON, bad UTF-8, an import with bad lines"),
    ("70", "internal error (a bug: please report it; CORTEXCTL_DEBUG=1 shows the traceback)"),
    ("130", "interrupted: Ctrl-C, or SIGTERM (kill, timeout, systemd, docker); the command unwinds first"),
]

ENVIRONMENT = [
    ("CORTEXCTL_STORE", "the store: a directory, or a postgresql:// URI (else the config file, else the user "
                        "data dir; see STORE)"),
    ("CORTEXCTL_STORE_DSN", "store.dsn: a PostgreSQL database's postgresql:// URI (see STORE)"),
    ("CORTEXCTL_ACTOR", "acting agent (else the config file, else the OS user name)"),
    ("CORTEXCTL_WAIT", "seconds to wait for a busy store (default 5)"),
    ("CORTEXCTL_CONFIG", "config file, when -c/--config is not given"),
    ("CORTEXCTL_EMBED_BASE_URL, CORTEXCTL_EMBED_MODEL, CORTEXCTL_EMBED_DIMENSIONS, CORTEXCTL_EMBED_PROVIDER",
     "embedding settings; no base URL means the built-in hash embedder, provider local the model extra's "
     "local model named by embedding.model (multilingual-e5-small, the default, or wordllama-l2-256)"),
    ("CORTEXCTL_EMBED_API_KEY", "the embedding API key (the variable embedding.api_key_env names by default)"),
    ("CORTEXCTL_CHAT_BASE_URL, CORTEXCTL_CHAT_MODEL", "chat endpoint settings"),
    ("CORTEXCTL_MCP_TOKEN", "the bearer token of mcp --transport http (the variable mcp.token_env names by default)"),
    ("CORTEXCTL_FOLD", "inline: a write that finds the index file or the search snapshot due for a fold folds "
                       "them itself after its write, and restore builds the index file before it returns; "
                       "otherwise (the default) a fold is started in the background and the command returns"),
    ("CORTEXCTL_DEBUG", "1 shows a traceback on an internal error"),
    ("NO_COLOR", "no colour in terminal output"),
]


STORE_TEXT = (
    "The store is a directory on this machine (the DuckDB backend) or a PostgreSQL database (the postgres "
    "extra: pip install 'cortexctl[postgres]'), named by a postgresql:// or postgres:// URI; libpq's "
    "key=value connection strings and URLs of other schemes are not accepted. The setting store (--store, CORTEXCTL_STORE, or store "
    "in the config file, a string or the path of a [store] table) takes either; the table's backend (auto, "
    "the default, duckdb or postgres) and dsn (CORTEXCTL_STORE_DSN) name a database. Which store is used: "
    "a URI in store is PostgreSQL; else backend postgres, or auto with a dsn and no path given by --store or "
    "CORTEXCTL_STORE, is PostgreSQL at dsn; else the directory in store, or store/ under the user data dir. "
    "backend postgres with no dsn (or with a path from --store or CORTEXCTL_STORE), and backend duckdb with "
    "a URI, are exit 2. A URI's password is never printed: config show, healthcheck and every message show "
    "it as ***."
)


FIND_TEXT = (
    "find --near TEXT merges three lanes over the memories that pass the filters and the visibility rule: "
    "lexical (BM25, k1 1.2, b 0, Porter-stemmed words, one pass of pseudo-relevance feedback), semantic "
    "(cosine similarity of embeddings, through the HNSW index file, or exactly for narrow filters and for "
    "filters the memories nearest the query all fail, the vectors then read from the index file and compared "
    "in f16 first) and "
    "salience (see SALIENCE). A memory the lexical lane found lends 0.4 of its bm25/best bm25 to the memories "
    "just before and after it in its session and 0.2 to those two places away (creation order, among the "
    "memories that pass the filters): a memory borrows the most it is lent, as its context, and joins with the "
    "lane context if no other lane found it (not with --as-of). A query naming a day, a month or a year "
    "(2023-05-23, 23 May 2023, May 2023, in 2023) or a span relative to today (today, yesterday, N days ago, "
    "this or last week, month, year) lifts by 0.4 each of the 50 best candidates the words matched (lexical "
    "or context) whose time falls in it: an event's occurred_at, a fact's observed_at, else its creation day. "
    "Each candidate scores bm25/best bm25 + "
    "w*max(cosine, 0) + 0.05*salience + context (+ 0.4 for a named date), with w 0.05 for the built-in hash embedder and 1.0 for a "
    "real model (an embedding endpoint or the local model of the model extra); ties break by ID. -k and --budget-tokens bound the results. Without --near, the salience lane alone. find exits "
    "like grep: 0 when at least one result matched the query's words or meaning (without --near: any "
    "result), 1 when none did; piped, it prints only the matched results (--include-unmatched: all), and "
    "-q prints nothing."
)


SALIENCE_TEXT = (
    "Each memory has five factors in [0, 1]: recency 0.5^(age/30 days), age since it was last used (attested) "
    "or changed, whichever is later; importance/10; access a/(a+5) for access count a; citations c/(c+3); "
    "and the current version's confidence. Its salience, as one actor sees it, is the weighted sum under that "
    "actor's learned weights (non-negative, summing to 1; at first 0.3 recency, 0.3 importance, 0.15 access, "
    "0.15 citations, 0.1 confidence); a forgotten memory has salience 0. attest moves the weights one EMA step "
    "(rate 0.1, stamped in the journal): toward the mean factor profile of the cited memories, normalized to "
    "sum 1, on success; toward its complement (1 - profile, normalized) on a failure with reason "
    "factual_error or wrong_assumption. The step is skipped when no memory was affected, when the target "
    "sums to 0, or on any other failure, and the learn-weights journal entry is written all the same. "
    "verify replays every step and compares the result bit for bit."
)

COMPACT_TEXT = (
    "compact splits the memories in context into kept (the --load-bearing ones, every identity, hard "
    "constraint and active goal), counted at their medium form's tokens, and stubs {ref, short form, "
    "salience}, counted at their short form's tokens (tokens are UTF-8 bytes / 4, rounded up). Over "
    "--budget-tokens: exit 6 and nothing stored. Otherwise the checkpoint record is stored as canonical "
    "CBOR (cortex://journal/logs/INTENT/STEP, replacing an earlier one for that intent and step) and "
    "mirrored best-effort as JSON to DIR/INTENT/STEP.snapshot. Intent and step IDs are 1-128 letters, "
    "digits, '.', '_', ':' or '-', not starting with '.'."
)


def _esc(text: str) -> str:
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in out.splitlines())


def _ref(words: tuple[str, ...]) -> str:
    return _esc("cortexctl-" + "-".join(words))


def _options(options: tuple[Option, ...]) -> list[str]:
    lines = []
    for opt in options:
        names = ", ".join(opt.flags)
        if not opt.is_flag and opt.metavar:
            names += f" {opt.metavar}"
        lines += [".TP", f"\\fB{_esc(names)}\\fR", _esc(opt.help)]
    return lines


def _usage(command: Command) -> str:
    return " ".join(["cortexctl", *command.words, "[OPTIONS]", *(a.metavar for a in command.arguments)])


def page_for(command: Command) -> str:
    name = "cortexctl-" + "-".join(command.words)
    lines = [
        f'.TH "{name.upper()}" "1" "" "cortexctl {__version__}" "cortexctl manual"',
        ".SH NAME",
        f"{name} \\- {_esc(command.summary)}",
        ".SH SYNOPSIS",
        f"\\fB{_esc(_usage(command))}\\fR",
        ".SH DESCRIPTION",
        _esc(command.summary),
    ]
    if command.arguments:
        lines.append(".SH ARGUMENTS")
        for arg in command.arguments:
            lines += [".TP", f"\\fB{_esc(arg.metavar)}\\fR", _esc(arg.help)]
    lines.append(".SH OPTIONS")
    lines += _options(command.options)
    if command.epilog:
        lines += [".SH NOTES AND EXAMPLES", ".nf", _esc(command.epilog.replace("\b\n", "").replace("\b", "")), ".fi"]
    lines += [".SH EXIT STATUS", "See \\fBcortexctl\\fR(1).", ".SH SEE ALSO", "\\fBcortexctl\\fR(1)"]
    return "\n".join(lines) + "\n"


GLOBAL_OPTIONS = (
    Option("config", ("-c", "--config"), "Config file (TOML or JSON) [env CORTEXCTL_CONFIG].", metavar="PATH"),
    Option("version", ("--version",), "Print the version and exit.", type=bool),
    Option("install_completion", ("--install-completion",), "Install completion for the current shell.", type=bool),
    Option("show_completion", ("--show-completion",),
           "Show completion for the current shell, to copy it or customize the installation.", type=bool),
)


def main_page(shown: list[Command]) -> str:
    from cortexctl.cli.spec import HELP

    lines = [
        f'.TH "CORTEXCTL" "1" "" "cortexctl {__version__}" "cortexctl manual"',
        ".SH NAME",
        "cortexctl \\- long\\-term memory for AI agents over a local single\\-file store",
        ".SH SYNOPSIS",
        "\\fBcortexctl\\fR [\\fB\\-c\\fR \\fIPATH\\fR] \\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fIARGS\\fR]",
        ".SH DESCRIPTION",
        _esc(HELP),
        ".SH COMMANDS",
    ]
    for command in shown:
        lines += [".TP", f"\\fBcortexctl {command.name}\\fR", "See \\fB" + _ref(command.words) + "\\fR(1)."]
    lines += [".SH GLOBAL OPTIONS"] + _options(GLOBAL_OPTIONS)
    lines += [
        ".SH COMMON OPTIONS",
        "Every command that opens a store accepts, after the command's name:",
        ".TP", "\\fB\\-\\-store\\fR \\fIPATH\\fR", "the store directory, or a postgresql:// URI (see STORE)",
        ".TP", "\\fB\\-\\-actor\\fR \\fINAME\\fR", "the acting agent; private memories are seen only by their actor",
        ".TP", "\\fB\\-\\-wait\\fR \\fISECONDS\\fR", "how long to wait for a busy store before exit 4",
        ".TP", "\\fB\\-\\-json\\fR, \\fB\\-\\-jsonl\\fR",
        "one JSON document, or one JSON object per line; errors then go to stderr as a JSON object. "
        "Fields may be added in later versions, never removed.",
        ".SH STORE",
        _esc(STORE_TEXT),
        ".SH FIND",
        _esc(FIND_TEXT),
        ".SH SALIENCE",
        _esc(SALIENCE_TEXT),
        ".SH COMPACT AND CHECKPOINTS",
        _esc(COMPACT_TEXT),
        ".SH EXIT STATUS",
    ]
    for code, meaning in EXIT_CODES:
        lines += [".TP", f"\\fB{code}\\fR", _esc(meaning)]
    lines.append(".SH ENVIRONMENT")
    for name, meaning in ENVIRONMENT:
        lines += [".TP", f"\\fB{_esc(name)}\\fR", _esc(meaning)]
    lines += [
        ".SH FILES",
        "A store directory (DuckDB) holds:",
        ".TP", "\\fISTORE/cortex.duckdb\\fR",
        "the store: heads, versions, the journal, vectors, lexical postings, learned weights, attest "
        "rate-limit buckets and checkpoints (mode 0600, directory 0700)",
        ".TP", "\\fISTORE/cortex.usearch\\fR, \\fISTORE/cortex.usearch.json\\fR",
        "the HNSW index file and its record: a cache of the vectors, rebuilt when it does not match the store "
        "(STORE/cortex.usearch.json.next: the record of a new file being put in place); "
        "STORE/cortex.usearch-HEX: the further index files of a store whose vectors are split by visibility "
        "class, named in the record",
        ".TP", "\\fISTORE/cortex.snapshot\\fR, \\fISTORE/cortex.snapdelta\\fR, \\fISTORE/cortex.gen\\fR",
        "the search snapshot find reads, its delta and the generation file every commit stamps: a cache, "
        "bypassed when it does not match the store",
        ".TP", "\\fISTORE/cortex.usearch.checked\\fR, \\fISTORE/cortex.snapshot.checked\\fR",
        "checked stamps: the identity of the index file or snapshot last read whole and found sound; a reader "
        "of that very file checks only sampled blocks of it, and any write to it since means it is checked "
        "whole again",
        ".TP", "\\fISTORE/.lock\\fR", "the writers' lock",
        ".SH SEE ALSO",
        ", ".join("\\fB" + _ref(c.words) + "\\fR(1)" for c in shown),
    ]
    return "\n".join(lines) + "\n"


def render_all() -> dict[str, str]:
    from cortexctl.cli.registry import commands

    shown = sorted((c for c in commands() if not c.hidden), key=lambda c: c.words)
    pages = {f"cortexctl-{'-'.join(c.words)}.1": page_for(c) for c in shown}
    pages["cortexctl.1"] = main_page(shown)
    return pages


def generate_man(config, *, directory) -> None:
    from pathlib import Path

    from cortexctl.errors import UsageError, no_space

    target = Path(directory or "man")
    for name, text in render_all().items():
        try:  # only the directory's errors: stdout's (a closed pipe, a full disk) are said as any command's
            target.mkdir(parents=True, exist_ok=True)
            (target / name).write_text(text, encoding="utf-8")
        except (FileExistsError, NotADirectoryError):
            raise UsageError(f"DIR {target}: is not a directory") from None
        except OSError as exc:
            if no_space(exc) is not None:
                raise
            raise UsageError(f"DIR {target}: cannot be written ({exc.strerror})") from None
        print(target / name)


COMMANDS = [
    Command(("generate-man",), "Write the man pages into DIR.", generate_man,
            arguments=(Argument("directory", "DIR", "Where to write the pages (default: man).", required=False),),
            hidden=True, exits=(), op="generate_man"),
]
