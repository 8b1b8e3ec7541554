"""General graders any agent can name in task.json: a value at a JSON path of the outcome, a
JSON Schema check, an LLM-judge rubric written in the task, and a user's grading command.

- `json_path`: the value(s) a JSON path selects in the outcome `equals` a value, is `one_of`
  several, `matches` a regex (re.search) or `contains` substrings. String comparisons ignore
  case (and, for equals/one_of, surrounding whitespace) unless `case_sensitive` is true. A path
  with a wildcard (`$.items[*].owner`) selects a list: `contains` then looks for each
  substring in any of its string values, `equals` compares the whole list when the expected
  value is a list (else every value must equal it), `one_of` and `matches` hold for every
  value. `partial_credit`: the fraction of checks that held, else all or nothing.
- `json_schema`: the outcome (or the value at `path`) is valid under `schema` (the `jsonschema`
  package, formats checked).
- `rubric_judge`: the judge model grades the outcome (or the parts named by `show`) against the
  task's rubric on its `dimensions`, each on `scale`; the score is the mean normalised to 0..1,
  passed at `pass_threshold`. The per-dimension values are kept in the score's metadata as the
  PKM judges keep theirs, so `promptloop calibrate --grader rubric_judge` calibrates it.
- `command`: a grading command declared in promptloop.toml (`set_command_graders`) reads
  `{"task_id", "outcome", "transcript"}` on stdin and prints `{"score", "rationale",
  "passed"?}`; it runs in a temporary folder with a minimal environment and a time limit. A
  command that fails (exit status, bad JSON, no score, timeout, output too large) gives a null
  score with `error_type` in its metadata: the trial is errored, never failed or passed.

JSON paths: `$` (the outcome), `.key`, `['key']`, `[n]` (negative counts from the end), `[*]`
or `.*` (every item); or the dotted form `items.0.owner` (a number indexes a list).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import math
import os
import re
import signal
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
from pydantic import ConfigDict, Field, field_validator, model_validator

from promptloop.agents.exits import start
from promptloop.agents.names import did_you_mean
from promptloop.agents.placeholders import render
from promptloop.graders.base import (
    Assertion,
    GradeContext,
    GraderConfig,
    Score,
    null_score,
    passes,
    value_score,
)
from promptloop.graders.judge import NO_JUDGE, ask_judge, clip, load_rubric, parse_judge_json
from promptloop.graders.registry import register

RUBRIC_JUDGE_THRESHOLD = 0.6
"""rubric_judge's registered threshold (calibration's confusion matrix); a task's
`pass_threshold` decides its own trials."""
COMMAND_TIMEOUT_S = 30.0
COMMAND_OUTPUT_CAP = 1_000_000
"""Bytes of stdout a grading command may print; more is an error."""
COMMAND_ENV = ("PATH", "HOME", "LANG")
COMMAND_ERROR = "CommandGraderError"
SHOW_LIMIT = 12_000


# --- JSON paths ------------------------------------------------------------------------------


class JsonPathError(ValueError):
    pass


@dataclass(frozen=True)
class _Step:
    key: str | int | None
    """A key, an index, or None for every item."""


_DOT_KEY = re.compile(r"\.([^.\[\]]+)")
_INDEX = re.compile(r"\[\s*(-?\d+|\*)\s*\]")
_QUOTED = re.compile(r"""\[\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")\s*\]""")


def parse_path(path: str) -> tuple[_Step, ...]:
    """The steps of a JSON path; a JsonPathError says where it is malformed."""
    text = path.strip()
    if text.startswith("$"):
        rest = text[1:]
    elif not text:
        raise JsonPathError("is empty (use '$' for the whole outcome)")
    else:
        rest = text if text.startswith("[") else "." + text
    steps: list[_Step] = []
    pos = 0
    while pos < len(rest):
        if rest.startswith(".*", pos) and (pos + 2 == len(rest) or rest[pos + 2] in ".["):
            steps.append(_Step(None))
            pos += 2
        elif m := _DOT_KEY.match(rest, pos):
            steps.append(_Step(m.group(1)))
            pos = m.end()
        elif m := _INDEX.match(rest, pos):
            steps.append(_Step(None if m.group(1) == "*" else int(m.group(1))))
            pos = m.end()
        elif m := _QUOTED.match(rest, pos):
            raw = m.group(1) if m.group(1) is not None else m.group(2)
            steps.append(_Step(re.sub(r"\\(.)", r"\1", raw)))
            pos = m.end()
        else:
            raise JsonPathError(f"cannot read {rest[pos:]!r} (at character {pos + 1} of "
                                f"{text!r}); use $.key, [n], [*] or key.0.key")
    return tuple(steps)


def has_wildcard(path: str) -> bool:
    return any(s.key is None for s in parse_path(path))


def select(document: Any, path: str) -> list[tuple[str, Any]]:
    """(concrete path, value) for every value `path` selects in `document`, in order."""
    found: list[tuple[str, Any]] = [("$", document)]
    for step in parse_path(path):
        found = [hit for where, value in found for hit in _step(where, value, step.key)]
    return found


def _step(where: str, value: Any, key: str | int | None) -> Iterator[tuple[str, Any]]:
    if key is None:
        if isinstance(value, list):
            yield from ((f"{where}[{i}]", v) for i, v in enumerate(value))
        elif isinstance(value, dict):
            yield from ((f"{where}.{k}", v) for k, v in value.items())
        return
    if isinstance(value, dict):
        name = str(key)
        if name in value:
            yield f"{where}.{name}", value[name]
        return
    if isinstance(value, list):
        index = key if isinstance(key, int) else int(key) if re.fullmatch(r"-?\d+", key) else None
        if index is not None and -len(value) <= index < len(value):
            yield f"{where}[{index % len(value)}]", value[index]


def _check_path(value: str) -> str:
    try:
        parse_path(value)
    except JsonPathError as err:
        raise ValueError(f"JSON path {value!r} {err}") from None
    return value


def _threshold(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"must be from 0 to 1, got {value}")
    return value


# --- json_path -------------------------------------------------------------------------------

_CHECKS = ("equals", "one_of", "matches", "contains")


class JsonPathConfig(GraderConfig):
    path: str
    equals: Any = None
    one_of: list[Any] | None = Field(default=None, min_length=1)
    matches: str | None = None
    contains: list[str] | None = Field(default=None, min_length=1)
    case_sensitive: bool = False
    partial_credit: bool = False
    pass_threshold: float | None = None
    """Default 1.0: every check must hold (with partial credit, the value still shows how
    many did)."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _check_path(value)

    @field_validator("pass_threshold")
    @classmethod
    def _pass(cls, value: float | None) -> float | None:
        return _threshold(value)

    @field_validator("contains", mode="before")
    @classmethod
    def _one_string(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as err:
                raise ValueError(f"not a valid regular expression: {err}") from None
        return value

    @model_validator(mode="after")
    def _one_check(self) -> JsonPathConfig:
        given = [c for c in _CHECKS if c in self.model_fields_set]
        if len(given) != 1:
            raise ValueError(f"give exactly one of {', '.join(_CHECKS)} (got "
                             f"{', '.join(given) or 'none'})")
        return self

    @property
    def check(self) -> str:
        return next(c for c in _CHECKS if c in self.model_fields_set)


def _fold(value: Any, case_sensitive: bool) -> Any:
    """A value for equality: strings stripped (and case-folded), booleans kept apart from
    numbers (JSON true is not 1), containers folded item by item."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, str):
        text = value.strip()
        return text if case_sensitive else text.casefold()
    if isinstance(value, list | tuple):
        return [_fold(v, case_sensitive) for v in value]
    if isinstance(value, dict):
        return {k: _fold(v, case_sensitive) for k, v in value.items()}
    return value


def _texts(value: Any) -> Iterator[str]:
    """Every scalar inside `value` as text (strings as they are, numbers as JSON)."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _texts(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _texts(v)
    elif isinstance(value, str):
        yield value
    elif value is not None:
        yield json.dumps(value)


def _json_path_checks(config: JsonPathConfig, hits: list[tuple[str, Any]],
                      multi: bool) -> list[Assertion]:
    case = config.case_sensitive
    values = [v for _, v in hits]
    if config.check == "contains":
        texts = [t for v in values for t in _texts(v)]
        haystack = texts if case else [t.casefold() for t in texts]
        return [Assertion(description=f"{config.path} contains {s!r}",
                          passed=any((s if case else s.casefold()) in t for t in haystack),
                          actual=clip(json.dumps(texts, ensure_ascii=False), 300), expected=s)
                for s in config.contains or []]
    if config.check == "equals" and multi and isinstance(config.equals, list):
        return [Assertion(description=f"{config.path} equals {config.equals!r}",
                          passed=_fold(values, case) == _fold(config.equals, case),
                          actual=values, expected=config.equals)]
    out = []
    for where, value in hits:
        if config.check == "equals":
            ok = _fold(value, case) == _fold(config.equals, case)
            out.append(Assertion(description=f"{where} equals {config.equals!r}", passed=ok,
                                 actual=value, expected=config.equals))
        elif config.check == "one_of":
            options = [_fold(o, case) for o in config.one_of or []]
            out.append(Assertion(description=f"{where} is one of {config.one_of!r}",
                                 passed=_fold(value, case) in options, actual=value,
                                 expected=config.one_of))
        else:
            flags = 0 if case else re.IGNORECASE
            text = value if isinstance(value, str) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                text = json.dumps(value)
            ok = text is not None and re.search(config.matches or "", text, flags) is not None
            out.append(Assertion(description=f"{where} matches /{config.matches}/", passed=ok,
                                 actual=value, expected=config.matches))
    return out


@register("json_path", kind="code", threshold=1.0, config=JsonPathConfig, agent=None)
async def json_path(ctx: GradeContext, config: JsonPathConfig) -> Score:
    """The value(s) at a JSON path of the outcome equal / are one of / match / contain."""
    threshold = 1.0 if config.pass_threshold is None else config.pass_threshold
    multi = has_wildcard(config.path)
    hits = select(ctx.outcome, config.path)
    meta: dict[str, Any] = {"path": config.path, "check": config.check}
    if not hits:
        what = "selected no value" if multi else "is not in the outcome"
        missing = Assertion(description=f"{config.path} {what}", passed=False,
                            expected=getattr(config, config.check))
        return value_score("json_path", 0.0, threshold, [missing],
                           f"{config.path} {what}", meta)
    assertions = _json_path_checks(config, hits, multi)
    held = sum(a.passed for a in assertions) / len(assertions)
    value = held if config.partial_credit else float(held == 1.0)
    return value_score("json_path", value, threshold, assertions, metadata=meta)


# --- json_schema -----------------------------------------------------------------------------


class JsonSchemaConfig(GraderConfig):
    model_config = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)

    json_schema: dict[str, Any] = Field(alias="schema")
    path: str = "$"

    @field_validator("path")
    @classmethod
    def _path(cls, value: str) -> str:
        return _check_path(value)

    @field_validator("json_schema")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            jsonschema.validators.validator_for(value).check_schema(value)
        except jsonschema.SchemaError as err:
            where = "/".join(str(p) for p in err.absolute_path)
            raise ValueError(f"not a valid JSON Schema{f' at {where}' if where else ''}: "
                             f"{err.message}") from None
        return value


@register("json_schema", kind="code", threshold=1.0, config=JsonSchemaConfig, agent=None)
async def json_schema(ctx: GradeContext, config: JsonSchemaConfig) -> Score:
    """The outcome (or the value at `path`) is valid under the task's JSON Schema."""
    hits = select(ctx.outcome, config.path)
    if has_wildcard(config.path):
        instance: Any = [v for _, v in hits]
    elif hits:
        instance = hits[0][1]
    else:
        missing = Assertion(description=f"{config.path} is in the outcome", passed=False)
        return value_score("json_schema", 0.0, 1.0, [missing],
                           f"{config.path} is not in the outcome", {"path": config.path})
    cls = jsonschema.validators.validator_for(config.json_schema)
    validator = cls(config.json_schema, format_checker=cls.FORMAT_CHECKER)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    assertions = [
        Assertion(description=f"{_where(config.path, e.absolute_path)}: {clip(e.message, 300)}",
                  passed=False, expected=e.validator)
        for e in errors[:20]
    ] or [Assertion(description=f"{config.path} is valid under the schema", passed=True)]
    rationale = "" if not errors else (
        f"{len(errors)} schema violation(s): "
        + "; ".join(a.description for a in assertions[:5]))
    return value_score("json_schema", 0.0 if errors else 1.0, 1.0, assertions, rationale,
                       {"path": config.path, "violations": len(errors)})


def _where(base: str, parts: Sequence[Any]) -> str:
    out = base if base.startswith("$") else f"$.{base}"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


# --- rubric_judge ----------------------------------------------------------------------------

_DIMENSION = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


class RubricJudgeConfig(GraderConfig):
    rubric: str = Field(min_length=1)
    dimensions: list[str] = Field(default_factory=lambda: ["overall"], min_length=1)
    scale: tuple[float, float] = (1.0, 5.0)
    pass_threshold: float = RUBRIC_JUDGE_THRESHOLD
    """On the normalised 0..1 mean of the dimensions."""
    show: list[str] | None = Field(default=None, min_length=1)
    """Outcome paths shown to the judge (default: the whole outcome)."""
    show_transcript: bool = False
    """Also show the agent's messages and tool calls."""

    @field_validator("pass_threshold")
    @classmethod
    def _pass(cls, value: float) -> float:
        return _threshold(value) or value

    @field_validator("rubric")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("is blank")
        return value

    @field_validator("dimensions")
    @classmethod
    def _names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _DIMENSION.fullmatch(name) or name == "rationale":
                raise ValueError(f"{name!r} is not a dimension name (letters, digits and _, "
                                 "not 'rationale')")
        if len(set(value)) != len(value):
            raise ValueError("names a dimension twice")
        return value

    @field_validator("scale")
    @classmethod
    def _scale(cls, value: tuple[float, float]) -> tuple[float, float]:
        low, high = value
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"must be [low, high] with low < high, got {list(value)}")
        return value

    @field_validator("show")
    @classmethod
    def _paths(cls, value: list[str] | None) -> list[str] | None:
        for path in value or []:
            _check_path(path)
        return value


def _fmt(x: float) -> str:
    return f"{x:g}"


def _shown_outcome(ctx: GradeContext, config: RubricJudgeConfig) -> str:
    if config.show is None:
        return clip(json.dumps(ctx.outcome, ensure_ascii=False, indent=2, default=str),
                    SHOW_LIMIT)
    blocks = []
    for path in config.show:
        hits = select(ctx.outcome, path)
        value: Any = [v for _, v in hits] if has_wildcard(path) else (
            hits[0][1] if hits else None)
        text = "(not in the outcome)" if not hits and not has_wildcard(path) else json.dumps(
            value, ensure_ascii=False, indent=2, default=str)
        blocks.append(f'<value path="{path}">\n{clip(text, SHOW_LIMIT // len(config.show))}'
                      "\n</value>")
    return "\n".join(blocks)


def _shown_transcript(ctx: GradeContext) -> str:
    lines = []
    for m in ctx.transcript.messages:
        if m.role in ("system",):
            continue
        calls = "".join(f"\n  -> {c.name}({json.dumps(c.arguments, ensure_ascii=False)})"
                        for c in m.tool_calls)
        lines.append(f"[{m.role}] {clip(m.content, 2000)}{calls}")
    for c in ctx.transcript.tool_calls:
        lines.append(f"[tool {c.tool_name}{' error' if c.is_error else ''}] "
                     f"{clip(c.result, 1000)}")
    text = "\n".join(lines) or "(empty transcript)"
    return "\n\n## What the agent said and did\n<transcript>\n" + clip(text, SHOW_LIMIT) + (
        "\n</transcript>")


def _number(raw: Any) -> float | None:
    """A judge's grade as a number; None when it is none ("unknown", null, booleans, NaN,
    containers)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        if not _NUMBER.fullmatch(raw.strip()):
            return None
        raw = float(raw)
    if not isinstance(raw, int | float) or not math.isfinite(raw):
        return None
    return float(raw)


def scaled(raw: Any, low: float, high: float) -> float | None:
    """A judge's grade on [low, high] normalised to [0, 1]; None when it is not a number or
    falls outside the scale (`off_scale` says which: the reply is then unusable)."""
    value = _number(raw)
    if value is None or off_scale(value, low, high):
        return None
    return (min(high, max(low, value)) - low) / (high - low)


def off_scale(value: float, low: float, high: float) -> bool:
    """A grade outside [low, high] (past a rounding error): a judge answering on another scale
    (40 on a 1-5 rubric, "out of 100"), whose grade no clamping can read (clamped, 40 passed
    as 5/5 and optimize kept the patch)."""
    slack = 1e-9 * max(1.0, abs(high - low))
    return value < low - slack or value > high + slack


JUDGE_UNUSABLE = "judge_unusable"
"""Score metadata: the judge replied, but nothing in the reply could be read as a score."""


def rubric_score(config: RubricJudgeConfig, reply: str, model_id: str,
                 metadata: Mapping[str, Any]) -> Score:
    """The score of a judge reply: as graders.judge.judged_score, on the task's scale and
    pass threshold. Null when the reply is not a JSON object or no dimension is known."""
    name = "rubric_judge"
    low, high = config.scale
    threshold = config.pass_threshold
    meta = {**metadata, "judge_model": model_id, "judge_reply": clip(reply, 2000),
            "scale": [low, high], "threshold": threshold}
    # a reply the grader cannot read decides nothing, and is no pass either: the trial is
    # errored (`run.trial._decide`), not passed on the other graders alone
    meta[JUDGE_UNUSABLE] = True
    data = parse_judge_json(reply)
    if data is None:
        return null_score(name, "judge reply was not JSON: no valid JSON object in its first "
                                "code fence or between its first '{' and last '}'", **meta)
    note = data.get("rationale")
    if note is not None and not isinstance(note, str):
        return null_score(name, f"judge reply was unparseable: `rationale` is a "
                                f"{type(note).__name__}", **meta)
    meta["raw_dimensions"] = {d: data.get(d) for d in config.dimensions}
    outside = {d: v for d in config.dimensions
               if (v := _number(data.get(d))) is not None and off_scale(v, low, high)}
    if outside:
        shown = ", ".join(f"{d}={_fmt(v)}" for d, v in outside.items())
        return null_score(name, f"judge graded outside the rubric's scale {_fmt(low)}-"
                                f"{_fmt(high)} ({shown}): another scale's grade cannot be "
                                "read on this one", **meta)
    values = {d: scaled(data.get(d), low, high) for d in config.dimensions}
    meta["dimensions"] = values
    summary = ", ".join(
        f"{d}={'unknown' if v is None else _fmt(low + v * (high - low))}/{_fmt(high)}"
        for d, v in values.items())
    known = {d: v for d, v in values.items() if v is not None}
    if not known:
        return null_score(name, f"judge could not decide any dimension ({summary})", **meta)
    del meta[JUDGE_UNUSABLE]
    value = sum(known.values()) / len(known)
    assertions = [Assertion(description=f"{d} >= {threshold:g} (normalised)",
                            passed=passes(v, threshold), actual=v) for d, v in known.items()]
    text = (note or "").strip()
    rationale = f"{summary}; {clip(text, 1000)}" if text else summary
    return value_score(name, value, threshold, assertions, rationale, meta)


BUNDLED_INPUT_KEYS = frozenset({"content", "fact_id", "fixture_dir", "base_fixture"})
"""Input keys of the bundled agents' task shape: an input of these alone shows its text."""


def shown_input(ctx: GradeContext) -> str:
    """The task's input as the judge sees it: its text where it is one (`content`, as the
    bundled agents' tasks give it), else the input as the task declares it, as JSON (an
    object of any keys: docs/suites.md)."""
    own = {k: v for k, v in ctx.input.items() if k not in BUNDLED_INPUT_KEYS}
    if not own:
        return ctx.input_content or "(empty input)"
    return json.dumps(dict(ctx.input), indent=2, ensure_ascii=False, default=str)


@register("rubric_judge", kind="model", threshold=RUBRIC_JUDGE_THRESHOLD,
          config=RubricJudgeConfig, agent=None)
async def rubric_judge(ctx: GradeContext, config: RubricJudgeConfig) -> Score:
    """The judge model grades the outcome against the task's rubric, per dimension."""
    if ctx.judge is None:
        return null_score("rubric_judge", NO_JUDGE)
    low, high = config.scale
    example = {d: _fmt(high) if i % 2 else _fmt(low + (high - low) / 2)
               for i, d in enumerate(config.dimensions)}
    prompt = render(load_rubric("rubric_judge"), {
        "rubric": config.rubric.strip(),
        "input": shown_input(ctx),
        "outcome": _shown_outcome(ctx, config),
        "transcript": _shown_transcript(ctx) if config.show_transcript else "",
        "dimensions": "\n".join(f"- `{d}`" for d in config.dimensions),
        "low": _fmt(low),
        "high": _fmt(high),
        "example": json.dumps({**{d: float(v) for d, v in example.items()},
                               "rationale": "one short sentence"}),
    })
    reply, model_id, usage = await ask_judge(ctx, prompt)
    return rubric_score(config, reply, model_id, {"usage": usage})


# --- command ---------------------------------------------------------------------------------

_command_graders: dict[str, tuple[str, ...]] = {}
_command_root: Path | None = None


def set_command_graders(mapping: Mapping[str, Sequence[str]], root: Path | None = None) -> None:
    """Declare the grading commands tasks may name (replacing any earlier declaration): name
    -> argv, as promptloop.toml's `[agents.<name>.graders.<grader>] command`. With `root` (the
    repository), an argument that is a relative path of an existing file under it is made
    absolute (the command runs in a temporary folder) and PROMPTLOOP_REPO is set to it."""
    table: dict[str, tuple[str, ...]] = {}
    for name, argv in mapping.items():
        if isinstance(argv, str) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"command grader {name!r}: command must be a non-empty list of "
                             "strings")
        table[name] = tuple(argv)
    global _command_root
    _command_graders.clear()
    _command_graders.update(table)
    _command_root = root.resolve() if root is not None else None


def command_graders() -> dict[str, list[str]]:
    """The declared grading commands, name -> argv."""
    return {k: list(v) for k, v in _command_graders.items()}


_GRADER_CODE = frozenset({".py", ".js", ".mjs", ".cjs", ".ts", ".sh", ".rb", ".json", ".yaml",
                          ".yml", ".toml"})


def command_grader_digest(names: Sequence[str]) -> str:
    """What decides the grades of the command graders `names`, for the trial cache: each one's
    argv and the bytes of the files it names and of the code beside them (a team fixed its
    grading script and eval served the old grades from the cache, commit or not); '' when
    none of them is a declared command grader."""
    h = hashlib.sha256()
    seen = False
    for name in sorted(set(names)):
        argv = _command_graders.get(name)
        if argv is None:
            continue
        seen = True
        h.update(json.dumps([name, *argv]).encode())
        folders: set[Path] = set()
        for arg in argv:
            path = Path(arg) if os.path.isabs(arg) else (_command_root or Path.cwd()) / arg
            if path.is_file():
                h.update(_file_digest(path).encode())
                folders.add(path.parent)
        for folder in sorted(folders):
            for f in sorted(folder.iterdir()):
                if f.suffix in _GRADER_CODE and f.is_file():
                    h.update(f"{f.name}\0{_file_digest(f)}".encode())
    return h.hexdigest()[:16] if seen else ""


def _file_digest(path: Path) -> str:
    try:
        st = path.stat()
        return _digest_of(path, st.st_mtime_ns, st.st_size)
    except OSError:
        return "missing"


@functools.lru_cache(maxsize=1024)
def _digest_of(path: Path, mtime_ns: int, size: int) -> str:
    """sha256 of a file's bytes, once per version of it (its mtime and size)."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


class CommandConfig(GraderConfig):
    grader: str = Field(min_length=1)
    """A command grader declared in promptloop.toml."""
    timeout_s: float = Field(default=COMMAND_TIMEOUT_S, gt=0, le=3600)
    pass_threshold: float | None = None
    """Used when the command prints no `passed` (default 1.0)."""

    @field_validator("pass_threshold")
    @classmethod
    def _pass(cls, value: float | None) -> float | None:
        return _threshold(value)


class CommandFailed(Exception):
    def __init__(self, cause: str, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.cause = cause
        self.stderr = stderr


def _argv(argv: Sequence[str]) -> list[str]:
    root = _command_root
    if root is None:
        return list(argv)
    out = []
    for arg in argv:
        candidate = root / arg
        if arg and not os.path.isabs(arg) and not arg.startswith("-") and candidate.exists():
            out.append(str(candidate))
        else:
            out.append(arg)
    return out


def _env() -> dict[str, str]:
    env = {k: os.environ[k] for k in COMMAND_ENV if k in os.environ}
    if _command_root is not None:
        env["PROMPTLOOP_REPO"] = str(_command_root)
    return env


async def _read_capped(stream: asyncio.StreamReader | None, cap: int,
                       on_overflow: Callable[[], None] = lambda: None,
                       into: bytearray | None = None) -> tuple[bytes, bool]:
    """Up to `cap` bytes, and whether there was more. Reads on to the end (discarding), so
    the pipe closes and the process can be waited for; `on_overflow` runs once at the cap.
    `into` holds what was read so far (a pipe a process left behind holds open never ends)."""
    data = bytearray() if into is None else into
    over = False
    if stream is None:
        return b"", False
    while chunk := await stream.read(65536):
        if over:
            continue
        data += chunk
        if len(data) > cap:
            over = True
            on_overflow()
    return bytes(data[:cap]), over


EOF_GRACE_S = 2.0
"""How long a grading command's pipes may stay open after it exited (a process it left
running, outside its process group, holds them): what it printed by then is its output."""


def _kill(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _reap(proc: asyncio.subprocess.Process, readers: Sequence[asyncio.Future[Any]]) -> None:
    """Kill the command's process group and wait (briefly: a child that left the group may
    hold a pipe open) for it and its pipes."""
    if proc.returncode is None:
        _kill(proc)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(proc.wait(), *readers,
                                                  return_exceptions=True), 5)
    else:
        _kill(proc)  # what the command left in its group (its exit was already waited for)
    for reader in readers:
        reader.cancel()


async def run_command(argv: Sequence[str], payload: bytes, timeout_s: float,
                      cwd: Path) -> bytes:
    """Run a grading command; its stdout, or CommandFailed naming the cause."""
    try:
        proc, exited = await start(argv, cwd=cwd, env=_env())
    except OSError as error:
        raise CommandFailed("start", f"could not start {argv[0]!r}: {error}") from None
    printed, said = bytearray(), bytearray()
    out = asyncio.ensure_future(_read_capped(proc.stdout, COMMAND_OUTPUT_CAP,
                                             lambda: _kill(proc), printed))
    err = asyncio.ensure_future(_read_capped(proc.stderr, 64_000, into=said))

    async def talk() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(payload)
            await proc.stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.close()
        # the command's own exit ends it, not the end of its pipes: a process it left running
        # (a team's grader started `sleep`) holds them open, and the grade it had printed was
        # blamed as a timeout 30 s later, the sleep left running
        await exited.wait()
        _kill(proc)  # its process group: what it left running
        await asyncio.wait({out, err}, timeout=EOF_GRACE_S)

    try:
        await asyncio.wait_for(talk(), timeout_s)
    except TimeoutError:
        raise CommandFailed("timeout", f"timed out after {timeout_s:g} s") from None
    finally:
        await _reap(proc, (out, err))
    stdout, too_much = (out.result() if out.done() and not out.cancelled()
                        and out.exception() is None
                        else (bytes(printed[:COMMAND_OUTPUT_CAP]),
                              len(printed) > COMMAND_OUTPUT_CAP))
    tail = bytes(said).decode("utf-8", "replace")[-2000:].strip()
    if too_much:
        raise CommandFailed("output", f"printed more than {COMMAND_OUTPUT_CAP} bytes", tail)
    if proc.returncode != 0:
        raise CommandFailed("exit", f"exited with status {proc.returncode}", tail)
    return stdout


def parse_command_output(stdout: bytes) -> tuple[float, str, bool | None]:
    """(score, rationale, passed) from a grading command's output: one JSON object (or, after
    log lines, a JSON object as the last line)."""
    text = stdout.decode("utf-8", "replace").strip()
    if not text:
        raise CommandFailed("output", "printed nothing (expected a JSON object with a score)")
    data: Any = None
    for candidate in (text, text.splitlines()[-1]):
        try:
            data = json.loads(candidate)
            break
        except ValueError:
            continue
    else:
        raise CommandFailed("json", f"printed no JSON object: {clip(text, 200)!r}")
    if not isinstance(data, dict):
        raise CommandFailed("json", f"printed JSON that is not an object: {clip(text, 200)!r}")
    score = data.get("score")
    if "score" not in data:
        raise CommandFailed("score", "printed no 'score'")
    if isinstance(score, bool) or not isinstance(score, int | float) or not (
            math.isfinite(score) and 0.0 <= score <= 1.0):
        raise CommandFailed("score", f"'score' must be a number from 0 to 1, got {score!r}")
    rationale = data.get("rationale", "")
    if rationale is None:
        rationale = ""
    if not isinstance(rationale, str):
        raise CommandFailed("rationale", f"'rationale' must be a string, got "
                                         f"{type(rationale).__name__}")
    passed = data.get("passed")
    if passed is not None and not isinstance(passed, bool):
        raise CommandFailed("passed", f"'passed' must be true, false or absent, got {passed!r}")
    return float(score), rationale, passed


@register("command", kind="code", threshold=1.0, config=CommandConfig, agent=None)
async def command(ctx: GradeContext, config: CommandConfig) -> Score:
    """A grading command declared in promptloop.toml scores the outcome and transcript."""
    argv = _command_graders.get(config.grader)
    if argv is None:
        known = sorted(_command_graders)
        return null_score(
            "command",
            f"no command grader {config.grader!r} is declared in promptloop.toml."
            f"{did_you_mean(config.grader, known)} Declared: {', '.join(known) or 'none'}",
            error_type=COMMAND_ERROR, cause="unknown", command_grader=config.grader)
    payload = json.dumps({"task_id": ctx.task_id, "outcome": ctx.outcome,
                          "transcript": ctx.transcript.model_dump(mode="json")},
                         ensure_ascii=False, default=str).encode("utf-8")
    meta: dict[str, Any] = {"command_grader": config.grader}
    try:
        with tempfile.TemporaryDirectory(prefix="promptloop-grader-") as tmp:
            stdout = await run_command(_argv(argv), payload, config.timeout_s, Path(tmp))
        value, rationale, passed = parse_command_output(stdout)
    except CommandFailed as err:
        detail = f"command grader {config.grader!r} ({' '.join(argv)}) {err}"
        if err.stderr:
            detail += f"; stderr: {clip(err.stderr, 1000)}"
        return null_score("command", detail, error_type=COMMAND_ERROR, cause=err.cause,
                          **meta)
    threshold = 1.0 if config.pass_threshold is None else config.pass_threshold
    score = value_score("command", value, threshold,
                        rationale=rationale or f"{config.grader} scored {value:g}",
                        metadata=meta)
    return score if passed is None else score.model_copy(update={"passed": passed})


__all__ = [
    "CommandConfig",
    "JsonPathConfig",
    "JsonSchemaConfig",
    "RubricJudgeConfig",
    "command",
    "command_grader_digest",
    "command_graders",
    "json_path",
    "json_schema",
    "parse_path",
    "rubric_judge",
    "select",
    "set_command_graders",
]
