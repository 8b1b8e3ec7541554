"""Fixtures of the viewer's tests: one scripted state folder per session, served on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from promptloop.optimizer.view.server import ViewServer, running
from tests.optimizer.view.builders import ViewState, build_state


@pytest.fixture(scope="session")
def view_state(tmp_path_factory: pytest.TempPathFactory) -> ViewState:
    """A scripted night + the accepted prompt on the whole suite + hand-made evil runs."""
    return build_state(tmp_path_factory.mktemp("view"))


@pytest.fixture(scope="session")
def server(view_state: ViewState) -> Iterator[ViewServer]:
    with running(view_state.root) as srv:
        yield srv
