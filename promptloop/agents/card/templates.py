"""The 22 card templates, their data fields (docs/compat.md) and how the save tool checks them.

Default checks are the original's (docs/compat.md): type checks only. Strings are strings,
numbers are numbers, lists are lists, list items and optional fields are type-checked, and only
url, body, text, content, image_url and video_url must be non-blank. `strict=True` adds ours:
every required string non-blank, hex colours, ISO-8601 start times, non-empty lists and
non-negative durations. Validation never converts the data: the card keeps what the model sent.
Unknown extra fields are allowed (optional display data).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

HEX_RE = re.compile(r"^#?(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")
NON_BLANK_FIELDS = frozenset({"url", "body", "text", "content", "image_url", "video_url"})
"""Required string fields that must not be blank, even by default (docs/compat.md)."""

Kind = Literal["text", "number", "seconds", "list", "objects"]
StrictCheck = Literal["", "hex", "iso", "urls"]


def describe(value: Any) -> str:
    """A short type-and-value description for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {shown!r}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@dataclass(frozen=True)
class FieldSpec:
    """One data field: its type, whether it is required, and ours-only strict checks."""

    name: str
    kind: Kind = "text"
    required: bool = True
    items: Kind | None = None
    """Type of each item of a `list` field (None: any)."""
    fields: tuple[FieldSpec, ...] = ()
    """Fields of each object of an `objects` field."""
    strict: StrictCheck = ""


def _req(name: str, kind: Kind = "text", **kw: Any) -> FieldSpec:
    return FieldSpec(name, kind, True, **kw)


def _opt(name: str, kind: Kind = "text", **kw: Any) -> FieldSpec:
    return FieldSpec(name, kind, False, **kw)


@dataclass(frozen=True)
class Template:
    id: str
    description: str
    """When to choose it (one line, shown to the model)."""
    required: str
    """The required data, human-readable ("-" when none)."""
    optional: str
    """Suggested optional display fields, human-readable."""
    fields: tuple[FieldSpec, ...]
    one_of: tuple[str, ...] = ()
    """At least one of these (optional) fields must be present."""


_CATALOG = (
    Template("link", "a web page, article link or bookmark", "url", "title, description",
             (_req("url"), _opt("title"), _opt("description"))),
    Template("person", "someone the input is mainly about (contact, new acquaintance)", "name",
             "relation, note", (_req("name"), _opt("relation"), _opt("note"))),
    Template("place", "a location, venue, restaurant or check-in", "name",
             "address, note", (_req("name"), _opt("address"), _opt("note"))),
    Template("spec_sheet", "an item described by attributes (product, book, device specs)", "-",
             "title, specs [{label, value}]", (_opt("title"), _opt("specs", "list"))),
    Template("transaction", "a purchase, payment, bill, refund or income with an amount",
             'merchant, amount (string, e.g. "12.50")', "currency, category, items",
             (_req("merchant"), _req("amount"), _opt("currency"), _opt("category"),
              _opt("items", "list"))),
    Template("metric", "one or more measured numbers (weight, steps, sleep, temperature)",
             "items [{title, value (number)}]", "items[].unit",
             (_req("items", "objects",
                   fields=(_req("title"), _req("value", "number"), _opt("unit"))),)),
    Template("rating", "a judgement or score of something (film, meal, product)",
             "subject, score (number)", "max_score (number), comment",
             (_req("subject"), _req("score", "number"), _opt("max_score", "number"),
              _opt("comment"))),
    Template("mood", "how the user feels; the feeling is the point of the input",
             "mood_name (or mood), color_hex", "note",
             (_opt("mood_name"), _opt("mood"), _req("color_hex", strict="hex"), _opt("note")),
             one_of=("mood_name", "mood")),
    Template("progress", "advancement toward a known total (pages read, goal km)",
             "current (number), total (number)", "title, unit",
             (_req("current", "number"), _req("total", "number"), _opt("title"), _opt("unit"))),
    Template("event", "something at a specific date/time (meeting, appointment, party)",
             'start_time (ISO-8601, e.g. "2026-03-14T15:00:00")',
             "title, end_time, location",
             (_req("start_time", strict="iso"), _opt("title"), _opt("end_time"),
              _opt("location"))),
    Template("duration", "a timed activity or elapsed time (run, focus session, flight)",
             "elapsed (whole seconds)", "activity", (_req("elapsed", "seconds"), _opt("activity"))),
    Template("task", "a to-do, reminder or checklist", "-", "title, items, due",
             (_opt("title"), _opt("items", "list"), _opt("due"))),
    Template("routine", "a recurring habit, ideally with a streak count",
             "habit_name, streak (number)", "frequency",
             (_req("habit_name"), _req("streak", "number"), _opt("frequency"))),
    Template("procedure", "step-by-step instructions (recipe, how-to)", "steps (list of text)",
             "title", (_req("steps", "list", items="text"), _opt("title"))),
    Template("compact", "a very short status or label shown as a small coloured chip",
             'color (hex, e.g. "#F5A623")', "text, icon",
             (_req("color", strict="hex"), _opt("text"), _opt("icon"))),
    Template("snippet", "a short note or thought; also trivial inputs", "text", "",
             (_req("text"),)),
    Template("article", "long-form text (journal entry, essay, long note)", "body", "title",
             (_req("body"), _opt("title"))),
    Template("conversation", "a dialogue or chat exchange between people",
             "messages [{text}]", "messages[].speaker",
             (_req("messages", "objects", fields=(_req("text"), _opt("speaker"))),)),
    Template("quote", "a quotation of someone's words", "content", "author, source",
             (_req("content"), _opt("author"), _opt("source"))),
    Template("snapshot", "a single photo or image (dropped when combined with others)",
             "image_url", "caption", (_req("image_url"), _opt("caption"))),
    Template("gallery", "several photos or images", "image_urls (list of text)", "caption",
             (_req("image_urls", "list", items="text", strict="urls"), _opt("caption"))),
    Template("video", "a video clip or video link", "video_url", "caption",
             (_req("video_url"), _opt("caption"))),
)

TEMPLATES: dict[str, Template] = {t.id: t for t in _CATALOG}
TEMPLATE_IDS: tuple[str, ...] = tuple(TEMPLATES)


def catalog_markdown() -> str:
    """One line per template: id, when to use it, required and optional data."""
    lines = []
    for t in _CATALOG:
        optional = f"; optional: {t.optional}" if t.optional else ""
        lines.append(f"- {t.id}: {t.description}. Required: {t.required}{optional}")
    return "\n".join(lines)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _type_error(kind: Kind, value: Any) -> str | None:
    """Why `value` is not of `kind` (None when it is)."""
    if kind == "text" and not isinstance(value, str):
        return f"must be a string, got {describe(value)}"
    if kind == "number" and not _is_number(value):
        return f"must be a number (not a string), got {describe(value)}"
    if kind == "seconds" and not (
        _is_number(value) and (isinstance(value, int) or float(value).is_integer())
    ):
        return f"must be a whole number of seconds, e.g. 5400, got {describe(value)}"
    if kind in ("list", "objects") and not isinstance(value, list):
        return f"must be a list, got {describe(value)}"
    return None


def _strict_error(spec: FieldSpec, value: Any) -> str | None:
    """Ours-only checks (strict mode) on a value that passed its type check."""
    if spec.kind == "text" and spec.required and not value.strip():
        return "must be a non-empty string"
    if spec.strict == "hex" and not HEX_RE.match(value.strip()):
        return f'must be a hex colour such as "#4A90E2", got {describe(value)}'
    if spec.strict == "iso":
        try:
            datetime.fromisoformat(value.strip())
        except ValueError:
            return (
                'must be an ISO-8601 date-time such as "2026-03-14T15:00:00", '
                f"got {describe(value)}"
            )
    if spec.kind == "seconds" and value < 0:
        return f"must not be negative, got {value}"
    if spec.kind in ("list", "objects") and spec.required and not value:
        return "must be a non-empty list"
    return None


def _check_fields(
    fields: tuple[FieldSpec, ...], data: dict[str, Any], where: str, strict: bool
) -> list[str]:
    errors: list[str] = []
    for spec in fields:
        path = f"{where}.{spec.name}"
        if spec.name not in data:
            if spec.required:
                errors.append(f"{path} is missing (required)")
            continue
        value = data[spec.name]
        if value is None and not spec.required:
            continue
        problem = _type_error(spec.kind, value)
        if problem is None and spec.kind == "text" and spec.required:
            if spec.name in NON_BLANK_FIELDS and not value.strip():
                problem = "must be a non-empty string"
        if problem is None and strict:
            problem = _strict_error(spec, value)
        if problem is not None:
            errors.append(f"{path} {problem}")
            continue
        if spec.kind == "list":
            errors.extend(_check_items(spec, value, path, strict))
        elif spec.kind == "objects":
            for index, item in enumerate(value):
                if not isinstance(item, dict):
                    errors.append(f"{path}[{index}] must be an object, got {describe(item)}")
                else:
                    errors.extend(_check_fields(spec.fields, item, f"{path}[{index}]", strict))
    return errors


def _check_items(spec: FieldSpec, value: list[Any], path: str, strict: bool) -> list[str]:
    errors = []
    for index, item in enumerate(value):
        problem = _type_error(spec.items, item) if spec.items else None
        if problem is None and strict and spec.strict == "urls" and not item.strip():
            problem = "must be a non-empty URL string"
        if problem is not None:
            errors.append(f"{path}[{index}] {problem}")
    return errors


def validate_data(template_id: str, data: Any, *, strict: bool = False) -> list[str]:
    """Errors (field path + problem) of `data` for the template; empty when valid.

    `strict=False` is the original's type-only check; `strict=True` adds ours."""
    template = TEMPLATES[template_id]
    if not isinstance(data, dict):
        return [f"data must be an object, got {describe(data)}"]
    errors = _check_fields(template.fields, data, "data", strict)
    if template.one_of and all(data.get(name) is None for name in template.one_of):
        first, *others = template.one_of
        errors.append(f"data.{first} (or {', '.join(others)}) is missing (required)")
    return errors


__all__ = [
    "NON_BLANK_FIELDS",
    "TEMPLATES",
    "TEMPLATE_IDS",
    "FieldSpec",
    "Template",
    "catalog_markdown",
    "describe",
    "validate_data",
]
