"""Nightly pages: the nights of the state folder, and one night's steps, spend and branches.

A finished night has `nightly/<id>/summary.json` (written by the night itself; PR bodies are
already in it). A night still running, or killed before its summary, has only its checkpoint:
the summary is then rebuilt from the checkpoint with the nightly workflow's own
`build_summary`, reading recorded PR bodies only from inside the state folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from promptloop.optimizer.report import fmt
from promptloop.optimizer.view.saved import UnreadableError
from promptloop.optimizer.view.state import NotFoundError, StateFolder
from promptloop.optimizer.workflows.nightly.config import NightlyConfig
from promptloop.optimizer.workflows.nightly.publish import accepted_steps
from promptloop.optimizer.workflows.nightly.state import Checkpoint
from promptloop.optimizer.workflows.nightly.summary import (
    BudgetReport,
    NightSummary,
    budget_table,
    build_summary,
    rank_table,
    rejected_table,
    role_table,
    step_table,
)


@dataclass(frozen=True)
class Meter:
    """Spend against one limit: `share` in [0, 1+] of the limit used, None without a limit."""

    label: str
    used: str
    limit: str
    share: float | None

    @property
    def width(self) -> float:
        return 100.0 * min(1.0, self.share or 0.0)

    @property
    def tone(self) -> str:
        if self.share is None:
            return "bar-base"
        return "bar-bad" if self.share >= 1 else "bar-mid" if self.share >= 0.8 else "bar-good"


def meters(b: BudgetReport) -> list[Meter]:
    def share(used: float | None, limit: float | None) -> float | None:
        return None if used is None or not limit else used / limit

    return [
        Meter("dollars (estimated)", fmt.usd(b.used_usd),
              "no limit" if b.max_usd is None else fmt.usd(b.max_usd),
              share(b.used_usd, b.max_usd)),
        Meter("tokens", fmt.tokens(b.used_tokens),
              "no limit" if b.max_tokens is None else fmt.tokens(b.max_tokens),
              share(b.used_tokens, b.max_tokens)),
        Meter("wall time", f"{b.used_wall_minutes:.1f} min",
              "no limit" if b.max_wall_minutes is None else f"{b.max_wall_minutes:g} min",
              share(b.used_wall_minutes, b.max_wall_minutes)),
    ]


@dataclass(frozen=True)
class NightPage:
    summary: NightSummary
    checkpoint: Checkpoint | None
    from_checkpoint: bool

    @property
    def sessions(self) -> dict[str, str]:
        """`suite/bucket` -> optimize session id (from the checkpoint)."""
        return dict(self.checkpoint.sessions) if self.checkpoint else {}

    def context(self) -> dict[str, object]:
        """What templates/nightly.html.j2 (and the viewer's page around it) need."""
        s = self.summary
        return {"s": s, "budget": budget_table(s.budget), "roles": role_table(s.budget),
                "ranking": rank_table(s), "rejected": rejected_table(s),
                "steps": step_table(s), "meters": meters(s.budget), "night": self}


def _checkpoint(state: StateFolder, folder: Path) -> Checkpoint | None:
    try:
        return Checkpoint.model_validate_json(state.read_text(folder / "checkpoint.json"))
    except (NotFoundError, ValidationError, ValueError):
        return None


def _from_checkpoint(state: StateFolder, cp: Checkpoint) -> NightSummary:
    try:
        config = NightlyConfig.model_validate(cp.config)
        models, prices = config.models, config.prices
    except ValidationError:
        models, prices = {}, {}
    bodies: dict[str, str | None] = {}
    steps = []
    for s in cp.steps:
        if s.result is not None and s.result.branch:
            bodies[s.result.branch] = state.recorded_file(s.result.pr_body_path)
            s = s.model_copy(update={"result": s.result.model_copy(
                update={"pr_body_path": None})})
        steps.append(s)
    summary = build_summary(cp.model_copy(update={"steps": steps}), state.real.parent, models,
                            prices)
    for a in summary.accepted:
        a.pr_body = bodies.get(a.branch) or "(the PR body is not in the state folder)"
    return summary


def night_page(state: StateFolder, night_id: str) -> NightPage:
    folder = state.night_folder(night_id)
    cp = _checkpoint(state, folder)
    try:
        summary = NightSummary.model_validate_json(state.read_text(folder / "summary.json"))
        return NightPage(summary, cp, False)
    except (ValidationError, ValueError) as err:  # a broken summary is shown as broken
        raise UnreadableError(f"night {night_id}: summary.json is unreadable: {err}") from None
    except NotFoundError:
        if cp is None:
            raise NotFoundError(f"night {night_id} has neither a summary nor a checkpoint"
                                ) from None
    return NightPage(_from_checkpoint(state, cp), cp, True)


@dataclass(frozen=True)
class NightRow:
    id: str
    status: str
    started: str
    accepted: int
    steps: int
    stop_reason: str


class _SummaryRow(BaseModel):
    """The fields of a night's summary.json that its list row shows (the rest is not read)."""

    night_id: str
    status: str
    started_at: datetime
    stop_reason: str | None = None
    accepted: list[object] = Field(default_factory=list)
    steps: list[object] = Field(default_factory=list)


def night_row(state: StateFolder, night_id: str) -> NightRow:
    """One night's list row, from its summary (only the fields shown) or its checkpoint; the
    page itself (`night_page`) is not built."""
    folder = state.night_folder(night_id)
    try:
        row = _SummaryRow.model_validate_json(state.read_text(folder / "summary.json"))
        return NightRow(row.night_id, row.status, f"{row.started_at:%Y-%m-%d %H:%M}",
                        len(row.accepted), len(row.steps), row.stop_reason or "")
    except (ValidationError, ValueError) as err:  # a broken summary is shown as broken
        raise UnreadableError(f"night {night_id}: summary.json is unreadable: {err}") from None
    except NotFoundError:
        cp = _checkpoint(state, folder)
        if cp is None:
            raise NotFoundError(f"night {night_id} has neither a summary nor a checkpoint"
                                ) from None
    return NightRow(cp.night_id, cp.status, f"{cp.started_at:%Y-%m-%d %H:%M}",
                    len(accepted_steps(cp)), len(cp.steps), cp.stop_reason or "")


def night_rows(state: StateFolder) -> list[NightRow]:
    rows = []
    for folder in state.nights():
        try:
            rows.append(night_row(state, folder.name))
        except NotFoundError:
            continue
    return rows
