"""The dates a find query names (``engine/dates.py``): days, months and years written out, and
spans relative to today."""

from __future__ import annotations

from datetime import date

import pytest

from cortexctl.engine.dates import periods, within

TODAY = date(2026, 11, 26)  # a Thursday


@pytest.mark.parametrize("text, spans", [
    ("what did Gina find on 1 February, 2023?", [(date(2023, 2, 1), date(2023, 2, 1))]),
    ("the offer on May 23, 2023", [(date(2023, 5, 23), date(2023, 5, 23))]),
    ("the 3rd of Sept 2024 outage", [(date(2024, 9, 3), date(2024, 9, 3))]),
    ("deploys of 2023-05-07", [(date(2023, 5, 7), date(2023, 5, 7))]),
    ("what did Maria donate in December 2023", [(date(2023, 12, 1), date(2023, 12, 31))]),
    ("the report for 2024-02", [(date(2024, 2, 1), date(2024, 2, 29))]),
    ("how many beach trips in 2023", [(date(2023, 1, 1), date(2023, 12, 31))]),
    ("May 23rd 2023 and June 2024", [(date(2023, 5, 23), date(2023, 5, 23)), (date(2024, 6, 1), date(2024, 6, 30))]),
    ("what did we decide yesterday", [(date(2026, 11, 25), date(2026, 11, 25))]),
    ("notes from today", [(TODAY, TODAY)]),
    ("the alert 3 days ago", [(date(2026, 11, 23), date(2026, 11, 23))]),
    ("last week's incidents", [(date(2026, 11, 16), date(2026, 11, 22))]),
    ("this week", [(date(2026, 11, 23), date(2026, 11, 29))]),
    ("last month", [(date(2026, 10, 1), date(2026, 10, 31))]),
    ("this year", [(date(2026, 1, 1), date(2026, 12, 31))]),
    ("last year", [(date(2025, 1, 1), date(2025, 12, 31))]),
])
def test_a_query_names_days_months_and_years(text, spans):
    assert periods(text, TODAY) == spans


@pytest.mark.parametrize("text", ["May I rotate the key?", "port 8080", "a 12345 id",
                                  "in march we", "3099 items", ""])
def test_words_that_are_no_date_name_none(text):
    assert periods(text, TODAY) == []


def test_last_month_in_january_is_december_of_the_year_before():
    assert periods("last month", date(2026, 1, 10)) == [(date(2025, 12, 1), date(2025, 12, 31))]


def test_an_impossible_day_falls_back_to_its_month():
    assert periods("31 February 2023", TODAY) == [(date(2023, 2, 1), date(2023, 2, 28))]


def test_within_is_inclusive_at_both_ends():
    spans = [(date(2023, 5, 1), date(2023, 5, 31))]
    assert within(date(2023, 5, 1), spans) and within(date(2023, 5, 31), spans)
    assert not within(date(2023, 6, 1), spans) and not within(date(2023, 4, 30), spans)
