"""`--agent` and `--suite` together: every spelling of a suite commands.md lists works beside
`--agent` too."""

from __future__ import annotations

from promptloop.optimizer.core.project import project_scope
from promptloop.optimizer.workflows.context import packaged_project, split_suite


def test_agent_and_suite_in_the_agent_slash_suite_spelling() -> None:
    """A team's `eval --agent ticketbot --suite ticketbot/tickets` read the suite as a path
    and said "no suite 'ticketbot/tickets'" while listing `tickets` among those found."""
    with project_scope(packaged_project()):
        assert split_suite("card_agent", "card_agent/quickstart") == ("card_agent", "quickstart")
        assert split_suite(None, "card_agent/quickstart") == ("card_agent", "quickstart")
        assert split_suite("card_agent", "quickstart") == ("card_agent", "quickstart")
        assert split_suite("card_agent", "card_agent") == ("card_agent", None)
        # another agent's prefix is not stripped: it stays what was written
        assert split_suite("card_agent", "pkm_agent/quickstart") == ("card_agent",
                                                                      "pkm_agent/quickstart")
