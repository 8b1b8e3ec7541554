"""LLM-judge graders for the PKM Agent: insight quality and append coherence.

The rubrics live in prompts/judges/*.md and are read at grading time, so they can be tuned
without code changes. Placeholders are `{{name}}` markers filled in a single pass (never
str.format: the inputs are user notes and JSON, full of braces). The judge answers in JSON
with one key per dimension (a number in [0, 1] or "unknown") plus a short `rationale`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agents.base import PROMPTS_DIR
from agents.llm.types import Message, ModelSettings
from graders.appends import find_append
from graders.base import (
    Assertion,
    GradeContext,
    GraderConfig,
    Score,
    changed_paths,
    file_contents,
    null_score,
    value_score,
)
from graders.registry import register

JUDGES_DIR = PROMPTS_DIR / "judges"
INSIGHT_DIMS = ("groundedness", "non_redundancy", "expression_quality")
COHERENCE_DIMS = ("voice", "formatting", "structure")
JUDGE_THRESHOLD = 0.6
NO_JUDGE = "no judge model configured"
CONSULT_TOOLS = ("Read", "BatchRead", "Grep", "Glob", "LS")

_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_]\w*)\s*\}\}")
_FENCE = re.compile(r"```[A-Za-z]*[ \t]*\n?(.*?)```", re.DOTALL)


class NoConfig(GraderConfig):
    pass


# --- rubric loading and rendering ---------------------------------------------------------


def load_rubric(name: str, judges_dir: Path | None = None) -> str:
    return ((judges_dir or JUDGES_DIR) / f"{name}.md").read_text(encoding="utf-8")


def render(template: str, values: Mapping[str, str]) -> str:
    """Fill `{{name}}` markers in one pass, so text inside a value is never re-substituted.
    A marker without a value, or a value without a marker, is a rubric bug and raises."""
    found = set(_PLACEHOLDER.findall(template))
    unknown = found - set(values)
    unused = set(values) - found
    if unknown or unused:
        raise ValueError(
            f"rubric placeholders do not match: unknown {sorted(unknown)}, unused {sorted(unused)}"
        )
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


def clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


# --- reply parsing ------------------------------------------------------------------------


def _first_object(text: str) -> dict[str, Any] | None:
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, _ = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            return obj
        start = text.find("{", start + 1)
    return None


def parse_judge_json(text: str) -> dict[str, Any] | None:
    """The first JSON object of the reply, looked for inside a code fence first."""
    fence = _FENCE.search(text)
    if fence:
        found = _first_object(fence.group(1))
        if found is not None:
            return found
    return _first_object(text)


def dimension_value(raw: Any) -> float | None:
    """A number clamped to [0, 1]; None for "unknown" or anything that is not a number."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, str):
        try:
            raw = float(raw.strip())
        except ValueError:
            return None
    if not isinstance(raw, int | float) or not math.isfinite(raw):
        return None
    return min(1.0, max(0.0, float(raw)))


def parse_dimensions(
    data: Mapping[str, Any], dims: Sequence[str]
) -> dict[str, float | None] | None:
    """dimension -> value (None = unknown), or None when no dimension key is present."""
    if not any(d in data for d in dims):
        return None
    return {d: dimension_value(data.get(d)) for d in dims}


def judged_score(
    name: str, dims: Sequence[str], reply: str, model_id: str, metadata: Mapping[str, Any]
) -> Score:
    """Turn a judge reply into a score: mean of the known dimensions; null if unparseable."""
    meta = {**metadata, "judge_model": model_id, "judge_reply": clip(reply, 2000)}
    data = parse_judge_json(reply)
    values = parse_dimensions(data, dims) if data is not None else None
    if data is None or values is None:
        return null_score(name, f"judge reply was not JSON with the keys {', '.join(dims)}", **meta)
    known = {d: v for d, v in values.items() if v is not None}
    judge_rationale = str(data.get("rationale", "")).strip()
    summary = ", ".join(f"{d}={'unknown' if v is None else f'{v:.2f}'}" for d, v in values.items())
    meta["dimensions"] = values
    if not known:
        return null_score(name, f"judge could not decide any dimension ({summary})", **meta)
    value = sum(known.values()) / len(known)
    assertions = [
        Assertion(description=f"{d} >= {JUDGE_THRESHOLD}", passed=v >= JUDGE_THRESHOLD, actual=v)
        for d, v in known.items()
    ]
    rationale = f"{summary}; {clip(judge_rationale, 1000)}" if judge_rationale else summary
    return value_score(name, value, JUDGE_THRESHOLD, assertions, rationale, meta)


async def ask_judge(ctx: GradeContext, prompt: str) -> tuple[str, str, dict[str, int]]:
    """Send the rendered rubric to the judge; returns (reply text, model id, token usage)."""
    assert ctx.judge is not None
    settings: ModelSettings = ctx.judge_settings
    if settings.temperature is None:
        settings = settings.model_copy(update={"temperature": 0.0})
    response = await ctx.judge.complete([Message.user(prompt)], settings=settings)
    usage = response.usage.model_dump()
    return response.text, response.model or ctx.judge.model_id, usage


# --- graders ------------------------------------------------------------------------------


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
    """Judge the card insight: groundedness, non-redundancy, expression quality."""
    name = "pkm_insight_quality"
    if ctx.outcome.get("skipped_pkm"):
        return null_score(name, "the agent skipped PKM organisation; no insight to judge")
    calls = ctx.transcript.successful_calls("update_timeline_card_insight")
    if not calls:
        missing = Assertion(description="called update_timeline_card_insight", passed=False)
        return value_score(
            name, 0.0, JUDGE_THRESHOLD, [missing], "no successful update_timeline_card_insight call"
        )
    if ctx.judge is None:
        return null_score(name, NO_JUDGE)
    last = calls[-1]
    insight = str(last.arguments.get("insight_text", ""))
    related = last.arguments.get("related_fact_ids") or []
    prompt = render(
        load_rubric("insight_quality"),
        {
            "fact_id": ctx.fact_id,
            "input": ctx.input_content or "(empty input)",
            "insight": insight,
            "related_facts": ", ".join(map(str, related)) or "(none)",
            "written_files": _written_files(ctx),
            "consulted": _consulted(ctx),
        },
    )
    reply, model_id, usage = await ask_judge(ctx, prompt)
    return judged_score(name, INSIGHT_DIMS, reply, model_id, {"insight": insight, "usage": usage})


@register(
    "pkm_append_coherence",
    kind="model",
    threshold=JUDGE_THRESHOLD,
    config=NoConfig,
    agent="pkm_agent",
)
async def pkm_append_coherence(ctx: GradeContext, config: NoConfig) -> Score:
    """Judge whether text added to an existing file matches its voice, format and structure."""
    name = "pkm_append_coherence"
    if ctx.outcome.get("skipped_pkm"):
        return null_score(name, "the agent skipped PKM organisation; nothing was appended")
    if "file_contents_before" not in ctx.outcome:
        raise ValueError("the outcome has no file_contents_before; cannot tell new from old files")
    before = file_contents(ctx.outcome, "file_contents_before")
    search = find_append(ctx.transcript.successful_calls(), before)
    case = search.case
    if case is None:
        notes = "; ".join(search.notes) or "no successful Write/Edit"
        return null_score(
            name, f"no Edit or Write-append to a file that existed before the run ({notes})"
        )
    if ctx.judge is None:
        return null_score(name, NO_JUDGE)
    prompt = render(
        load_rubric("append_coherence"),
        {
            "path": case.path,
            "original": clip(case.original, 100_000),
            "change": case.describe_change(),
            "fact_id": ctx.fact_id,
        },
    )
    reply, model_id, usage = await ask_judge(ctx, prompt)
    meta = {"path": case.path, "tool": case.tool, "new_text": clip(case.new_text, 2000),
            "usage": usage}
    return judged_score(name, COHERENCE_DIMS, reply, model_id, meta)
