"""The batch price factor and how nightly's estimate states the saving."""

from __future__ import annotations

from pathlib import Path

from promptloop.agents.llm.types import Usage
from promptloop.optimizer.core.pricing import BATCH_PRICE_FACTOR, batch_saving, estimate_cost
from promptloop.optimizer.run.usage import Spend
from promptloop.optimizer.workflows.nightly.config import NightlyConfig
from promptloop.optimizer.workflows.nightly.estimates import _saving


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


def test_batched_judge_spend_is_priced_at_the_batch_rate() -> None:
    from promptloop.optimizer.run.usage import Meter

    usage = Usage(input_tokens=1_000_000, output_tokens=100_000)
    models = {"judge": "anthropic:claude-sonnet-4-5"}
    full = estimate_cost(models["judge"], usage).usd
    direct, batched = Meter(), Meter()
    direct.add("judge", usage)
    batched.add("judge", usage, batched=True)
    assert list(batched.spend.usage) == ["judge:batch"]
    assert direct.spend.usd(models) == full
    assert batched.spend.usd(models) == full * BATCH_PRICE_FACTOR  # type: ignore[operator]
    both = direct.spend + batched.spend
    assert both.usd(models) == full * (1 + BATCH_PRICE_FACTOR)  # type: ignore[operator]
    assert both.tokens == 2 * (1_000_000 + 100_000)
    # the saving nightly announces counts batched judge spend of earlier steps too
    c = NightlyConfig(batch=True, judge_model="openai:gpt-4.1")
    assert _saving(c, Spend(usage={"judge:batch": Usage(input_tokens=1_000_000)})) == (
        "; batch: judge calls at 50% save ~$1.0000")
