"""`--help` of a command and of `promptloop` itself, as data: `page` gathers the usage line,
the description, the options by panel (`rich_help_panel`), the environment variables (listed
once, at the end), the commands (of the group) and the examples; `ui.show_help` lays it out
for the terminal it is read in (80 columns and up), giving the option names the room they need
(never cut). No rich here: ui.py is the only module that draws.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

OPTIONS_PANEL = "Options"
PANEL_ORDER = ("Arguments", OPTIONS_PANEL, "Models", "Proposer", "Gate", "Run", "Budget",
               "Publish", "Output")

EXAMPLES: dict[str, tuple[str, ...]] = {
    "agent": ("promptloop agent example --task ex-urgency-outage",
              "promptloop agent card_agent --content 'Dentist Tuesday 3pm'"),
    "suites": ("promptloop suites", "promptloop suites evals/example"),
    "eval": ("promptloop eval --agent example",
             "promptloop eval --suite card_agent/quickstart --trials 3"),
    "report": ("promptloop report latest --failing", "promptloop report RUN --base-run BASE_RUN"),
    "optimize": ("promptloop optimize --suite pkm_agent --bucket skip_trivial",
                 "promptloop optimize --agent example --bucket urgency --iterations 1"),
    "nightly": ("promptloop nightly --max-usd 5", "promptloop nightly --resume"),
    "review": ("promptloop review --base origin/main --head HEAD --fail-on-regression",),
    "doctor": ("promptloop doctor", "promptloop doctor --fix"),
    "runs": ("promptloop runs --suite card_agent_capability",),
    "view": ("promptloop view --open",),
    "health": ("promptloop health --agent pkm_agent",
               "promptloop health --suite card_agent/regression"),
    "graduate": ("promptloop graduate --agent card_agent --bucket template_event --dry-run",),
    "calibrate": ("promptloop calibrate --grader pkm_insight_quality --labels labels.jsonl",),
    "init": ("git init my-agent && cd my-agent && promptloop init",),
    "profile": ("promptloop profile --agent pkm_agent --budget 40",),
    "help": ("promptloop help optimize", "promptloop -h"),
}
"""At least one example per command, shown at the end of its --help (a test checks every
command has one)."""

_TYPE_METAVARS = {"<str>": "TEXT", "<int range>": "N", "<int>": "N", "<float>": "X",
                  "<float range>": "X", "<path>": "PATH", "<file>": "FILE"}


def metavar(param: Any, ctx: Any) -> str:
    """What an option takes: its declared metavar, its choices, or a short type name."""
    if getattr(param, "is_flag", False):
        return ""
    if param.metavar:
        return str(param.metavar)
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return "[" + "|".join(str(m.value) for m in annotation) + "]"
    shown = param.display_type_rich(ctx=ctx) if hasattr(param, "display_type_rich") else None
    return _TYPE_METAVARS.get(shown or "", "VALUE")


def names(param: Any, ctx: Any) -> str:
    """`--name VALUE`, `--[no-]flag` for a flag with an off switch, `NAME` for an argument."""
    if not param.opts or not param.opts[0].startswith("-"):
        return argument_name(param)
    longs = list(param.opts)
    negative = [o for o in getattr(param, "secondary_opts", []) if o.startswith("--no-")]
    if negative and len(longs) == 1 and negative[0] == "--no-" + longs[0][2:]:
        longs = ["--[no-]" + longs[0][2:]]
    else:
        longs += negative
    value = metavar(param, ctx)
    return ", ".join(longs) + (f" {value}" if value else "")


def argument_name(param: Any) -> str:
    name = str(param.metavar or (param.name or "").upper())
    return name + ("..." if param.nargs == -1 else "")


def usage(cmd: Any, ctx: Any) -> str:
    """`Usage: promptloop report [OPTIONS] RUN...` (optional arguments in brackets)."""
    pieces = [ctx.command_path, "[OPTIONS]"]
    for p in cmd.get_params(ctx):
        if not p.opts or not p.opts[0].startswith("-"):
            pieces.append(argument_name(p) if p.required else f"[{argument_name(p)}]")
    if hasattr(cmd, "list_commands"):
        pieces.append("COMMAND [ARGS]...")
    return "Usage: " + " ".join(pieces)


def default_text(param: Any, ctx: Any) -> str:
    """The default shown in help (the promptloop.toml value when one applies); flags that are
    off and unset values show none."""
    if getattr(param, "is_flag", False) or param.required or param.show_default is False:
        return ""
    value = param.get_default(ctx, call=False)
    if value is None or callable(value) or value in ([], ()):
        return ""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, list | tuple):
        value = ", ".join(str(v) for v in value)
    return str(value)


@dataclass(frozen=True)
class Row:
    """One option (or argument, or command) of a help page."""

    name: str
    help: str
    default: str = ""
    required: bool = False


@dataclass
class Page:
    """A help page: what `ui.show_help` draws."""

    usage: str
    paragraphs: list[str]
    panels: dict[str, list[Row]]
    env: Sequence[tuple[str, str]] = ()
    examples: Sequence[str] = ()
    commands: list[Row] = field(default_factory=list)


def option_row(param: Any, ctx: Any) -> Row:
    return Row(names(param, ctx), " ".join((getattr(param, "help", None) or "").split()),
               default_text(param, ctx), bool(param.required))


def panels(params: Sequence[Any]) -> dict[str, list[Any]]:
    """Visible parameters by panel, panels in `PANEL_ORDER` (others after them, in the order
    they first appear)."""
    out: dict[str, list[Any]] = {"Arguments": [], OPTIONS_PANEL: []}
    for p in params:
        if getattr(p, "hidden", False):
            continue
        is_argument = not p.opts or not p.opts[0].startswith("-")
        panel = "Arguments" if is_argument else getattr(p, "rich_help_panel", None) or OPTIONS_PANEL
        out.setdefault(panel, []).append(p)
    rank = {name: i for i, name in enumerate(PANEL_ORDER)}
    ordered = sorted(out, key=lambda name: rank.get(name, len(rank)))
    return {k: out[k] for k in ordered if out[k]}


def page(cmd: Any, ctx: Any, env: Sequence[tuple[str, str]] = ()) -> Page:
    """A command's help page (a group's lists its commands, in the order it lists them)."""
    paragraphs = [p for p in (cmd.help or "").split("\n\n") if p.strip()]
    groups = {title: [option_row(p, ctx) for p in params]
              for title, params in panels(cmd.get_params(ctx)).items()}
    commands = []
    if hasattr(cmd, "list_commands"):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not getattr(sub, "hidden", False):
                commands.append(Row(name, " ".join(sub.get_short_help_str(limit=300).split())))
    return Page(usage(cmd, ctx), paragraphs, groups, env, EXAMPLES.get(cmd.name or "", ()),
                commands)
