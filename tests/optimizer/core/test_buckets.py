"""One bucket namespace: qualified names, short names when unique, did-you-mean."""

from __future__ import annotations

import pytest

from promptloop.optimizer.core.buckets import BucketError, BucketId, qualified, resolve_bucket

KNOWN = ["template_event", "decline_trivial", "regression/plain_event",
         "regression/decline_trivial"]


def test_qualified_names() -> None:
    assert qualified("capability", "x") == "x"
    assert qualified("regression", "x") == "regression/x"
    assert BucketId.parse("regression/plain_event") == BucketId("regression", "plain_event")
    assert BucketId.parse("plain_event").qualified == "plain_event"


def test_short_name_of_a_regression_bucket_resolves_when_unique() -> None:
    assert resolve_bucket("plain_event", KNOWN) == "regression/plain_event"
    assert resolve_bucket("regression/plain_event", KNOWN) == "regression/plain_event"
    assert resolve_bucket("template_event", KNOWN) == "template_event"
    # the capability bucket wins over nothing: exact names first
    assert resolve_bucket("decline_trivial", KNOWN) == "decline_trivial"


def test_unknown_bucket_lists_known_names_with_a_hint() -> None:
    with pytest.raises(BucketError) as err:
        resolve_bucket("template_evnt", KNOWN)
    assert "Did you mean 'template_event'" in str(err.value)
    assert "regression/plain_event" in str(err.value)


def test_ambiguous_short_name() -> None:
    with pytest.raises(BucketError, match="several suites"):
        resolve_bucket("x", ["regression/x", "mixed/x"])
