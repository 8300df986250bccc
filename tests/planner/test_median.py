"""planner.median stands in for statistics.median on a plan's path: the same value for any list."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.median import median


@given(st.lists(st.floats(min_value=1e-6, max_value=1e6), min_size=1, max_size=40))
def test_the_median_is_statistics_median(values: list[float]) -> None:
    assert median(values) == statistics.median(values)
    assert median(iter(values)) == statistics.median(values)  # any iterable, as a dict's values


def test_no_values_have_no_median() -> None:
    with pytest.raises(ValueError, match="no values"):
        median([])
