"""LLM-judge graders for the PKM Agent: insight quality and append coherence.

The defaults reproduce the original harness (docs/compat.md): `pkm_insight_quality`
shows the judge the fact, the insight and the target paths; `pkm_append_coherence` judges the
first successful Edit from its old_string and new_string on one dimension, `coherence`. Ours
are additive graders: `pkm_insight_quality_plus` also shows the files the agent wrote and what
it read; `pkm_append_coherence_plus` judges Write-based appends too, against the whole original
file, on voice, formatting and structure. All share the reply parsing of docs/compat.md.

The rubrics live in prompts/judges/*.md and are read at grading time, so they can be tuned
without code changes. Placeholders are `{{name}}` markers filled in a single pass (never
str.format: the inputs are user notes and JSON, full of braces). The judge answers in JSON
with one key per dimension (a number in [0, 1] or "unknown") plus a short `rationale`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from promptloop.agents.base import PROMPTS_DIR
from promptloop.agents.llm.types import Message, ModelSettings
from promptloop.agents.placeholders import render
from promptloop.agents.transcript import ToolCallRecord
from promptloop.graders.appends import find_append, first_edit
from promptloop.graders.base import (
    Assertion,
    GradeContext,
    GraderConfig,
    Score,
    changed_paths,
    file_contents,
    null_score,
    pkm_relative,
    value_score,
)
from promptloop.graders.registry import register

JUDGES_DIR = PROMPTS_DIR / "judges"
INSIGHT_DIMS = ("groundedness", "non_redundancy", "expression_quality")
COHERENCE_DIMS = ("coherence",)
COHERENCE_PLUS_DIMS = ("voice", "formatting", "structure")
JUDGE_THRESHOLD = 0.6
NO_JUDGE = "no judge model configured"
CONSULT_TOOLS = ("Read", "BatchRead", "Grep", "Glob", "LS")
WRITE_TOOLS = ("Write", "Edit")

_FENCE = re.compile(r"```(.*?)```", re.DOTALL)
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Infinity")
"""Numeric strings a judge may send (Dart's double.parse without NaN): "0.7", "1e0", "Infinity"."""


class NoConfig(GraderConfig):
    pass


# --- rubric loading and rendering ---------------------------------------------------------


def load_rubric(name: str, judges_dir: Path | None = None) -> str:
    return ((judges_dir or JUDGES_DIR) / f"{name}.md").read_text(encoding="utf-8")


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


# --- reply parsing (docs/compat.md, "Judge replies") -------------------------------------


class _NonFinite(ValueError):
    pass


def _reject_constant(token: str) -> float:
    raise _NonFinite(f"{token} is not JSON")


def reply_json_text(text: str) -> str | None:
    """The part of a reply that is parsed: the first code fence's body if the reply has a
    fence (a ``` ... ``` pair), else the whole reply; then its first `{` to its last `}`."""
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    start, end = body.find("{"), body.rfind("}")
    if start == -1 or end < start:
        return None
    return body[start : end + 1]


def parse_judge_json(text: str) -> dict[str, Any] | None:
    """The reply's JSON object, strictly parsed (NaN/Infinity literals rejected), or None."""
    candidate = reply_json_text(text)
    if candidate is None:
        return None
    try:
        data = json.loads(candidate, parse_constant=_reject_constant)
    except ValueError:  # JSONDecodeError and _NonFinite
        return None
    return data if isinstance(data, dict) else None


def dimension_value(raw: Any) -> float | None:
    """A number or numeric string ("0.7", "Infinity") clamped to [0, 1]; None (unknown) for
    anything else: "unknown", other strings, null, booleans, NaN, lists and objects."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, str):
        text = raw.strip()
        if not _NUMBER.fullmatch(text):
            return None
        raw = float(text)
    if not isinstance(raw, int | float) or (isinstance(raw, float) and math.isnan(raw)):
        return None
    return float(min(1, max(0, raw)))  # clamp before float(): a huge JSON int overflows


def parse_dimensions(data: Mapping[str, Any], dims: Sequence[str]) -> dict[str, float | None]:
    """dimension -> value; None for a missing or unknown dimension."""
    return {d: dimension_value(data.get(d)) for d in dims}


def judged_score(
    name: str, dims: Sequence[str], reply: str, model_id: str, metadata: Mapping[str, Any]
) -> Score:
    """Turn a judge reply into a score: the mean of the known dimensions, passed at 0.6.
    Null when the reply is unparseable (no JSON object, invalid JSON, a non-string
    `rationale`) or no dimension is known."""
    meta = {**metadata, "judge_model": model_id, "judge_reply": clip(reply, 2000)}
    data = parse_judge_json(reply)
    if data is None:
        return null_score(
            name,
            "judge reply was not JSON: no valid JSON object in its first code fence or "
            "between its first '{' and last '}'",
            **meta,
        )
    judge_rationale = data.get("rationale")
    if judge_rationale is not None and not isinstance(judge_rationale, str):
        kind = type(judge_rationale).__name__
        return null_score(name, f"judge reply was unparseable: `rationale` is a {kind}", **meta)
    values = parse_dimensions(data, dims)
    meta["dimensions"] = values
    summary = ", ".join(f"{d}={'unknown' if v is None else f'{v:.2f}'}" for d, v in values.items())
    known = {d: v for d, v in values.items() if v is not None}
    if not known:
        return null_score(name, f"judge could not decide any dimension ({summary})", **meta)
    value = sum(known.values()) / len(known)
    assertions = [
        Assertion(description=f"{d} >= {JUDGE_THRESHOLD}", passed=v >= JUDGE_THRESHOLD, actual=v)
        for d, v in known.items()
    ]
    note = (judge_rationale or "").strip()
    rationale = f"{summary}; {clip(note, 1000)}" if note else summary
    score = value_score(name, value, JUDGE_THRESHOLD, assertions, rationale, meta)
    # the original compares the judge's mean with a plain `>=`: 0.5999999999 fails at 0.6
    return score.model_copy(update={"passed": value >= JUDGE_THRESHOLD})


async def ask_judge(ctx: GradeContext, prompt: str) -> tuple[str, str, dict[str, int]]:
    """Send the rendered rubric to the judge; returns (reply text, model id, token usage).
    The model id is the one the run names (`openai:gpt-4.1-mini`), not the name the provider
    answers with (`gpt-4.1-mini-2025-04-14`): calibration and run pages compare the two."""
    assert ctx.judge is not None
    settings: ModelSettings = ctx.judge_settings
    if settings.temperature is None:
        settings = settings.model_copy(update={"temperature": 0.0})
    response = await ctx.judge.complete([Message.user(prompt)], settings=settings)
    usage = response.usage.model_dump()
    return response.text, ctx.judge.model_id or response.model, usage


# --- graders ------------------------------------------------------------------------------


def _insight_or_score(ctx: GradeContext, name: str) -> ToolCallRecord | Score:
    """The last successful insight call, or the score when there is nothing to judge:
    null if skipped, 0.0 without a successful call or with empty or blank insight text."""
    if ctx.outcome.get("skipped_pkm"):
        return null_score(name, "the agent skipped PKM organisation; no insight to judge")
    calls = ctx.transcript.successful_calls("update_timeline_card_insight")
    if not calls:
        missing = Assertion(description="called update_timeline_card_insight", passed=False)
        return value_score(
            name, 0.0, JUDGE_THRESHOLD, [missing], "no successful update_timeline_card_insight call"
        )
    last = calls[-1]
    text = str(last.arguments.get("insight_text") or "")
    if not text.strip():  # the original fails blank text as it fails empty text
        empty = Assertion(description="insight text is not blank", passed=False, actual=text)
        return value_score(name, 0.0, JUDGE_THRESHOLD, [empty], "the insight text is empty")
    if ctx.judge is None:
        return null_score(name, NO_JUDGE)
    return last


def _target_paths(ctx: GradeContext) -> str:
    """The files the agent wrote or edited successfully, in order, as virtual paths."""
    paths: list[str] = []
    for call in ctx.transcript.successful_calls(*WRITE_TOOLS):
        path = "/" + pkm_relative(str(call.arguments.get("file_path", "")))
        if path not in paths:
            paths.append(path)
    return "\n".join(f"- {p}" for p in paths) if paths else "(none: the agent wrote no file)"


def _written_files(ctx: GradeContext, each: int = 3000, total: int = 12000) -> str:
    created, modified = changed_paths(ctx.outcome)
    files = file_contents(ctx.outcome)
    blocks = []
    for status, paths in (("created", created), ("modified", modified)):
        for path in paths:
            text = clip(files.get(path, ""), each)
            blocks.append(f'<file path="{path}" status="{status}">\n{text}\n</file>')
    return clip("\n".join(blocks), total) if blocks else "(the agent changed no file)"


def _consulted(ctx: GradeContext, each: int = 1500, total: int = 8000) -> str:
    blocks = []
    for call in ctx.transcript.successful_calls(*CONSULT_TOOLS):
        args = clip(json.dumps(call.arguments, ensure_ascii=False), 200)
        blocks.append(
            f'<tool_result tool="{call.tool_name}" arguments={args}>\n'
            f"{clip(call.result, each)}\n</tool_result>"
        )
    return clip("\n".join(blocks), total) if blocks else "(the agent read nothing)"


@register(
    "pkm_insight_quality",
    kind="model",
    threshold=JUDGE_THRESHOLD,
    config=NoConfig,
    agent="pkm_agent",
)
async def pkm_insight_quality(ctx: GradeContext, config: NoConfig) -> Score:
    """Judge the card insight from the fact, the insight and the target paths (original)."""
    return await _judge_insight(
        ctx, "pkm_insight_quality", "insight_quality",
        lambda _call: {"target_paths": _target_paths(ctx)})


async def _judge_insight(
    ctx: GradeContext, name: str, rubric: str,
    extra: Callable[[ToolCallRecord], dict[str, str]],
) -> Score:
    """Ask the judge about the card insight the agent saved, with the rubric's own variables
    (`extra(call)` adds them from the insight tool call); a null score when none was saved."""
    found = _insight_or_score(ctx, name)
    if isinstance(found, Score):
        return found
    insight = str(found.arguments.get("insight_text"))
    prompt = render(
        load_rubric(rubric),
        {
            "fact_id": ctx.fact_id or "",
            "input": ctx.input_content or "(empty input)",
            "insight": insight,
            **extra(found),
        },
    )
    reply, model_id, usage = await ask_judge(ctx, prompt)
    return judged_score(name, INSIGHT_DIMS, reply, model_id, {"insight": insight, "usage": usage})


@register(
    "pkm_insight_quality_plus",
    kind="model",
    threshold=JUDGE_THRESHOLD,
    config=NoConfig,
    agent="pkm_agent",
)
async def pkm_insight_quality_plus(ctx: GradeContext, config: NoConfig) -> Score:
    """Judge the card insight also against the files the agent wrote and what it read."""
    return await _judge_insight(
        ctx, "pkm_insight_quality_plus", "insight_quality_plus",
        lambda call: {
            "related_facts": ", ".join(map(str, call.arguments.get("related_fact_ids") or []))
            or "(none)",
            "written_files": _written_files(ctx),
            "consulted": _consulted(ctx),
        })


@register(
    "pkm_append_coherence",
    kind="model",
    threshold=JUDGE_THRESHOLD,
    config=NoConfig,
    agent="pkm_agent",
)
async def pkm_append_coherence(ctx: GradeContext, config: NoConfig) -> Score:
    """Judge whether the first Edit's new text fits the text it replaced (original)."""

    def find() -> _Append | str:
        before = (file_contents(ctx.outcome, "file_contents_before")
                  if "file_contents_before" in ctx.outcome else None)
        pick = first_edit(ctx.transcript.successful_calls(), before)
        case = pick.case
        if case is None:
            return f"nothing to judge: {pick.reason}"
        return _Append(case.path, "Edit", case.new_string, {
            "path": case.path, "old_string": clip(case.old_string, 100_000),
            "new_string": clip(case.new_string, 100_000)})

    return await _judge_append(ctx, "pkm_append_coherence", "append_coherence",
                               COHERENCE_DIMS, find)


@dataclass(frozen=True)
class _Append:
    """What an append-coherence judge judges: the file, the tool, the new text and the
    rubric's own variables."""

    path: str
    tool: str
    new_text: str
    variables: dict[str, str]


async def _judge_append(ctx: GradeContext, name: str, rubric: str, dims: Sequence[str],
                        find: Callable[[], _Append | str]) -> Score:
    """The skeleton both append-coherence judges share: null when the agent skipped, null
    with `find`'s reason when there is nothing to judge, else ask the judge with the rubric."""
    if ctx.outcome.get("skipped_pkm"):
        return null_score(name, "the agent skipped PKM organisation; nothing was appended")
    found = find()
    if isinstance(found, str):
        return null_score(name, found)
    if ctx.judge is None:
        return null_score(name, NO_JUDGE)
    prompt = render(load_rubric(rubric), {**found.variables, "fact_id": ctx.fact_id or ""})
    reply, model_id, usage = await ask_judge(ctx, prompt)
    meta = {"path": found.path, "tool": found.tool, "new_text": clip(found.new_text, 2000),
            "usage": usage}
    return judged_score(name, dims, reply, model_id, meta)


@register(
    "pkm_append_coherence_plus",
    kind="model",
    threshold=JUDGE_THRESHOLD,
    config=NoConfig,
    agent="pkm_agent",
)
async def pkm_append_coherence_plus(ctx: GradeContext, config: NoConfig) -> Score:
    """Judge text added to an existing file (Edit or Write) against the whole original file."""

    def find() -> _Append | str:
        if "file_contents_before" not in ctx.outcome:
            raise ValueError("the outcome has no file_contents_before; "
                             "cannot tell new from old files")
        before = file_contents(ctx.outcome, "file_contents_before")
        search = find_append(ctx.transcript.successful_calls(), before)
        case = search.case
        if case is None:
            notes = "; ".join(search.notes) or "no successful Write/Edit"
            return f"no Edit or Write-append to a file that existed before the run ({notes})"
        return _Append(case.path, case.tool, case.new_text, {
            "path": case.path, "original": clip(case.original, 100_000),
            "change": case.describe_change()})

    return await _judge_append(ctx, "pkm_append_coherence_plus", "append_coherence_plus",
                               COHERENCE_PLUS_DIMS, find)
