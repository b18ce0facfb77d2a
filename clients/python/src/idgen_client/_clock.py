"""`Clock`: where a `LeasedGenerator` reads the time, injected so that tests (or a process
with its own time source) can give it another."""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """The two clocks a `LeasedGenerator` reads.

    `time_ns()`: the wall clock, nanoseconds since the Unix epoch; it only dates IDs.
    `monotonic_ns()`: nanoseconds from any fixed start, never going back; the lease's
    deadline and resume instant, and the send and arrival of its requests, are kept on it.
    """

    def time_ns(self) -> int: ...

    def monotonic_ns(self) -> int: ...


class SystemClock:
    """The process's clocks: `time.time_ns` and `time.monotonic_ns` (the default)."""

    __slots__ = ()

    # The functions themselves, not methods wrapping them: a bound `clock.time_ns` is then
    # `time.time_ns`, with no extra call on the generator's hot path.
    time_ns = staticmethod(time.time_ns)
    monotonic_ns = staticmethod(time.monotonic_ns)

    def __repr__(self) -> str:
        return "SystemClock()"
