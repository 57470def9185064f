"""FrozenMap: an immutable, hashable, picklable mapping used for every map in the specs."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V], Generic[K, V]):
    """A read-only mapping that keeps the insertion order of the data it was built from.

    Equal to any mapping with the same items (``FrozenMap({"a": 1}) == {"a": 1}``), hashable
    when its values are, and safe to pickle or deep-copy (unlike ``types.MappingProxyType``).
    """

    __slots__ = ("_data", "_hash")

    _data: dict[K, V]
    _hash: int | None

    def __init__(self, data: Mapping[K, V] | None = None) -> None:
        object.__setattr__(self, "_data", dict(data) if data is not None else {})
        object.__setattr__(self, "_hash", None)

    def __getitem__(self, key: K) -> V:
        return self._data[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            object.__setattr__(self, "_hash", hash(frozenset(self._data.items())))
        assert self._hash is not None
        return self._hash

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("FrozenMap is immutable")

    def __reduce__(self) -> tuple[type[FrozenMap[K, V]], tuple[dict[K, V]]]:
        return (type(self), (self._data,))

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"
