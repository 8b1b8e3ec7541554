"""Constants shared by the Card Agent tests."""

from __future__ import annotations

from datetime import UTC, datetime

FACT_ID = "2026/03/14.md#ts_2"
PUBLISHED = datetime(2026, 3, 14, 9, 30, 5, tzinfo=UTC)
CONTENT = "Lunch at Noodle Bar with Mia, paid 18.40 EUR"
