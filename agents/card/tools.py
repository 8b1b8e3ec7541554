"""The Card Agent's two tools: `get_card_metadata` and `save_timeline_card` (SPEC section 3).

`save_timeline_card` runs its checks in the SPEC order (title, ui_configs, snapshot dropping,
fact exists, tags, content_creation_date) and reports the first failing stage precisely, so
the model can correct its next call. A successful save ends the run (`stop=True`).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from agents.card.card_file import CardFileError, read_card, update_card
from agents.card.templates import TEMPLATE_IDS, TEMPLATES, catalog_markdown, describe, validate_data
from agents.tools import Tool, ToolArgs, ToolError, ToolResult
from agents.workspace import FACT_ID_PATTERN, FactId, FactIdError, Workspace

SAVE_TOOL = "save_timeline_card"
METADATA_TOOL = "get_card_metadata"
DATE_FORMAT = "%Y-%m-%d %H:%M:%S"

TAGS: dict[str, str] = {
    "Project": "work on a project, job or side project",
    "Trip": "travel, journeys, being away from home",
    "Milestone": "a notable first, achievement or life event",
    "Health": "body, exercise, sleep, food, medical",
    "Relationship": "family, friends, partner, people the user cares about",
    "Finance": "money: spending, income, budgets, investments",
    "Knowledge": "learning, reading, ideas, reference material",
    "Emotion": "feelings and moods as the main point",
    "Visual": "photos, images, things seen",
    "Audio": "music, podcasts, voice notes, sounds",
}
ALLOWED_TAGS: tuple[str, ...] = tuple(TAGS)

_UI_CONFIGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "minItems": 1,
    "description": "Display blocks of the card, most important first.",
    "items": {
        "type": "object",
        "properties": {
            "template_id": {"type": "string", "enum": list(TEMPLATE_IDS)},
            "data": {"type": "object", "description": "The template's data (see its fields)."},
        },
        "required": ["template_id", "data"],
    },
}
_TAGS_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Optional tags, only from the allowed list.",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "enum": list(ALLOWED_TAGS)},
            "icon": {"type": "string", "description": "An emoji for the tag."},
        },
        "required": ["name"],
    },
}


class GetCardMetadataArgs(ToolArgs):
    pass


class SaveTimelineCardArgs(ToolArgs):
    fact_id: str = Field(description="The Raw Input ID, e.g. 2026/03/14.md#ts_2",
                         json_schema_extra={"pattern": FACT_ID_PATTERN})
    title: str = Field(description="Short card title in the user's language.")
    ui_configs: Annotated[Any, WithJsonSchema(_UI_CONFIGS_SCHEMA)]
    address: str | None = Field(default=None, description="Address the input refers to.")
    user_mark_address: str | None = Field(
        default=None, description="An address the user marked explicitly."
    )
    content_creation_date: str | None = Field(
        default=None, description='When the content was created: "YYYY-MM-DD HH:MM:SS".'
    )
    tags: Annotated[Any, WithJsonSchema(_TAGS_SCHEMA)] = None


@dataclass(frozen=True)
class SavedCard:
    fact_id: str
    path: Path


@dataclass
class CardToolState:
    """What the tools did during a session; the session reads it for completion evidence."""

    saves: list[SavedCard] = field(default_factory=list)


def tag_metadata(workspace: Workspace) -> str:
    """Markdown list of the allowed tags, with how often each is used in existing cards."""
    counts = _tag_counts(workspace.root / "Cards")
    lines = [
        "## Allowed card tags",
        "Use only these names; add a tag only when it clearly fits (no tag is fine).",
    ]
    for name, meaning in TAGS.items():
        used = counts.get(name, 0)
        usage = f" (used in {used} existing card{'s' if used != 1 else ''})" if used else ""
        lines.append(f"- {name}: {meaning}{usage}")
    if not counts:
        lines.append("No existing cards use tags yet.")
    return "\n".join(lines)


def _tag_counts(cards_dir: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    if not cards_dir.is_dir():
        return counts
    for path in sorted(cards_dir.rglob("*.yaml")):
        try:
            card = read_card(path)
        except (CardFileError, OSError, UnicodeDecodeError):
            continue
        tags = card.get("tags")
        if not isinstance(tags, list):
            continue
        names = {
            str(t.get("name") if isinstance(t, dict) else t).strip().capitalize() for t in tags
        }
        counts.update(n for n in names if n in TAGS)
    return counts


def parse_ui_configs(raw: Any) -> tuple[list[dict[str, Any]], list[str]]:
    """Validate `ui_configs` (a list, or a JSON string of one). Returns (configs, errors)."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError as err:
            return [], [f"ui_configs is a string but not valid JSON ({err.msg}); send a list"]
    if not isinstance(raw, list):
        return [], [
            f"ui_configs must be a list of {{template_id, data}} objects, got {describe(raw)}"
        ]
    if not raw:
        return [], ["ui_configs is empty; add at least one {template_id, data} entry"]
    configs: list[dict[str, Any]] = []
    errors: list[str] = []
    for index, item in enumerate(raw):
        where = f"ui_configs[{index}]"
        if not isinstance(item, dict):
            errors.append(f"{where} must be an object {{template_id, data}}, got {describe(item)}")
            continue
        template_id = item.get("template_id")
        if not isinstance(template_id, str) or not template_id.strip():
            errors.append(f"{where}.template_id is missing; allowed: {', '.join(TEMPLATE_IDS)}")
            continue
        template_id = template_id.strip().lower()
        if template_id not in TEMPLATES:
            errors.append(
                f"{where}.template_id {item['template_id']!r} is not allowed; "
                f"allowed: {', '.join(TEMPLATE_IDS)}"
            )
            continue
        data = item.get("data", {})
        problems = validate_data(template_id, data)
        if problems:
            required = TEMPLATES[template_id].required
            errors.append(
                f"{where} ({template_id}): {'; '.join(problems)}. "
                f"Required data for {template_id}: {required if required != '-' else 'none'}"
            )
            continue
        configs.append({"template_id": template_id, "data": data})
    return configs, errors


def drop_snapshots(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """With more than one config, snapshot entries are dropped (the first kept if all are)."""
    if len(configs) <= 1:
        return configs
    kept = [c for c in configs if c["template_id"] != "snapshot"]
    return kept or configs[:1]


def parse_tags(raw: Any) -> tuple[list[dict[str, str]], list[str]]:
    """Trim and capitalise tag names; every one must be allowed. Returns (tags, errors)."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"tags must be a list of {{name, icon}} objects, got {describe(raw)}"]
    tags: list[dict[str, str]] = []
    errors: list[str] = []
    allowed = ", ".join(ALLOWED_TAGS)
    for index, item in enumerate(raw):
        name, icon = (item, "") if isinstance(item, str) else (None, "")
        if isinstance(item, dict):
            name, icon = item.get("name"), item.get("icon", "")
        if not isinstance(name, str) or not name.strip():
            errors.append(f"tags[{index}] needs a non-empty name; allowed: {allowed}")
            continue
        if icon is None:
            icon = ""
        if not isinstance(icon, str):
            errors.append(f"tags[{index}].icon must be a string (an emoji), got {describe(icon)}")
            continue
        normalised = name.strip().capitalize()
        if normalised not in TAGS:
            errors.append(
                f"tags[{index}] {name!r} is not an allowed tag; allowed: {allowed}. "
                "Leave tags out when none fits."
            )
            continue
        if all(t["name"] != normalised for t in tags):
            tags.append({"name": normalised, "icon": icon.strip()})
    return tags, errors


class CardTools:
    """The tools bound to one workspace and input (published time) with a shared state."""

    def __init__(self, workspace: Workspace, published_at: datetime) -> None:
        self.workspace = workspace
        self.published_at = published_at
        self.state = CardToolState()

    def metadata(self, _args: GetCardMetadataArgs) -> ToolResult:
        return ToolResult(content=tag_metadata(self.workspace))

    def save(self, args: SaveTimelineCardArgs) -> ToolResult:
        title = args.title.strip()
        if not title:
            raise ToolError("title is empty; give the card a short, specific title")
        configs, errors = parse_ui_configs(args.ui_configs)
        if errors:
            raise ToolError("invalid ui_configs: " + " | ".join(errors))
        kept = drop_snapshots(configs)
        fact_id = self._existing_fact(args.fact_id)
        tags, errors = parse_tags(args.tags)
        if errors:
            raise ToolError("invalid tags: " + " | ".join(errors))
        created = (args.content_creation_date or "").strip()
        if created:
            try:
                datetime.strptime(created, DATE_FORMAT)
            except ValueError:
                raise ToolError(
                    f"content_creation_date {created!r} must look like 2026-03-14 09:30:00 "
                    "(YYYY-MM-DD HH:MM:SS), or be left out"
                ) from None
        path = self.workspace.card_path(fact_id)
        timestamp = int(self.published_at.timestamp())

        def mutate(card: dict[str, Any]) -> None:
            card.setdefault("fact_id", str(fact_id))
            card["timestamp"] = timestamp
            card["status"] = "completed"
            card["tags"] = tags
            card["ui_configs"] = kept
            card["title"] = title
            for key, value in (
                ("address", args.address),
                ("user_mark_address", args.user_mark_address),
                ("content_creation_date", created),
            ):
                if value and value.strip():
                    card[key] = value.strip()
            card.pop("failure_reason", None)

        try:
            update_card(path, mutate, durable=self.workspace.durable)
        except CardFileError as err:
            raise ToolError(f"could not update the card file: {err}") from err
        self.state.saves.append(SavedCard(str(fact_id), path))
        dropped = len(configs) - len(kept)
        note = (
            f" Dropped {dropped} snapshot config(s): a snapshot is only kept when it is alone."
            if dropped
            else ""
        )
        return ToolResult(
            content=(
                f"Card saved for {fact_id}: title {title!r}, templates "
                f"[{', '.join(c['template_id'] for c in kept)}], tags "
                f"[{', '.join(t['name'] for t in tags)}].{note} The card is complete."
            ),
            stop=True,
        )

    def _existing_fact(self, raw: str) -> FactId:
        try:
            fact_id = FactId.parse(raw)
        except FactIdError as err:
            raise ToolError(f"{err}; use the Raw Input ID given in the message") from None
        if self.workspace.read_fact(fact_id) is None:
            raise ToolError(
                f"fact {fact_id} does not exist in {fact_id.fact_file}; "
                "use the Raw Input ID (fact_id) given in the message"
            )
        return fact_id

    def tools(self) -> tuple[Tool, Tool]:
        """The save tool comes first: it is the agent's one real action, and weak models under
        grammar-constrained decoding tend to pick the first tool offered."""
        return (
            Tool(
                name=SAVE_TOOL,
                description=SAVE_DESCRIPTION,
                args_model=SaveTimelineCardArgs,
                handler=self.save,
            ),
            Tool(
                name=METADATA_TOOL,
                description="List the allowed card tags and how often each is already used.",
                args_model=GetCardMetadataArgs,
                handler=self.metadata,
            ),
        )


SAVE_DESCRIPTION = (
    "Save the timeline card of one raw input; a successful save finishes the task. "
    "ui_configs is a list of {template_id, data}; the first entry is the main view. "
    "Templates (id: when to use. Required data):\n"
    + catalog_markdown()
    + "\nTags: optional, only "
    + ", ".join(ALLOWED_TAGS)
    + ". content_creation_date: \"YYYY-MM-DD HH:MM:SS\"."
)


__all__ = [
    "ALLOWED_TAGS",
    "METADATA_TOOL",
    "SAVE_TOOL",
    "TAGS",
    "CardToolState",
    "CardTools",
    "SaveTimelineCardArgs",
    "SavedCard",
    "drop_snapshots",
    "parse_tags",
    "parse_ui_configs",
    "tag_metadata",
]
