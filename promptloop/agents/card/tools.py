"""The Card Agent's two tools: `get_card_metadata` and `save_timeline_card` (docs/compat.md).

`save_timeline_card` runs its checks in the SPEC order (title, ui_configs, snapshot dropping,
fact exists, tags) and reports the first failing stage precisely, so the model can correct its
next call. A successful save ends the run (`stop=True`). The checks are the original's (SPEC
section 8); `CardTools(..., strict_templates=True)` opts in to our stricter template data checks.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from promptloop.agents.card.card_file import CardFileError, update_card
from promptloop.agents.card.templates import (
    TEMPLATE_IDS,
    TEMPLATES,
    catalog_markdown,
    describe,
    validate_data,
)
from promptloop.agents.tools import Tool, ToolArgs, ToolError, ToolResult
from promptloop.agents.workspace import FACT_ID_PATTERN, FactId, FactIdError, Workspace

log = logging.getLogger(__name__)

SAVE_TOOL = "save_timeline_card"
METADATA_TOOL = "get_card_metadata"
TAGS_FILE = "tags.md"
"""The user's existing tags, one per line, under `_System/` (what get_card_metadata lists)."""

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


def existing_tags(workspace: Workspace) -> list[str]:
    """Tag names listed in `_System/tags.md`: one per line, list markers and headings ignored."""
    path = workspace.system / TAGS_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return []
    names: list[str] = []
    for line in text.splitlines():
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        name = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", name).strip()
        if name and name not in names:
            names.append(name)
    return names


def tag_metadata(workspace: Workspace) -> str:
    """The `get_card_metadata` result: "# Existing Tags" and the user's tag names."""
    names = existing_tags(workspace)
    if not names:
        return "# Existing Tags\nThere are no existing tags yet."
    return "# Existing Tags\n" + "\n".join(f"- {name}" for name in names)


def allowed_tags_markdown() -> str:
    """The tag names `save_timeline_card` accepts, with what each is for."""
    lines = ["Allowed tag names (save_timeline_card accepts only these; no tag is fine):"]
    lines.extend(f"- {name}: {meaning}" for name, meaning in TAGS.items())
    return "\n".join(lines)


def parse_ui_configs(
    raw: Any, *, strict: bool = False
) -> tuple[list[dict[str, Any]], list[str]]:
    """Validate `ui_configs` (a list, or a JSON string of one). Returns (configs, errors).

    Template ids are matched exactly and `data` is required (docs/compat.md); `strict` adds
    our data checks (see `templates.validate_data`)."""
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
        if template_id is None:
            errors.append(f"{where}.template_id is missing; allowed: {', '.join(TEMPLATE_IDS)}")
            continue
        if not isinstance(template_id, str) or template_id not in TEMPLATES:
            hint = ""
            if isinstance(template_id, str) and template_id.strip().lower() in TEMPLATES:
                hint = f" (template ids are exact: {template_id.strip().lower()!r})"
            errors.append(
                f"{where}.template_id {template_id!r} is not allowed{hint}; "
                f"allowed: {', '.join(TEMPLATE_IDS)}"
            )
            continue
        if item.get("data") is None:
            errors.append(f"{where}.data is missing; send the {template_id} data object")
            continue
        data = item["data"]
        problems = validate_data(template_id, data, strict=strict)
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


def parse_tags(raw: Any) -> tuple[list[str], list[str]]:
    """Tag names, trimmed and capitalised; each must be allowed. Returns (names, errors).

    docs/compat.md: an entry with an empty name is skipped, the icon is ignored, and a bare
    string entry is an error."""
    if raw is None:
        return [], []
    if not isinstance(raw, list):
        return [], [f"tags must be a list of {{name, icon}} objects, got {describe(raw)}"]
    names: list[str] = []
    errors: list[str] = []
    allowed = ", ".join(ALLOWED_TAGS)
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            errors.append(f"tags[{index}] must be an object {{name, icon}}, got {describe(item)}")
            continue
        name = item.get("name")
        if name is None:
            continue
        if not isinstance(name, str):
            errors.append(f"tags[{index}].name must be a string, got {describe(name)}")
            continue
        if not name.strip():
            continue
        normalised = name.strip().capitalize()
        if normalised not in TAGS:
            errors.append(
                f"tags[{index}] {name!r} is not an allowed tag; allowed: {allowed}. "
                "Leave tags out when none fits."
            )
            continue
        if normalised not in names:
            names.append(normalised)
    return names, errors


def parse_creation_date(text: str, zone: tzinfo | None) -> datetime | None:
    """`content_creation_date` ("YYYY-MM-DD HH:MM:SS", or ISO-8601) as an aware datetime.

    A naive value is read in `zone` (the published time's zone), else the local zone. None
    when it does not parse."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=zone) if zone is not None else parsed.astimezone()
    return parsed


class CardTools:
    """The tools bound to one workspace and input (published time) with a shared state.

    `strict_templates=True` opts in to our stricter template data checks (hex colours,
    ISO-8601 start times, non-empty lists and strings, non-negative durations). `clock` is
    "now" for a card that has neither a creation date nor an existing timestamp."""

    def __init__(
        self,
        workspace: Workspace,
        published_at: datetime,
        *,
        strict_templates: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.workspace = workspace
        self.published_at = published_at
        self.strict_templates = strict_templates
        self.clock = clock or (lambda: datetime.now(UTC))
        self.state = CardToolState()

    def metadata(self, _args: GetCardMetadataArgs) -> ToolResult:
        return ToolResult(content=tag_metadata(self.workspace))

    def save(self, args: SaveTimelineCardArgs) -> ToolResult:
        title = args.title
        if title == "":
            raise ToolError("title is empty; give the card a short, specific title")
        configs, errors = parse_ui_configs(args.ui_configs, strict=self.strict_templates)
        if errors:
            raise ToolError("invalid ui_configs: " + " | ".join(errors))
        kept = drop_snapshots(configs)
        fact_id = self._existing_fact(args.fact_id)
        tags, errors = parse_tags(args.tags)
        if errors:
            raise ToolError("invalid tags: " + " | ".join(errors))
        created_at = self._creation_time(args.content_creation_date)
        address = next(
            (a.strip() for a in (args.address, args.user_mark_address) if a and a.strip()), None
        )
        path = self.workspace.card_path(fact_id)

        def mutate(card: dict[str, Any]) -> None:
            card.setdefault("fact_id", str(fact_id))
            card["timestamp"] = self._timestamp(created_at, card.get("timestamp"))
            card["status"] = "completed"
            card["tags"] = tags
            card["ui_configs"] = kept
            card["title"] = title
            if address is not None:
                card["address"] = address
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
                f"[{', '.join(tags)}].{note} The card is complete."
            ),
            stop=True,
        )

    def _creation_time(self, raw: str | None) -> datetime | None:
        """The parsed `content_creation_date`; one that does not parse is ignored (logged)."""
        if raw is None or not raw.strip():
            return None
        parsed = parse_creation_date(raw, self.published_at.tzinfo)
        if parsed is None:
            log.warning("ignoring content_creation_date %r: not YYYY-MM-DD HH:MM:SS", raw)
        return parsed

    def _timestamp(self, created_at: datetime | None, existing: Any) -> int:
        """docs/compat.md: the creation date when it parsed, else the card's, else now."""
        if created_at is not None:
            return int(created_at.timestamp())
        if isinstance(existing, int | float) and not isinstance(existing, bool):
            return int(existing)
        return int(self.clock().timestamp())

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
                description="List the user's existing tags.",
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
    "TAGS_FILE",
    "CardToolState",
    "CardTools",
    "SaveTimelineCardArgs",
    "SavedCard",
    "allowed_tags_markdown",
    "drop_snapshots",
    "existing_tags",
    "parse_creation_date",
    "parse_tags",
    "parse_ui_configs",
    "tag_metadata",
]
