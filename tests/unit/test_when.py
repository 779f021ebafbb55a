"""Times users give: RFC 3339, a date, an age; anything else is one usage error naming the option."""

from __future__ import annotations

from datetime import datetime

import pytest

from cortexctl.engine import when
from cortexctl.errors import UsageError

NOW = datetime(2026, 11, 26, 12, 0)


@pytest.mark.parametrize("text, expected", [
    ("2026-11-21T09:30:00Z", datetime(2026, 11, 21, 9, 30)),
    ("2026-11-21T10:30:00+01:00", datetime(2026, 11, 21, 9, 30)),
    ("2026-11-21t09:30:00.25z", datetime(2026, 11, 21, 9, 30, 0, 250000)),
    ("2026-11-21T09:30", datetime(2026, 11, 21, 9, 30)),
    ("2026-11-21", datetime(2026, 11, 21)),
    ("90s", datetime(2026, 11, 26, 11, 58, 30)),
    ("30m", datetime(2026, 11, 26, 11, 30)),
    ("3h", datetime(2026, 11, 26, 9)),
    ("2d", datetime(2026, 11, 24, 12)),
    (" 2d ago ", datetime(2026, 11, 24, 12)),
    ("1w", datetime(2026, 11, 19, 12)),
    ("now", NOW),
])
def test_a_time_is_rfc_3339_a_date_or_an_age_counted_back_from_now(text, expected):
    assert when.parse(text, NOW, field="--as-of") == expected


@pytest.mark.parametrize("text", ["yesterday", "", "2d3h", "-2d", "2 days", "2026-13-01", "1000000000d", "0x10h"])
def test_anything_else_is_a_usage_error_naming_the_option(text):
    with pytest.raises(UsageError) as err:
        when.parse(text, NOW, field="--since")
    assert err.value.message.startswith("--since: ") and err.value.exit_code == 2


def test_an_age_reaching_before_year_one_is_a_usage_error():
    with pytest.raises(UsageError, match="before the year 1"):
        when.parse("999999999d", NOW, field="--as-of")


def test_a_past_time_must_not_be_in_the_future():
    assert when.parse_past("2026-11-26T12:00:00Z", NOW, field="--as-of") == NOW
    with pytest.raises(UsageError, match="--as-of: 2026-11-27 is in the future"):
        when.parse_past("2026-11-27", NOW, field="--as-of")
