"""Prompt-sensitive scripted agents: their behaviour depends on rules present in the system prompt.

They give the optimizer real signal in tests without any network: adding the right sentence to
the prompt changes what they do, exactly as it would (more noisily) for a real model.
"""

from __future__ import annotations

import re

from promptloop.agents.llm.scripted import Request, ScriptedModel, call, reply
from promptloop.agents.llm.types import ModelResponse

GOOD_SKIP_RULE = "only a greeting"
"""A prompt containing this phrase makes the PKM policy skip greetings/emoji (the good rule)."""
BROAD_SKIP_RULE = "fewer than 80 characters"
"""A prompt containing this phrase makes the PKM policy skip every short input (over-broad)."""

_TRIVIAL = {"hi", "hello", "hey", "ok", "thanks", "thanks!", "thx", "hi!", "ok 👍", "👍", "🙂"}


def raw_input(req: Request) -> tuple[str, str]:
    """(fact id, raw content) from the first user message."""
    first = req.messages[1].content
    fact = re.search(r"\(fact_id\)\s*:\s*(\S+)", first)
    content = first.split("Raw Input Content:", 1)[-1].strip()
    return (fact.group(1) if fact else ""), content


def is_trivial(content: str) -> bool:
    text = content.strip().lower()
    return text in _TRIVIAL or not re.search(r"\w", text)


def pkm_policy(req: Request) -> ModelResponse:
    system = req.messages[0].content.lower()
    fact_id, content = raw_input(req)
    done_tools = [m.tool_name for m in req.messages if m.role == "tool" and not m.is_error]
    if "update_timeline_card_insight" in done_tools or "skip_pkm_organization" in done_tools:
        return reply("Done.")
    skip = (GOOD_SKIP_RULE in system and is_trivial(content)) or (
        BROAD_SKIP_RULE in system and len(content) < 80
    )
    if skip:
        return reply("", call("skip_pkm_organization", evidence=f"trivial input: {content!r}"))
    if "Write" not in done_tools:
        slug = re.sub(r"[^a-z0-9]+", "-", content.lower())[:24].strip("-") or "note"
        return reply(
            "",
            call(
                "Write",
                file_path=f"/Resources/{slug}.md",
                content=f"# Note\n\n- {content} <!-- fact_id: {fact_id} -->\n",
            ),
        )
    return reply(
        "",
        call(
            "update_timeline_card_insight",
            fact_id=fact_id,
            insight_text="This adds to what you noted before.",
        ),
    )


def card_policy(req: Request) -> ModelResponse:
    fact_id, content = raw_input(req)
    if any(m.role == "tool" and not m.is_error for m in req.messages):
        return reply("Saved.")
    url = re.search(r"https?://\S+", content)
    money = re.search(r"[$€£¥]\s?\d+(?:[.,]\d+)?|\d+(?:\.\d+)?\s?(?:USD|EUR|元)", content)
    if url:
        config = {"template_id": "link", "data": {"url": url.group(0)}}
    elif money:
        config = {
            "template_id": "transaction",
            "data": {"merchant": content.split()[0], "amount": money.group(0)},
        }
    else:
        config = {"template_id": "snippet", "data": {"text": content or "(empty)"}}
    title = " ".join(content.split()[:6]) or "Note"
    return reply("", call("save_timeline_card", fact_id=fact_id, title=title, ui_configs=[config]))


def judge_policy(_req: Request) -> ModelResponse:
    return reply(
        '{"groundedness": 0.8, "non_redundancy": 0.7, "expression_quality": 0.9, '
        '"coherence": 0.8, "voice": 0.8, "formatting": 0.8, "structure": 0.8, '
        '"rationale": "fine"}'
    )


def pkm_model() -> ScriptedModel:
    return ScriptedModel(pkm_policy, model_id="scripted:pkm")


def card_model() -> ScriptedModel:
    return ScriptedModel(card_policy, model_id="scripted:card")


def judge_model() -> ScriptedModel:
    return ScriptedModel(judge_policy, model_id="scripted:judge")
