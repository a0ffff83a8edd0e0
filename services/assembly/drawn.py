"""A sequence whose items are built only as far as it is read (`Drawn`).

Recall offers packing more items than fit, best first (packing leaves out what the host's raw
turns show and must still fill the room), and packing stops at the first item that does not
fit: the items below it are never built, sized or checked against the raw turns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

T = TypeVar("T")
U = TypeVar("U")


class Drawn(Sequence[T]):
    """The items of `source`, drawn from it when first read (by index or in order); `len` and
    negative indexes draw them all."""

    def __init__(self, source: Iterable[T]) -> None:
        self._source: Iterator[T] | None = iter(source)
        self._items: list[T] = []

    @classmethod
    def of(cls, items: Sequence[T]) -> Drawn[T]:
        return items if isinstance(items, Drawn) else cls(items)

    @property
    def drawn(self) -> int:
        """How many items were drawn so far."""
        return len(self._items)

    def has(self, index: int) -> bool:
        """Whether there is an item `index` (`index` >= 0), drawing up to it."""
        while len(self._items) <= index and self._source is not None:
            try:
                self._items.append(next(self._source))
            except StopIteration:
                self._source = None
        return index < len(self._items)

    def _all(self) -> list[T]:
        while self._source is not None:
            self.has(len(self._items))
        return self._items

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice) or index < 0:
            return self._all()[index]
        if not self.has(index):
            raise IndexError(index)
        return self._items[index]

    def __len__(self) -> int:
        return len(self._all())

    def __bool__(self) -> bool:
        return self.has(0)

    def __iter__(self) -> Iterator[T]:
        index = 0
        while self.has(index):
            yield self._items[index]
            index += 1

    def map(self, through: Callable[[T], U]) -> Drawn[U]:
        """These items through `through`, applied as each is read (a view: drawing it draws
        these, item for item)."""
        return _Mapped(self, through)


class _Mapped(Drawn[U]):
    """`Drawn.map`: no items of its own, every read goes to the underlying items."""

    def __init__(self, items: Drawn[T], through: Callable[[T], U]) -> None:
        self._inner: Drawn[Any] = items
        self._through: Callable[[Any], U] = through

    @property
    def drawn(self) -> int:
        return self._inner.drawn

    def has(self, index: int) -> bool:
        return self._inner.has(index)

    def _all(self) -> list[U]:
        return [self._through(item) for item in self._inner._all()]

    def __getitem__(self, index: int | slice) -> U | list[U]:  # type: ignore[override]
        if isinstance(index, slice):
            return self._all()[index]
        return self._through(self._inner[index])

    def __len__(self) -> int:
        return len(self._inner)

    def __iter__(self) -> Iterator[U]:
        return map(self._through, self._inner)
