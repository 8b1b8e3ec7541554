from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.fake_api import FakeAPI


@pytest.fixture
def fake_api() -> Iterator[FakeAPI]:
    with FakeAPI() as api:
        yield api


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests decide every key and base URL themselves."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
