"""A prompt-sensitive scripted model for the Node.js action-items agent (examples/action-items),
for end-to-end tests that run it through the model gateway without a real model.

Like tests/policies.py, its behaviour depends on sentences in the system prompt, so an
optimizer gets real signal: it reads the meeting notes with a few regular expressions (owners
from "X will", "X to", "X: I'll", "@x please", "X asked Y to"; explicit dates such as
"March 27" always) and answers the agent's JSON. With the agent's own prompt it fails two
buckets, as a weak model would:

- `due_dates`: relative dates ("by Friday", "tomorrow", "next Monday", "end of the month") are
  left null unless the prompt contains DATE_RULE;
- `no_action_items`: notes with nothing to do get an invented follow-up item unless the prompt
  contains NONE_RULE.

HARMFUL_RULE is an over-broad rule: with it only @mentions count as action items, which
breaks `owner_extraction` and `multiple_items` (a gate must refuse it).

Register it for a test: `SCRIPTED_MODELS["action_items"] = action_items_model`, and the judge of
the suite's rubric_judge tasks: `SCRIPTED_MODELS["rubric"] = rubric_judge_model`.
"""

from __future__ import annotations

import calendar
import json
import re
from datetime import date, timedelta
from typing import Any

from promptloop.agents.llm.scripted import Request, ScriptedModel, reply
from promptloop.agents.llm.types import ModelResponse

DATE_RULE = "resolve relative dates"
"""A prompt containing this phrase (any case) makes relative due dates resolve."""
NONE_RULE = "return an empty list"
"""A prompt containing this phrase makes notes without tasks give no items."""
HARMFUL_RULE = "only @mentions are action items"
"""An over-broad rule: with it, only `@name please ...` lines give items."""

WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
NOT_PEOPLE = {"We", "It", "They", "Everyone", "Nobody", "Somebody", "This", "That", "He", "She",
              "QA", "Finance", "Decision", "Discussion"}
_NAME = r"[A-Z][a-z]+"
PATTERNS = [  # (regex, owner group or None), tried in order on each sentence
    (re.compile(rf"^(?P<o>{_NAME}): I'll (?P<t>.+)"), "o"),
    (re.compile(r"@(?P<o>[a-z]+) please (?P<t>.+)"), "o"),
    (re.compile(rf"\b{_NAME} asked (?P<o>{_NAME}) to (?P<t>.+)"), "o"),
    (re.compile(rf"\b(?P<o>{_NAME} and {_NAME}) will (?P<t>.+)"), "o"),
    (re.compile(rf"\b(?P<o>{_NAME}) will (?!be\b)(?P<t>.+)"), "o"),
    (re.compile(rf"\b(?P<o>{_NAME}) to (?P<t>[a-z].+)"), "o"),
    (re.compile(r"\bSomeone needs to (?P<t>[^,]+)"), None),
]
RECAP_LINE = re.compile(rf"^[-*]\s*(?P<o>{_NAME}): (?P<t>[a-z].+)")


def meeting(req: Request) -> tuple[date, str]:
    """(meeting date, notes) from the agent's user message."""
    text = next(m.content for m in req.messages if m.role == "user")
    found = re.search(r"Meeting date: (\d{4}-\d{2}-\d{2})", text)
    day = date.fromisoformat(found.group(1)) if found else date(2026, 3, 10)
    return day, text.split("Meeting notes:", 1)[-1].strip()


def due_date(text: str, day: date, relative: bool) -> str | None:
    lower = text.lower()
    explicit = re.search(r"\b(" + "|".join(MONTHS) + r") (\d{1,2})\b", lower)
    if explicit:
        return date(day.year, MONTHS[explicit.group(1)], int(explicit.group(2))).isoformat()
    if not relative:
        return None
    if "tomorrow" in lower:
        return (day + timedelta(days=1)).isoformat()
    if "end of the month" in lower or "end of month" in lower:
        last = calendar.monthrange(day.year, day.month)[1]
        return day.replace(day=last).isoformat()
    for i, name in enumerate(WEEKDAYS):
        if re.search(rf"\b{name}\b", lower):
            ahead = (i - day.weekday()) % 7 or 7
            return (day + timedelta(days=ahead)).isoformat()
    return None


def _task_text(text: str) -> str:
    text = re.sub(r"\s+(by|before)\s+.*$", "", text.strip().rstrip("."))
    text = re.sub(r"\s+(tomorrow|when .*|at some point)$", "", text)
    return text[:1].upper() + text[1:]


def _sentences(notes: str) -> list[tuple[str, bool]]:
    """(sentence, inside an action-item recap) pairs."""
    out: list[tuple[str, bool]] = []
    recap = False
    for line in notes.splitlines():
        if re.search(r"action items", line, re.I):
            recap = True
            continue
        line = re.sub(r"^\s*(?:\d+\.|[-*])\s*", "- " if recap else "", line.strip())
        out += [(s.strip(), recap) for s in re.split(r"(?<=\.)\s+(?=[A-Z@])", line) if s.strip()]
    return out


def extract(notes: str, day: date, system: str) -> list[dict[str, Any]]:
    relative = DATE_RULE in system
    items: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for sentence, recap in _sentences(notes):
        if "already" in sentence.lower() or sentence.lower().startswith("decision"):
            continue
        found = _match(sentence, recap, HARMFUL_RULE in system)
        if found is None:
            continue
        owner, text = found
        parts = re.split(r"\s+and also\s+", text)
        for part in parts:
            task = _task_text(part)
            key = (str(owner).lower(), " ".join(re.findall(r"\w+", task.lower())[:4]))
            if key in seen:
                continue
            seen.add(key)
            items.append({"task": task, "owner": owner,
                          "due": due_date(part if len(parts) > 1 else text, day, relative)})
    return items


def _match(sentence: str, recap: bool, mentions_only: bool) -> tuple[str | None, str] | None:
    if recap:
        m = RECAP_LINE.match(sentence)
        return (m.group("o"), m.group("t")) if m else None
    for pattern, group in PATTERNS:
        if mentions_only and "@" not in pattern.pattern:
            continue
        m = pattern.search(sentence)
        if m is None:
            continue
        owner = m.group(group) if group else None
        if owner is not None and owner.split()[0] in NOT_PEOPLE:
            continue
        return (owner.capitalize() if owner and owner.islower() else owner), m.group("t")
    return None


def action_items_policy(req: Request) -> ModelResponse:
    system = next((m.content for m in req.messages if m.role == "system"), "").lower()
    day, notes = meeting(req)
    items = extract(notes, day, system)
    if not items and NONE_RULE not in system:
        first = notes.splitlines()[0] if notes else "the meeting"
        items = [{"task": f"Follow up on {first}", "owner": None, "due": None}]
    summary = f"{notes.splitlines()[0] if notes else 'A meeting'}: {len(items)} action item(s)."
    return reply(json.dumps({"items": items, "summary": summary}), tokens=(200, 60))


def rubric_judge_policy(req: Request) -> ModelResponse:
    """Grades every dimension the rubric prompt lists 4 (of 5)."""
    prompt = req.messages[-1].content
    dims = re.findall(r"^- `([^`]+)`$", prompt, re.M)
    return reply(json.dumps({**dict.fromkeys(dims, 4), "rationale": "scripted judge"}))


def action_items_model() -> ScriptedModel:
    return ScriptedModel(action_items_policy, model_id="scripted:action_items")


def rubric_judge_model() -> ScriptedModel:
    return ScriptedModel(rubric_judge_policy, model_id="scripted:rubric")
