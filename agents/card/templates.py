"""The 22 card templates, their required data (SPEC section 3) and validation with pydantic.

Validation checks the data without converting it: the card keeps exactly what the model sent,
so a grader sees the model's own values. Unknown extra fields are allowed (optional display
data). Error messages name the field and what is expected, so the model can fix its call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, model_validator

HEX_RE = re.compile(r"^#?(?:[0-9a-fA-F]{3}|[0-9a-fA-F]{6}|[0-9a-fA-F]{8})$")


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


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {describe(value)}")
    if not value.strip():
        raise ValueError("must be a non-empty string")
    return value


def _amount(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError(f'must be a string such as "12.50", got {describe(value)}')
    if not value.strip():
        raise ValueError('must be a non-empty string such as "12.50"')
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"must be a number (not a string), got {describe(value)}")
    return value


def _whole_seconds(value: Any) -> Any:
    ok = not isinstance(value, bool) and (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    )
    if not ok:
        raise ValueError(f"must be a whole number of seconds, e.g. 5400, got {describe(value)}")
    if value < 0:
        raise ValueError(f"must not be negative, got {value}")
    return value


def _iso_datetime(value: Any) -> Any:
    _text(value)
    try:
        datetime.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(
            f'must be an ISO-8601 date-time such as "2026-03-14T15:00:00", got {describe(value)}'
        ) from None
    return value


def _hex_color(value: Any) -> Any:
    if not isinstance(value, str) or not HEX_RE.match(value.strip()):
        raise ValueError(f'must be a hex colour such as "#4A90E2", got {describe(value)}')
    return value


def _non_empty_list(value: Any) -> Any:
    if not value:
        raise ValueError("must be a non-empty list")
    return value


def _url_list(value: Any) -> Any:
    _non_empty_list(value)
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"item {index} must be a non-empty URL string, got {describe(item)}")
    return value


def _steps(value: Any) -> Any:
    if not isinstance(value, list):
        raise ValueError(f"must be a list of steps, got {describe(value)}")
    return _non_empty_list(value)


Text = Annotated[Any, AfterValidator(_text)]
Amount = Annotated[Any, AfterValidator(_amount)]
Number = Annotated[Any, AfterValidator(_number)]
Seconds = Annotated[Any, AfterValidator(_whole_seconds)]
IsoDateTime = Annotated[Any, AfterValidator(_iso_datetime)]
HexColor = Annotated[Any, AfterValidator(_hex_color)]


class _Data(BaseModel):
    """Base of every template's data model: extra display fields are allowed."""

    model_config = ConfigDict(extra="allow")


class NoRequiredData(_Data):
    pass


class LinkData(_Data):
    url: Text


class PersonData(_Data):
    name: Text


class PlaceData(_Data):
    name: Text


class TransactionData(_Data):
    merchant: Text
    amount: Amount


class MetricItem(_Data):
    title: Text
    value: Number


class MetricData(_Data):
    items: Annotated[list[MetricItem], AfterValidator(_non_empty_list)]


class RatingData(_Data):
    subject: Text
    score: Number


class MoodData(_Data):
    mood_name: Text | None = None
    mood: Text | None = None
    color_hex: HexColor

    @model_validator(mode="after")
    def _one_name(self) -> MoodData:
        if self.mood_name is None and self.mood is None:
            raise ValueError("needs mood_name (or mood): the name of the feeling")
        return self


class ProgressData(_Data):
    current: Number
    total: Number


class EventData(_Data):
    start_time: IsoDateTime


class DurationData(_Data):
    elapsed: Seconds


class RoutineData(_Data):
    habit_name: Text
    streak: Number


class ProcedureData(_Data):
    steps: Annotated[Any, AfterValidator(_steps)]


class CompactData(_Data):
    color: HexColor


class SnippetData(_Data):
    text: Text


class ArticleData(_Data):
    body: Text


class ConversationMessage(_Data):
    text: Text


class ConversationData(_Data):
    messages: Annotated[list[ConversationMessage], AfterValidator(_non_empty_list)]


class QuoteData(_Data):
    content: Text


class SnapshotData(_Data):
    image_url: Text


class GalleryData(_Data):
    image_urls: Annotated[list[Any], AfterValidator(_url_list)]


class VideoData(_Data):
    video_url: Text


@dataclass(frozen=True)
class Template:
    id: str
    description: str
    """When to choose it (one line, shown to the model)."""
    required: str
    """The required data, human-readable ("-" when none)."""
    optional: str
    """Suggested optional display fields (not validated)."""
    model: type[BaseModel]


_CATALOG = (
    Template("link", "a web page, article link or bookmark", "url", "title, description",
             LinkData),
    Template("person", "someone the input is mainly about (contact, new acquaintance)", "name",
             "relation, note", PersonData),
    Template("place", "a location, venue, restaurant or check-in", "name",
             "address, note", PlaceData),
    Template("spec_sheet", "an item described by attributes (product, book, device specs)", "-",
             "title, specs [{label, value}]", NoRequiredData),
    Template("transaction", "a purchase, payment, bill, refund or income with an amount",
             'merchant, amount (string, e.g. "12.50")', "currency, category, items",
             TransactionData),
    Template("metric", "one or more measured numbers (weight, steps, sleep, temperature)",
             "items [{title, value (number)}]", "items[].unit", MetricData),
    Template("rating", "a judgement or score of something (film, meal, product)",
             "subject, score (number)", "max_score, comment", RatingData),
    Template("mood", "how the user feels; the feeling is the point of the input",
             "mood_name (or mood), color_hex", "intensity, note", MoodData),
    Template("progress", "advancement toward a known total (pages read, goal km)",
             "current (number), total (number)", "title, unit", ProgressData),
    Template("event", "something at a specific date/time (meeting, appointment, party)",
             'start_time (ISO-8601, e.g. "2026-03-14T15:00:00")',
             "title, end_time, location", EventData),
    Template("duration", "a timed activity or elapsed time (run, focus session, flight)",
             "elapsed (whole seconds)", "activity", DurationData),
    Template("task", "a to-do, reminder or checklist", "-", "title, items, due", NoRequiredData),
    Template("routine", "a recurring habit, ideally with a streak count",
             "habit_name, streak (number)", "frequency", RoutineData),
    Template("procedure", "step-by-step instructions (recipe, how-to)", "steps (list)",
             "title", ProcedureData),
    Template("compact", "a very short status or label shown as a small coloured chip",
             'color (hex, e.g. "#F5A623")', "text, icon", CompactData),
    Template("snippet", "a short note or thought; also trivial inputs", "text", "",
             SnippetData),
    Template("article", "long-form text (journal entry, essay, long note)", "body", "title",
             ArticleData),
    Template("conversation", "a dialogue or chat exchange between people",
             "messages [{text}]", "messages[].speaker", ConversationData),
    Template("quote", "a quotation of someone's words", "content", "author, source",
             QuoteData),
    Template("snapshot", "a single photo or image (dropped when combined with others)",
             "image_url", "caption", SnapshotData),
    Template("gallery", "several photos or images", "image_urls (list)", "caption",
             GalleryData),
    Template("video", "a video clip or video link", "video_url", "caption", VideoData),
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


def _loc(parts: tuple[int | str, ...]) -> str:
    out = "data"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _message(error: Any) -> str:
    msg = str(error["msg"])
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if error["type"] == "missing":
        return "is missing (required)"
    if error["type"] == "list_type":
        return f"must be a list, got {describe(error['input'])}"
    if error["type"] in {"model_type", "model_attributes_type", "dict_type"}:
        return f"must be an object, got {describe(error['input'])}"
    return msg


def validate_data(template_id: str, data: Any) -> list[str]:
    """Errors (field path + problem) of `data` for the template; empty when valid."""
    template = TEMPLATES[template_id]
    if not isinstance(data, dict):
        return [f"data must be an object, got {describe(data)}"]
    try:
        template.model.model_validate(data)
    except ValidationError as err:
        return [f"{_loc(tuple(e['loc']))} {_message(e)}" for e in err.errors()]
    return []


__all__ = [
    "TEMPLATES",
    "TEMPLATE_IDS",
    "Template",
    "catalog_markdown",
    "describe",
    "validate_data",
]
