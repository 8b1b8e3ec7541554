"""Every template's required data: one valid and one invalid example each, by default (the
original's type checks, docs/compat.md) and with our opt-in strict checks."""

from __future__ import annotations

from typing import Any

import pytest

from promptloop.agents.card.templates import (
    TEMPLATE_IDS,
    TEMPLATES,
    catalog_markdown,
    validate_data,
)

VALID: dict[str, dict[str, Any]] = {
    "link": {"url": "https://example.org/post", "title": "A post"},
    "person": {"name": "Mia"},
    "place": {"name": "Noodle Bar", "address": "Main St 4"},
    "spec_sheet": {},
    "transaction": {"merchant": "Noodle Bar", "amount": "18.40", "currency": "EUR"},
    "metric": {"items": [{"title": "Weight", "value": 71.5, "unit": "kg"}, {"title": "Steps",
                                                                          "value": 9000}]},
    "rating": {"subject": "Dune", "score": 8},
    "mood": {"mood_name": "Calm", "color_hex": "#4A90E2"},
    "progress": {"current": 7, "total": 20.0},
    "event": {"start_time": "2026-03-15T15:00:00+01:00", "title": "Dentist"},
    "duration": {"elapsed": 2700},
    "task": {"title": "Buy milk"},
    "routine": {"habit_name": "Meditate", "streak": 12},
    "procedure": {"steps": ["Boil water", "Add pasta"]},
    "compact": {"color": "F5A623", "text": "Done"},
    "snippet": {"text": "hello"},
    "article": {"body": "Long day. Lots to think about."},
    "conversation": {"messages": [{"speaker": "Mia", "text": "See you!"}]},
    "quote": {"content": "Less is more", "author": "Mies"},
    "snapshot": {"image_url": "https://example.org/a.jpg"},
    "gallery": {"image_urls": ["https://example.org/a.jpg", "https://example.org/b.jpg"]},
    "video": {"video_url": "https://example.org/v.mp4"},
}

# template -> (invalid data, a fragment the error must contain)
INVALID: dict[str, tuple[Any, str]] = {
    "link": ({"title": "no url"}, "data.url is missing"),
    # SPEC §8: blank is refused only for url/body/text/content/image_url/video_url; type errors stay
    "person": ({"name": None}, "data.name must be a string, got null"),
    "place": ({"name": 42}, "data.name must be a string, got number 42"),
    "spec_sheet": ("not an object", "data must be an object"),
    "transaction": ({"merchant": "Shop", "amount": 18.4}, 'data.amount must be a string'),
    "metric": ({"items": [{"title": "Weight", "value": "71"}]}, "data.items[0].value must be"),
    "rating": ({"subject": "Dune", "score": "8/10"}, "data.score must be a number"),
    "mood": ({"color_hex": "#fff"}, "mood_name (or mood)"),
    "progress": ({"current": 7}, "data.total is missing"),
    # SPEC §8: no ISO check by default (see STRICT_ONLY); a non-string is still refused
    "event": ({"start_time": 1500}, "data.start_time must be a string"),
    "duration": ({"elapsed": 45.5}, "data.elapsed must be a whole number of seconds"),
    "task": ([], "data must be an object"),
    "routine": ({"habit_name": "Run", "streak": True}, "data.streak must be a number"),
    "procedure": ({"steps": "boil, then eat"}, "data.steps must be a list"),
    # SPEC §8: no hex check by default (see STRICT_ONLY); a non-string is still refused
    "compact": ({"color": 0xF5A623}, "data.color must be a string"),
    "snippet": ({}, "data.text is missing"),
    "article": ({"body": ""}, "data.body must be a non-empty string"),
    "conversation": ({"messages": [{"speaker": "Mia"}]}, "data.messages[0].text is missing"),
    "quote": ({"content": None}, "data.content must be a string, got null"),
    "snapshot": ({"url": "x.jpg"}, "data.image_url is missing"),
    "gallery": ({"image_urls": "a.jpg"}, "data.image_urls must be a list"),
    "video": ({"video_url": ["v.mp4"]}, "data.video_url must be a string"),
}


def test_catalog_has_the_22_spec_templates() -> None:
    assert len(TEMPLATE_IDS) == 22
    assert set(VALID) == set(TEMPLATE_IDS) == set(INVALID)
    listing = catalog_markdown()
    for template_id in TEMPLATE_IDS:
        assert f"- {template_id}: " in listing


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_valid_example_passes(template_id: str) -> None:
    assert validate_data(template_id, VALID[template_id]) == []


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_invalid_example_is_rejected_with_the_field_named(template_id: str) -> None:
    data, fragment = INVALID[template_id]
    errors = validate_data(template_id, data)
    assert errors, f"{template_id} accepted {data!r}"
    assert any(fragment in e for e in errors), errors


@pytest.mark.parametrize(
    ("template_id", "data"),
    [
        ("mood", {"mood": "Happy", "color_hex": "#abc"}),
        ("event", {"start_time": "2026-03-15"}),
        ("event", {"start_time": "2026-03-15T15:00:00Z"}),
        ("duration", {"elapsed": 90.0}),
        ("metric", {"items": [{"title": "Temp", "value": -3.5}]}),
        ("compact", {"color": "#FF00AA80"}),
    ],
)
def test_accepted_variants(template_id: str, data: dict[str, Any]) -> None:
    assert validate_data(template_id, data) == []


@pytest.mark.parametrize(
    ("template_id", "data", "fragment"),
    [
        ("metric", {"items": ["Weight 71"]}, "data.items[0] must be an object"),
        ("gallery", {"image_urls": ["a.jpg", 3]}, "data.image_urls[1] must be a string"),
        ("transaction", {"amount": "3"}, "data.merchant is missing"),
        ("procedure", {"steps": ["Boil", 2]}, "data.steps[1] must be a string"),
        ("link", {"url": "https://x.org", "title": 3}, "data.title must be a string"),
        ("rating", {"subject": "Dune", "score": 8, "max_score": "10"}, "data.max_score must be"),
        ("snippet", {"text": " "}, "data.text must be a non-empty string"),
        ("mood", {"mood_name": 3, "color_hex": "#fff"}, "data.mood_name must be a string"),
    ],
)
def test_more_rejections(template_id: str, data: dict[str, Any], fragment: str) -> None:
    errors = validate_data(template_id, data)
    assert any(fragment in e for e in errors), errors
    assert any(fragment in e for e in validate_data(template_id, data, strict=True))


# Refused only by our opt-in strict checks; the original (default) accepts them (SPEC §8).
STRICT_ONLY: list[tuple[str, dict[str, Any], str]] = [
    ("person", {"name": "  "}, "data.name must be a non-empty string"),
    ("event", {"start_time": "tomorrow 3pm"}, "data.start_time must be an ISO-8601"),
    ("compact", {"color": "orange"}, "data.color must be a hex colour"),
    ("mood", {"mood_name": "Calm", "color_hex": "blue"}, "data.color_hex must be a hex colour"),
    ("transaction", {"merchant": "Shop", "amount": ""}, "data.amount must be a non-empty"),
    ("metric", {"items": []}, "data.items must be a non-empty list"),
    ("gallery", {"image_urls": ["a.jpg", " "]}, "data.image_urls[1] must be a non-empty URL"),
    ("duration", {"elapsed": -5}, "must not be negative"),
    ("conversation", {"messages": []}, "data.messages must be a non-empty list"),
    ("procedure", {"steps": []}, "data.steps must be a non-empty list"),
]


@pytest.mark.parametrize(("template_id", "data", "fragment"), STRICT_ONLY)
def test_strict_only_rejections(template_id: str, data: dict[str, Any], fragment: str) -> None:
    assert validate_data(template_id, data) == []
    errors = validate_data(template_id, data, strict=True)
    assert any(fragment in e for e in errors), errors


@pytest.mark.parametrize("template_id", TEMPLATE_IDS)
def test_valid_examples_pass_the_strict_checks(template_id: str) -> None:
    assert validate_data(template_id, VALID[template_id], strict=True) == []


def test_validation_does_not_modify_the_data() -> None:
    data = {"current": 7, "total": 20, "note": "halfway-ish"}
    validate_data("progress", data)
    assert data == {"current": 7, "total": 20, "note": "halfway-ish"}
    assert type(data["current"]) is int


def test_every_template_states_its_required_data() -> None:
    for template in TEMPLATES.values():
        assert template.description and template.required
        described = f"{template.required} {template.optional}"
        for spec in template.fields:
            assert spec.name in described, (template.id, spec.name)
