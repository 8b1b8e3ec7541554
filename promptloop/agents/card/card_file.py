"""The timeline card YAML file: atomic writes and locked read-modify-write updates.

Key order follows the app (docs/compat.md): fact_id, timestamp, status, tags, ui_configs, title,
then the optional address, insight and failure_reason. The text is written by `card_yaml`: one
scalar per line, never folded (docs/compat.md).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from filelock import FileLock

from promptloop.agents.card.card_yaml import dump_yaml
from promptloop.agents.files import write_atomic

KEY_ORDER = (
    "fact_id",
    "timestamp",
    "status",
    "tags",
    "ui_configs",
    "title",
    "address",
    "insight",
    "failure_reason",
)
STATUSES = ("pending", "processing", "completed", "failed")
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader when PyYAML was built with it (same results, ~10x faster)."""


class CardFileError(Exception):
    pass


def _ordered(card: dict[str, Any]) -> dict[str, Any]:
    out = {k: card[k] for k in KEY_ORDER if k in card}
    out.update({k: v for k, v in card.items() if k not in out})
    return out


def dump_card(card: dict[str, Any]) -> str:
    return dump_yaml(_ordered(card))


def read_card(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)
    except yaml.YAMLError as err:
        raise CardFileError(f"{path.name}: not valid YAML ({err})") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CardFileError(f"{path.name}: card file must hold a mapping")
    return data


def write_card_atomic(path: Path, card: dict[str, Any], *, durable: bool = True) -> None:
    """Write to a temp file in the same directory, fsync, then rename over the target.

    `durable=False` skips the fsync: the rename stays atomic for readers, only crash
    durability is lost, which a throw-away trial workspace does not need."""
    write_atomic(path, dump_card(card), durable=durable)


def _lock(path: Path) -> FileLock:
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path.with_name(f".{path.name}.lock")), timeout=10)


def update_card(
    path: Path,
    mutate: Callable[[dict[str, Any]], dict[str, Any] | None],
    *,
    durable: bool = True,
) -> dict[str, Any]:
    """Locked read-modify-write. `mutate` edits the dict in place or returns a new one.

    A missing file starts from an empty mapping. `fact_id` is never changed by an update.
    """
    with _lock(path):
        card = read_card(path) if path.exists() else {}
        original_fact_id = card.get("fact_id")
        result = mutate(card)
        if result is not None:
            card = result
        if original_fact_id is not None:
            card["fact_id"] = original_fact_id
        write_card_atomic(path, card, durable=durable)
        return card


def ensure_pending_card(path: Path, fact_id: str, timestamp: int, *, durable: bool = True) -> None:
    """Create the pending card the app makes when a fact arrives (no-op if it exists)."""
    with _lock(path):
        if path.exists():
            return
        write_card_atomic(
            path,
            {
                "fact_id": fact_id,
                "timestamp": timestamp,
                "status": "pending",
                "tags": [],
                "ui_configs": [],
                "title": "",
            },
            durable=durable,
        )
