"""`Drawn`: a sequence like the list of its source's items, whose items are built only as far
as it is read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from services.assembly.drawn import Drawn


class Source:
    """The items of `items`, counting how many were built."""

    def __init__(self, items: list[int]) -> None:
        self.items, self.built = items, 0

    def __iter__(self) -> Iterator[int]:
        for item in self.items:
            self.built += 1
            yield item


@given(st.lists(st.integers()), st.lists(st.integers(-5, 30)))
def test_reads_as_the_list_and_builds_only_what_was_read(items: list[int], reads: list[int]) -> None:
    source = Source(items)
    drawn = Drawn(source)
    furthest = -1
    for index in reads:
        if index >= 0:
            assert drawn.has(index) == (index < len(items))
        if -len(items) <= index < len(items):
            assert drawn[index] == items[index]
        furthest = max(furthest, index if index >= 0 else len(items) - 1)
        assert source.built == drawn.drawn <= max(0, min(len(items), furthest + 1))
    assert bool(drawn) == bool(items) and list(drawn) == items and len(drawn) == len(items)
    assert drawn[1:3] == items[1:3] and source.built == len(items)


@given(st.lists(st.integers()), st.lists(st.integers(0, 30)))
def test_a_mapped_view_draws_its_items_item_for_item(items: list[int], reads: list[int]) -> None:
    source = Source(items)
    drawn = Drawn(source)
    doubled = drawn.map(lambda x: 2 * x)
    for index in reads:
        assert doubled.has(index) == (index < len(items))
        if index < len(items):
            assert doubled[index] == 2 * items[index]
        assert doubled.drawn == drawn.drawn == source.built
    assert list(doubled) == [2 * x for x in items] and len(doubled) == len(items)
    assert doubled[::2] == [2 * x for x in items][::2] and Drawn.of(doubled) is doubled


def test_an_index_past_the_end_is_an_index_error_and_a_drawn_sequence_is_its_own() -> None:
    drawn = Drawn(iter([1, 2]))
    assert Drawn.of(drawn) is drawn and list(Drawn.of([3])) == [3]
    with pytest.raises(IndexError):
        drawn[2]
