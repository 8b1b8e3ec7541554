"""`--help` of a command, laid out for the terminal it is read in (80 columns and up).

Typer's own layout squeezes option names into a narrow column at 80 columns; this one gives
the option names the room they need (never cut), wraps the help text at word boundaries
beside them (or below them on a very narrow terminal), groups options in their panels
(`rich_help_panel`) and lists environment variables once, at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum
from typing import Any

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

OPTIONS_PANEL = "Options"
PANEL_ORDER = ("Arguments", OPTIONS_PANEL, "Models", "Proposer", "Gate", "Run", "Budget",
               "Publish", "Output")
MIN_HELP_WIDTH = 30
"""Below this many columns beside the option names, help text goes under the names."""

EXAMPLES: dict[str, tuple[str, ...]] = {
    "agent": ("promptloop agent example --task ex-urgency-outage",
              "promptloop agent card_agent --content 'Dentist Tuesday 3pm'"),
    "suites": ("promptloop suites", "promptloop suites evals/example"),
    "eval": ("promptloop eval --agent example",
             "promptloop eval --suite card_agent/quickstart --trials 3"),
    "report": ("promptloop report latest --failing", "promptloop report RUN --base BASE_RUN"),
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


def option_help(param: Any, ctx: Any) -> Text:
    text = Text(" ".join((getattr(param, "help", None) or "").split()))
    shown = default_text(param, ctx)
    if shown:
        text.append(f" [default: {shown}]", style="dim")
    if param.required:
        text.append(" [required]", style="red")
    return text


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


def _panel(title: str, rows: list[tuple[str, Text]], name_width: int, width: int) -> Panel:
    """Names and help side by side; a name longer than the names column (or every name, on a
    terminal too narrow for two columns) gets its own line, its help indented below it."""
    stacked = width - name_width - 6 < MIN_HELP_WIDTH
    lines: list[RenderableType] = []
    for name, text in rows:
        label = Text(name, style="bold cyan")
        if stacked or len(name) > name_width:
            indent = 4 if stacked else name_width + 2
            lines += [label, Padding(text, (0, 0, 0, indent))]
            continue
        grid = Table.grid(padding=(0, 2))
        grid.add_column(width=name_width, no_wrap=True)
        grid.add_column()
        grid.add_row(label, text)
        lines.append(grid)
    return Panel(Group(*lines), title=title, title_align="left", border_style="dim",
                 box=box.ROUNDED)


def names_width(rows: Sequence[str], width: int) -> int:
    """Width of the names column: the longest name up to a third of the terminal (longer
    names go on a line of their own)."""
    cap = max(18, min(28, width // 3))
    fitting = [len(n) for n in rows if len(n) <= cap]
    return max(fitting, default=cap)


def env_table(pairs: Sequence[tuple[str, str]]) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True, style="yellow")
    grid.add_column(no_wrap=True, style="cyan")
    for env, option in pairs:
        grid.add_row(env, option)
    return grid


def render(console: Console, cmd: Any, ctx: Any, env: Sequence[tuple[str, str]]) -> None:
    """Print a command's help: usage, description, option panels, environment variables."""
    parts: list[RenderableType] = [Text(usage(cmd, ctx), style="bold"), Text("")]
    paragraphs = [p for p in (cmd.help or "").split("\n\n") if p.strip()]
    for i, paragraph in enumerate(paragraphs):
        parts += [Text(paragraph, style="" if i == 0 else "dim"), Text("")]
    groups = panels(cmd.get_params(ctx))
    all_rows = {title: [(names(p, ctx), option_help(p, ctx)) for p in params]
                for title, params in groups.items()}
    name_width = names_width([n for rows in all_rows.values() for n, _ in rows], console.width)
    for title, rows in all_rows.items():
        parts.append(_panel(title, rows, name_width, console.width))
    if env:
        parts += [Text(""), Text("Environment variables (a flag beats its variable, which "
                                 "beats promptloop.toml):"), env_table(env)]
    examples = EXAMPLES.get(cmd.name or "", ())
    if examples:
        parts += [Text(""), Text("Examples:")]
        parts += [Text(f"  {line}", style="green", overflow="fold") for line in examples]
    console.print(Padding(Group(*parts), (1, 1, 0, 1)))
