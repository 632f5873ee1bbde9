"""Arrivals: the things that happen in submit order, merged from every stream."""

import heapq
import math
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Arrival:
    """A submission (or a planted scenario) at ``time``. Ordered by (time, stream, seq)."""

    time: int
    stream: str
    seq: int
    kind: str
    params: tuple[tuple[str, object], ...] = ()

    def param(self, name: str, default: object = None) -> object:
        for key, value in self.params:
            if key == name:
                return value
        return default


def poisson(rng: random.Random, start: int, end: int, rate_per_second: float, stream: str,
            kinds: Iterable[str]) -> Iterator[Arrival]:
    """Arrivals at exponential gaps; ``kinds`` yields the kind of each arrival in turn."""
    if rate_per_second <= 0:
        return
    kind_iter = iter(kinds)
    t = float(start)
    seq = 0
    while True:
        t += rng.expovariate(rate_per_second)
        if t >= end:
            return
        yield Arrival(int(t), stream, seq, next(kind_iter))
        seq += 1


def merge(*streams: Iterable[Arrival]) -> Iterator[Arrival]:
    return heapq.merge(*streams)


def log_uniform(rng: random.Random, low: float, high: float) -> int:
    return int(math.exp(rng.uniform(math.log(low), math.log(high))))
