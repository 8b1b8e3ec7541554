"""The batch price factor and how nightly's estimate states the saving."""

from __future__ import annotations

from pathlib import Path

from agents.llm.types import Usage
from optimizer.core.pricing import BATCH_PRICE_FACTOR, batch_saving, estimate_cost
from optimizer.run.usage import Spend
from optimizer.workflows.nightly.config import NightlyConfig
from optimizer.workflows.nightly.estimates import _saving


def test_batch_saves_half_of_the_standard_price() -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    full = estimate_cost("anthropic:claude-sonnet-4-5", usage).usd
    assert BATCH_PRICE_FACTOR == 0.5 and full is not None
    assert batch_saving("anthropic:claude-sonnet-4-5", usage) == full / 2
    assert batch_saving("scripted:judge", usage) == 0.0
    assert batch_saving("openai:unknown-model", usage) is None


def test_nightly_batch_flows_into_runs_and_the_estimate_basis(tmp_path: Path) -> None:
    c = NightlyConfig(batch=True, judge_model="openai:gpt-4.1", state_dir=tmp_path)
    assert c.optimize_config("pkm_agent", "b", "HEAD").batch is True
    spend = Spend(usage={"judge": Usage(input_tokens=1_000_000)})
    assert _saving(c, spend) == "; batch: judge calls at 50% save ~$1.0000"
    assert _saving(c.model_copy(update={"batch": False}), spend) == ""
