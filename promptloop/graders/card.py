"""Card Agent graders: completion, template choice, and substring checks on the saved card.

`card_completion`, `card_template_choice` and `card_must_contain` score exactly as the original
(docs/compat.md): template ids compared exactly, `str.lower` on both sides of the
substring test, an empty expected list scores 0.0. Ours are additive graders a suite opts in to:
the visible-field variants, because the whole YAML includes fact_id, timestamp and status, so a
short expected string like "7" can match the timestamp instead of anything the user sees (SPEC
section 7), and `card_template_data_valid`, our stricter template data checks.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from pydantic import Field

from promptloop.agents.card.templates import TEMPLATES, validate_data
from promptloop.graders.base import (
    Assertion,
    GradeContext,
    GraderConfig,
    Score,
    assertion_score,
    describe_failures,
    null_score,
    value_score,
)
from promptloop.graders.registry import register


class NoConfig(GraderConfig):
    pass


class TemplateChoiceConfig(GraderConfig):
    expected_template_ids: list[str]
    """An empty list loads and scores 0.0 (docs/compat.md)."""


class SubstringsConfig(GraderConfig):
    substrings: list[Any]
    """An empty list loads and scores 0.0 (docs/compat.md); a non-string entry (7, true) is
    stringified as the original does (`original_str`)."""


class VisibleSubstringsConfig(GraderConfig):
    """Our graders' substrings: at least one, since an empty check is a suite mistake."""

    substrings: list[str] = Field(min_length=1)


def template_ids(outcome: Mapping[str, Any]) -> list[Any]:
    """The outcome's ordered `template_ids`, as captured (the only key the original reads)."""
    ids = outcome.get("template_ids")
    return list(ids) if isinstance(ids, list | tuple) else []


def card_dict(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The parsed card: the outcome's `card`, else parsed from `card_yaml_blob`."""
    card = outcome.get("card")
    if isinstance(card, dict):
        return card
    blob = outcome.get("card_yaml_blob")
    if not blob:
        return {}
    parsed = yaml.safe_load(blob)
    return parsed if isinstance(parsed, dict) else {}


def _leaf_texts(value: Any) -> Iterator[str]:
    """Every scalar value (not key) inside nested data, as text."""
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaf_texts(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaf_texts(item)
    elif value is not None:
        yield str(value)


def visible_card_fields(card: Mapping[str, Any]) -> list[str]:
    """What the user sees of a card: title, ui_configs data values, address, tag names."""
    texts: list[str] = []
    if card.get("title"):
        texts.append(str(card["title"]))
    for config in card.get("ui_configs") or []:
        if isinstance(config, dict):
            texts.extend(_leaf_texts(config.get("data")))
    if card.get("address"):
        texts.extend(_leaf_texts(card["address"]))
    for tag in card.get("tags") or []:
        name = tag.get("name") if isinstance(tag, dict) else tag
        if name:
            texts.append(str(name))
    return texts


def _contains(haystack: str, needle: str) -> bool:
    """Ours (visible-field graders): Unicode case folding, so "STRASSE" finds "straße"."""
    return needle.casefold() in haystack.casefold()


def original_str(value: Any) -> str:
    """A config value as the original's string conversion writes it: strings as they are,
    true/false/null in lower case, numbers and lists as JSON (`7`, `7.5`, `[1, 2]`)."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


@register("card_completion", kind="code", threshold=1.0, config=NoConfig, agent="card_agent")
async def card_completion(ctx: GradeContext, config: NoConfig) -> Score:
    """The card was saved, completed, titled and configured, with no missing requirement."""
    o = ctx.outcome
    missing = list(o.get("missing_requirements") or [])
    assertions = [
        Assertion(
            description="save_timeline_card was called successfully",
            # the original compares with `== true`: the string 'true' is not a call
            passed=o.get("card_save_tool_called") is True,
            actual=o.get("card_save_tool_called"),
            expected=True,
        ),
        Assertion(
            description="card status is completed",
            passed=o.get("status") == "completed",
            actual=o.get("status"),
            expected="completed",
        ),
        Assertion(description="card has a title", passed=bool(o.get("has_title"))),
        Assertion(description="card has ui_configs", passed=bool(o.get("has_ui_configs"))),
        Assertion(
            description="run is complete with no missing requirements",
            passed=bool(o.get("is_complete")) and not missing,
            actual=missing,
            expected=[],
        ),
    ]
    reason = o.get("failure_reason")
    rationale = ""
    if reason and not all(a.passed for a in assertions):
        rationale = f"{describe_failures(assertions)}; failure_reason: {reason}"
    return assertion_score("card_completion", assertions, 1.0, rationale)


@register(
    "card_template_choice",
    kind="code",
    threshold=0.5,
    config=TemplateChoiceConfig,
    agent="card_agent",
)
async def card_template_choice(ctx: GradeContext, config: TemplateChoiceConfig) -> Score:
    """1.0 when the first template is expected, 0.5 when only a later one is, else 0.0."""
    ids = template_ids(ctx.outcome)
    wanted = config.expected_template_ids
    assertions = [
        Assertion(
            description="the first template is an expected one",
            passed=bool(ids) and ids[0] in wanted,
            actual=ids[:1],
            expected=wanted,
        ),
        Assertion(
            description="some template is an expected one",
            passed=any(t in wanted for t in ids),
            actual=ids,
            expected=wanted,
        ),
    ]
    rationale = ""
    if not wanted:
        rationale = "no expected_template_ids configured"
    elif not ids:
        rationale = "no template saved"
    return assertion_score(
        "card_template_choice", assertions, 0.5, rationale, {"template_ids": ids}
    )


@register(
    "card_must_contain", kind="code", threshold=1.0, config=SubstringsConfig, agent="card_agent"
)
async def card_must_contain(ctx: GradeContext, config: SubstringsConfig) -> Score:
    """Each substring occurs in the saved card YAML (both sides lower-cased)."""
    if not config.substrings:
        return value_score("card_must_contain", 0.0, 1.0, rationale="no substrings configured")
    blob = str(ctx.outcome.get("card_yaml_blob") or "").lower()
    wanted = [original_str(s) for s in config.substrings]
    assertions = [
        Assertion(
            description=f"card YAML contains {s!r}", passed=s.lower() in blob, expected=s
        )
        for s in wanted
    ]
    return assertion_score("card_must_contain", assertions, 1.0)


@register(
    "card_visible_must_contain",
    kind="code",
    threshold=1.0,
    config=VisibleSubstringsConfig,
    agent="card_agent",
)
async def card_visible_must_contain(ctx: GradeContext, config: VisibleSubstringsConfig) -> Score:
    """Each substring occurs in a user-visible card field (case-insensitive)."""
    fields = visible_card_fields(card_dict(ctx.outcome))
    text = "\n".join(fields)
    assertions = [
        Assertion(
            description=f"visible card fields contain {s!r}", passed=_contains(text, s), expected=s
        )
        for s in config.substrings
    ]
    return assertion_score(
        "card_visible_must_contain", assertions, 1.0, metadata={"visible_fields": fields}
    )


@register(
    "card_must_not_contain",
    kind="code",
    threshold=1.0,
    config=VisibleSubstringsConfig,
    agent="card_agent",
)
async def card_must_not_contain(ctx: GradeContext, config: VisibleSubstringsConfig) -> Score:
    """No substring occurs in a user-visible card field; null when no card was saved."""
    if not ctx.outcome.get("card_save_tool_called"):
        return null_score("card_must_not_contain", "no card was saved, nothing to check")
    fields = visible_card_fields(card_dict(ctx.outcome))
    text = "\n".join(fields)
    assertions = []
    for s in config.substrings:
        hits = [f for f in fields if _contains(f, s)]
        assertions.append(
            Assertion(
                description=f"visible card fields do not contain {s!r}",
                passed=not _contains(text, s),
                actual=hits or None,
            )
        )
    return assertion_score(
        "card_must_not_contain", assertions, 1.0, metadata={"visible_fields": fields}
    )


@register(
    "card_template_data_valid",
    kind="code",
    threshold=1.0,
    config=NoConfig,
    agent="card_agent",
)
async def card_template_data_valid(ctx: GradeContext, config: NoConfig) -> Score:
    """Every saved ui_config passes our strict template data checks; null without a card."""
    configs = card_dict(ctx.outcome).get("ui_configs")
    if not isinstance(configs, list) or not configs:
        return null_score("card_template_data_valid", "no ui_configs saved, nothing to check")
    assertions = []
    for index, item in enumerate(configs):
        template_id = item.get("template_id") if isinstance(item, dict) else None
        if not isinstance(template_id, str) or template_id not in TEMPLATES:
            problems = [f"unknown template_id {template_id!r}"]
        else:
            problems = validate_data(template_id, item.get("data"), strict=True)
        assertions.append(
            Assertion(
                description=f"ui_configs[{index}] ({template_id}) data passes the strict checks",
                passed=not problems,
                actual=problems or None,
            )
        )
    return assertion_score("card_template_data_valid", assertions, 1.0)
