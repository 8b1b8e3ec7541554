"""Card Agent graders: completion, template choice, and substring checks on the saved card.

`card_must_contain` keeps the SPEC semantics (whole card YAML). Ours adds the visible-field
variants, because the whole YAML includes fact_id, timestamp and status, so a short expected
string like "7" can match the timestamp instead of anything the user sees (SPEC section 7).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from pydantic import Field

from graders.base import (
    Assertion,
    GradeContext,
    GraderConfig,
    Score,
    assertion_score,
    describe_failures,
    null_score,
)
from graders.registry import register


class NoConfig(GraderConfig):
    pass


class TemplateChoiceConfig(GraderConfig):
    expected_template_ids: list[str] = Field(min_length=1)


class SubstringsConfig(GraderConfig):
    substrings: list[str] = Field(min_length=1)


def template_ids(outcome: Mapping[str, Any]) -> list[str]:
    """Ordered template ids of the saved card (outcome key, else read from the card dict)."""
    ids = outcome.get("template_ids")
    if ids is None:
        configs = card_dict(outcome).get("ui_configs") or []
        ids = [c.get("template_id") for c in configs if isinstance(c, dict)]
    return [str(i) for i in ids if i]


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
    return needle.casefold() in haystack.casefold()


@register("card_completion", kind="code", threshold=1.0, config=NoConfig, agent="card_agent")
async def card_completion(ctx: GradeContext, config: NoConfig) -> Score:
    """The card was saved, completed, titled and configured, with no missing requirement."""
    o = ctx.outcome
    missing = list(o.get("missing_requirements") or [])
    assertions = [
        Assertion(
            description="save_timeline_card was called successfully",
            passed=bool(o.get("card_save_tool_called")),
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
    wanted = {t.strip().lower() for t in config.expected_template_ids}
    chosen = [t.strip().lower() for t in ids]
    assertions = [
        Assertion(
            description="the first template is an expected one",
            passed=bool(chosen) and chosen[0] in wanted,
            actual=ids[:1],
            expected=config.expected_template_ids,
        ),
        Assertion(
            description="some template is an expected one",
            passed=any(t in wanted for t in chosen),
            actual=ids,
            expected=config.expected_template_ids,
        ),
    ]
    rationale = "no template saved" if not ids else ""
    return assertion_score(
        "card_template_choice", assertions, 0.5, rationale, {"template_ids": ids}
    )


@register(
    "card_must_contain", kind="code", threshold=1.0, config=SubstringsConfig, agent="card_agent"
)
async def card_must_contain(ctx: GradeContext, config: SubstringsConfig) -> Score:
    """Each substring occurs in the saved card YAML (case-insensitive)."""
    blob = str(ctx.outcome.get("card_yaml_blob") or "")
    assertions = [
        Assertion(description=f"card YAML contains {s!r}", passed=_contains(blob, s), expected=s)
        for s in config.substrings
    ]
    return assertion_score("card_must_contain", assertions, 1.0)


@register(
    "card_visible_must_contain",
    kind="code",
    threshold=1.0,
    config=SubstringsConfig,
    agent="card_agent",
)
async def card_visible_must_contain(ctx: GradeContext, config: SubstringsConfig) -> Score:
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
    config=SubstringsConfig,
    agent="card_agent",
)
async def card_must_not_contain(ctx: GradeContext, config: SubstringsConfig) -> Score:
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
