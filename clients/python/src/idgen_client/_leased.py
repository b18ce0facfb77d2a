"""`LeasedGenerator`: Snowflake IDs made in this process on a worker number leased from the
service, which stops before the lease could pass on.

Clock rules (the crate's, and the Node.js client's). Both clocks are read through the
generator's `Clock` (`clock=`, default `SystemClock`: `time.monotonic_ns` and `time.time_ns`),
every reading that decides a date, a deadline or a resume instant included; only the waits
(the renewal thread's, the client's retries) are real time.
- Deadlines are kept on the monotonic clock (`clock.monotonic_ns()`). The service read its
  clock (`serverNowMs`) between the send of the request it answered and the answer's
  arrival, so each bound takes the side of that span that cannot be late: the send time plus
  (`validUntilMs` - `serverNowMs`) for the end of the term, the arrival plus (`resumeAfterMs`
  - `serverNowMs`) for its start. A wall clock that is stepped or skewed moves neither.
- The wall clock (`clock.time_ns() // 1_000_000`) only dates IDs. IDs are dated after
  `resumeAfterMs` (the previous holder's mark) and before `validUntilMs` (this holder's own
  mark, moved on by renewals): a clock behind the previous mark by more than the tolerance
  refuses; a clock ahead reaches the mark sooner and stops sooner.
- A clock that steps back by up to `clock_back_tolerance_ms` (10) is ridden out on the last
  millisecond's sequence; further back, calls refuse until it has caught up.

Locks. `_lock` (the issuing lock) guards the sequence (`_last_ms`, `_sequence`, `_base`) and
is held by `next_id`, and by `next_ids` for its whole batch. The bounds the issuing path
checks (`_deadline_ns`, `_limit_ms`) and `_state` are written only under `_term_lock`, a
small lock never held across a request: a renewal (the renewal thread only) moves the bounds
on, never back, after checking under that lock that the generator is still valid; close,
lost and fork stop it. The issuing path reads them without a lock (reading an attribute is
atomic) at each call of `next_id` and each millisecond of a `next_ids` batch, so a renewal
that arrives during a long batch applies to the rest of it.

Fork. A generator inherited by a forked child (multiprocessing's fork, gunicorn --preload)
is closed in the child at once: its lease is the parent's. It issues nothing, releases
nothing, and its signal handlers only pass the signal on.
"""

from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
import urllib.parse
import weakref
from datetime import datetime, timedelta, timezone
from types import FrameType, TracebackType
from typing import Any, Callable, Final, cast

from ._client import Client, IdgenError, Response, _reason
from ._clock import Clock, SystemClock
from ._types import LeaseTerms, State

__all__ = ["LeasedGenerator"]

_VALID: Final = "valid"
_LOST: Final = "lost"
_CLOSED: Final = "closed"
# Closed in a forked child: the lease is the parent's.
_FORKED: Final = "forked"

# The deadline of a closed or lost generator: every clock reading is past it, so the hot
# path's one deadline check also stops it (and `_stopped` then says why).
_STOPPED: Final = -math.inf

_UNIX_EPOCH: Final = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS: Final = timedelta(milliseconds=1)

# The release made from a SIGTERM or SIGINT handler is tried once, for at most this long: the
# process is ending, and the number expires after its TTL anyway.
_SIGNAL_RELEASE_TIMEOUT_S: Final = 1.0

# The fields of a renewal's answer that must be the lease's own when present.
_SAME_LEASE: Final = ("leaseId", "worker", "datacenter")

_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def _parse_epoch(text: str) -> int:
    """Unix milliseconds of an RFC 3339 time (`2024-01-01T00:00:00Z`, fractions and offsets too)."""
    value = text.strip()
    if value[-1:] in ("Z", "z"):
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        raise ValueError("no UTC offset")
    return (moment - _UNIX_EPOCH) // _MS


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_terms(raw: object) -> tuple[LeaseTerms, int]:
    """The lease's terms and the layout's epoch (Unix ms), or an IdgenError."""
    if not isinstance(raw, dict):
        raise IdgenError(f"idgen: the lease's terms are not an object: {raw!r}")
    layout = raw.get("layout")
    widths = [
        layout.get(name) if isinstance(layout, dict) else None
        for name in ("timeBits", "datacenterBits", "workerBits", "sequenceBits")
    ]
    if not all(_is_int(bits) and cast(int, bits) >= 0 for bits in widths) or sum(cast(list[int], widths)) != 63:
        raise IdgenError(f"idgen: the lease names an impossible layout {json.dumps(layout)}")
    assert isinstance(layout, dict)
    try:
        epoch = layout.get("epoch")
        if not isinstance(epoch, str):
            raise ValueError("not a string")
        epoch_ms = _parse_epoch(epoch)
    except ValueError:
        raise IdgenError(f"idgen: bad epoch {layout.get('epoch')!r}") from None
    for name in ("datacenter", "worker", "ttlMs", "resumeAfterMs", "validUntilMs", "renewEveryMs", "serverNowMs"):
        if not _is_int(raw.get(name)) or raw[name] < 0:
            raise IdgenError(f"idgen: the lease's {name} is not a whole number: {raw.get(name)!r}")
    if not isinstance(raw.get("leaseId"), str) or not raw["leaseId"]:
        raise IdgenError(f"idgen: the lease has no leaseId: {raw.get('leaseId')!r}")
    if raw["renewEveryMs"] < 1:
        raise IdgenError(f"idgen: the lease's renewEveryMs is {raw['renewEveryMs']}")
    if raw["datacenter"] >= 1 << layout["datacenterBits"] or raw["worker"] >= 1 << layout["workerBits"]:
        raise IdgenError(
            f"idgen: datacenter {raw['datacenter']} worker {raw['worker']} do not fit the layout {json.dumps(layout)}"
        )
    return cast(LeaseTerms, raw), epoch_ms


def _is_same(value: object, held: object) -> bool:
    """`value == held`, of the same type (so `True` is not the worker number 1)."""
    return type(value) is type(held) and value == held


def _expired() -> IdgenError:
    return IdgenError("idgen: the lease ran out: no renewal reached the service in time", code="expired")


class LeasedGenerator:
    """Snowflake IDs made in this process on a worker number the service leases to it.

    Made by `LeasedGenerator.lease(url, token=...)`; thread safe. `next_id()` raises an
    IdgenError (code `expired`, `lost`, `closed`, `not-yet` or `clock-behind`) instead of an
    ID it cannot vouch for.
    """

    __slots__ = (
        "__weakref__",
        "_lock",
        "_term_lock",
        "_monotonic_ns",
        "_time_ns",
        "_clock",
        "_state",
        "_deadline_ns",
        "_resume_ns",
        "_last_ms",
        "_sequence",
        "_base",
        "_limit_ms",
        "_epoch_ms",
        "_shift",
        "_node",
        "_max_sequence",
        "_tolerance_ms",
        "_end_ms",
        "_client",
        "_terms",
        "_lease_path",
        "_renewals",
        "_failed_renewals",
        "_stop",
        "_thread",
        "_closer",
        "_released",
        "_period_s",
        "_renew_timeout",
    )

    def __init__(
        self,
        client: Client,
        terms: object,
        sent_ns: int,
        received_ns: int,
        *,
        clock_back_tolerance_ms: int = 10,
        clock: Clock | None = None,
    ) -> None:
        """A generator on terms the service gave, to a lease request sent at `sent_ns` and
        answered at `received_ns` (both read from `clock.monotonic_ns()`). `clock`: where
        every reading of the time comes from (default `SystemClock()`). Use
        `LeasedGenerator.lease`, which also starts renewing."""
        if not _is_int(clock_back_tolerance_ms) or clock_back_tolerance_ms < 0:
            raise ValueError(f"idgen: clock_back_tolerance_ms must be a whole number from 0; got {clock_back_tolerance_ms!r}")
        if clock is None:
            clock = SystemClock()
        elif not isinstance(clock, Clock):
            raise TypeError(f"idgen: clock must have time_ns() and monotonic_ns(); got {clock!r}")
        # Bound once: the hot path calls these slots (for SystemClock, the time functions
        # themselves).
        self._clock = clock
        self._monotonic_ns = clock.monotonic_ns
        self._time_ns = clock.time_ns
        checked, epoch_ms = _check_terms(terms)
        layout = checked["layout"]
        sequence_bits = layout["sequenceBits"]
        worker_bits = layout["workerBits"]
        self._client = client
        self._terms = checked
        self._lease_path = f"/v1/generators/{urllib.parse.quote(checked['leaseId'], safe='')}"
        self._epoch_ms = epoch_ms
        self._shift = layout["datacenterBits"] + worker_bits + sequence_bits
        self._node = (checked["datacenter"] << (worker_bits + sequence_bits)) | (checked["worker"] << sequence_bits)
        self._max_sequence = (1 << sequence_bits) - 1
        self._tolerance_ms = clock_back_tolerance_ms
        # The first millisecond past the layout's last.
        self._end_ms = epoch_ms + (1 << layout["timeBits"])
        server_now = checked["serverNowMs"]
        self._resume_ns = received_ns + (checked["resumeAfterMs"] - server_now) * 1_000_000
        # An int while valid; `_STOPPED` once closed or lost. Written under `_term_lock` only.
        self._deadline_ns: float = sent_ns + (checked["validUntilMs"] - server_now) * 1_000_000
        # The first millisecond no ID may be dated in: this holder's mark, or the layout's end
        # if sooner. Written under `_term_lock` only.
        self._limit_ms = min(checked["validUntilMs"], self._end_ms)
        # The first ID is dated after the previous holder's mark.
        self._last_ms = checked["resumeAfterMs"]
        self._sequence = self._max_sequence
        self._base = 0
        self._state: str = _VALID
        # Reentrant: a signal handler may close the generator in a thread holding either.
        self._lock = threading.RLock()
        self._term_lock = threading.RLock()
        self._renewals = 0
        self._failed_renewals = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The thread that closed it, and set once its release has ended: a signal waits for a
        # release under way in another thread.
        self._closer: int | None = None
        self._released = threading.Event()
        self._period_s = checked["renewEveryMs"] / 1000
        # A renewal gives up before the next is due.
        self._renew_timeout = max(0.01, min(client.timeout, self._period_s * 0.8))
        _live.add(self)

    @classmethod
    def lease(
        cls,
        url: str,
        *,
        token: str,
        holder: str | None = None,
        handle_signals: bool = True,
        clock_back_tolerance_ms: int = 10,
        clock: Clock | None = None,
        retries: int = 4,
        backoff: float = 0.1,
        max_wait: float = 5.0,
        timeout: float = 10.0,
    ) -> LeasedGenerator:
        """Leases a worker number from the service at `url` and starts renewing it.

        `holder`: a name for operators (default `python pid N`); `handle_signals`: release
        the number on SIGTERM and SIGINT (one try of at most 1 s), then end as the signal
        would once every generator's release has ended (default True; only from the main
        thread); `clock`: the `Clock` read for the lease request's timing and
        by the generator (default `SystemClock()`). The other options are `Client`'s. A full
        range is an IdgenError with status 409.
        """
        if handle_signals and threading.current_thread() is not threading.main_thread():
            raise ValueError(
                "idgen: signal handlers can only be installed from the main thread: "
                "pass handle_signals=False (and close() the generator yourself on shutdown)"
            )
        if clock is None:
            clock = SystemClock()
        elif not isinstance(clock, Clock):
            raise TypeError(f"idgen: clock must have time_ns() and monotonic_ns(); got {clock!r}")
        client = Client(url, token, retries=retries, backoff=backoff, max_wait=max_wait, timeout=timeout)
        # The terms count from the send and arrival of the attempt answered (a 503 is tried
        # again), on the generator's clock.
        response, sent_ns, received_ns = client._timed_request(
            "POST",
            "/v1/generators/lease",
            {"holder": holder if holder is not None else f"python pid {os.getpid()}"},
            monotonic_ns=clock.monotonic_ns,
        )
        if response.status != 200:
            raise IdgenError(f"idgen: lease: {response.status} {_reason(response)}", status=response.status)
        try:
            raw = response.json()
        except ValueError:
            raise IdgenError("idgen: lease: the answer is not JSON", status=200) from None
        try:
            generator = cls(
                client, raw, sent_ns, received_ns, clock_back_tolerance_ms=clock_back_tolerance_ms, clock=clock
            )
        except (IdgenError, ValueError):
            # Unusable terms: give the number back (with the last mark written) if we can.
            if isinstance(raw, dict) and isinstance(raw.get("leaseId"), str):
                try:
                    client.request("DELETE", f"/v1/generators/{urllib.parse.quote(raw['leaseId'], safe='')}", retries=0)
                except IdgenError:
                    pass
            raise
        generator._start()
        if handle_signals:
            try:
                generator._handle_signals()
            except BaseException:
                generator.close()
                raise
        return generator

    # -- issuing ------------------------------------------------------------------------------

    def next_id(self) -> int:
        """The next ID, above every one this generator made; an IdgenError rather than an ID
        it cannot vouch for."""
        with self._lock:
            # The clocks through locals: a slot read and a plain call cost less than a method
            # call on the slot. A closed or lost generator fails the deadline check too.
            monotonic_ns = self._monotonic_ns
            mono = monotonic_ns()
            if mono >= self._deadline_ns:
                raise self._stopped()
            if mono < self._resume_ns:
                raise self._not_yet(mono)
            time_ns = self._time_ns
            now = time_ns() // 1_000_000
            last = self._last_ms
            if now > last:
                if now >= self._limit_ms or now < self._epoch_ms:
                    raise self._out_of_term(now)
                self._last_ms = now
                self._sequence = 0
                base = self._base = ((now - self._epoch_ms) << self._shift) | self._node
                return base
            if last - now > self._tolerance_ms:
                raise self._behind(last - now)
            sequence = self._sequence + 1
            if sequence <= self._max_sequence:
                self._sequence = sequence
                return self._base | sequence
            return self._next_millisecond()

    def next_ids(self, count: int) -> list[int]:
        """`count` IDs, increasing (see `next_id`): the checks once per millisecond, the
        millisecond's sequence taken at once. A long batch is checked against the deadline
        and the mark as they are at each millisecond, so a renewal that arrives during it
        counts, and a close or a loss stops it at the next millisecond (an IdgenError: the
        IDs already made in the batch are not returned)."""
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"idgen: count must be a whole number; got {count!r}")
        if count < 0:
            raise ValueError(f"idgen: count must be at least 0; got {count}")
        ids: list[int] = []
        left = count
        with self._lock:
            max_sequence = self._max_sequence
            monotonic_ns = self._monotonic_ns
            time_ns = self._time_ns
            while left:
                # The bounds read afresh each millisecond: the renewal thread moves them on
                # without this lock.
                mono = monotonic_ns()
                if mono >= self._deadline_ns:
                    raise self._stopped()
                if mono < self._resume_ns:
                    raise self._not_yet(mono)
                now = time_ns() // 1_000_000
                last = self._last_ms
                if now > last:
                    if now >= self._limit_ms or now < self._epoch_ms:
                        raise self._out_of_term(now)
                    self._last_ms = now
                    self._sequence = sequence = 0
                    base = self._base = ((now - self._epoch_ms) << self._shift) | self._node
                elif last - now > self._tolerance_ms:
                    raise self._behind(last - now)
                else:
                    sequence = self._sequence + 1
                    if sequence > max_sequence:
                        self._next_millisecond()
                        sequence = 0
                    base = self._base
                # The rest of this millisecond's sequence, dated as checked above.
                take = min(left, max_sequence - sequence + 1)
                first = base | sequence
                ids.extend(range(first, first + take))
                self._sequence = sequence + take - 1
                left -= take
        return ids

    def _next_millisecond(self) -> int:
        """This millisecond is used up: waits for the next (at most the tolerance and a ms),
        then issues its first ID. Called with the lock held."""
        last = self._last_ms
        while True:
            now = self._time_ns() // 1_000_000
            if now > last:
                break
            if last - now > self._tolerance_ms:
                raise self._behind(last - now)
            if self._monotonic_ns() >= self._deadline_ns:
                raise self._stopped()
        # The checks again: the wait took time, and a signal handler may have closed us.
        if self._monotonic_ns() >= self._deadline_ns:
            raise self._stopped()
        if now >= self._limit_ms or now < self._epoch_ms:
            raise self._out_of_term(now)
        self._last_ms = now
        self._sequence = 0
        base = self._base = ((now - self._epoch_ms) << self._shift) | self._node
        return base

    def _stopped(self) -> IdgenError:
        """Why the deadline check failed: closed, lost or forked (`_STOPPED`), else expired."""
        if self._state != _VALID:
            return self._refusal()
        return _expired()

    def _refusal(self) -> IdgenError:
        state = self._state
        if state == _LOST:
            return IdgenError("idgen: the lease is lost: the service gave the number up", code="lost")
        if state == _FORKED:
            return IdgenError(
                "idgen: the generator is closed: it was inherited through fork, and its lease is "
                "the parent process's; a process must lease its own generator",
                code="closed",
            )
        return IdgenError(f"idgen: the lease is {state}", code="closed")

    def _not_yet(self, mono: int) -> IdgenError:
        wait_ms = math.ceil((self._resume_ns - mono) / 1_000_000)
        return IdgenError(f"idgen: the previous holder's term ends in {wait_ms} ms", code="not-yet")

    def _behind(self, by_ms: int) -> IdgenError:
        return IdgenError(f"idgen: the clock is {by_ms} ms behind the last ID's millisecond", code="clock-behind")

    def _out_of_term(self, now: int) -> IdgenError:
        if now < self._epoch_ms:
            return IdgenError("idgen: the clock is before the layout's epoch", code="clock-behind")
        if now >= self._end_ms:
            return IdgenError("idgen: the layout's last millisecond has passed", code="expired")
        return IdgenError("idgen: the wall clock reached the lease's mark before a renewal moved it", code="expired")

    # -- the terms ----------------------------------------------------------------------------

    @property
    def terms(self) -> LeaseTerms:
        """The terms the service gave, with the latest `validUntilMs` (no later than the
        layout's end: the first millisecond no ID may be dated in)."""
        terms = self._terms.copy()
        terms["layout"] = self._terms["layout"].copy()
        terms["validUntilMs"] = self._limit_ms
        return terms

    @property
    def clock(self) -> Clock:
        """The clock the generator reads."""
        return self._clock

    @property
    def worker(self) -> int:
        return self._terms["worker"]

    @property
    def datacenter(self) -> int:
        return self._terms["datacenter"]

    @property
    def renewals(self) -> int:
        """Renewals confirmed by the service."""
        return self._renewals

    @property
    def failed_renewals(self) -> int:
        """Renewals that failed (503, no answer, a bad answer): the terms were kept."""
        return self._failed_renewals

    @property
    def state(self) -> State:
        """`valid`, `lost` (the service answered 410 or 404), `closed` (by `close()`, a
        signal, or inherited through fork), or `expired` (past the deadline)."""
        state = self._state
        if state == _VALID:
            return "expired" if self._monotonic_ns() >= self._deadline_ns else "valid"
        return "lost" if state == _LOST else "closed"

    def __repr__(self) -> str:
        return f"<LeasedGenerator datacenter {self.datacenter} worker {self.worker} {self.state}>"

    # -- renewing -----------------------------------------------------------------------------

    def _start(self) -> None:
        # A daemon: a program that ends without close() is not kept alive; its lease runs out.
        self._thread = threading.Thread(
            target=self._renew_loop, name=f"idgen renewal of worker {self.worker}", daemon=True
        )
        self._thread.start()

    def _renew_loop(self) -> None:
        # Scheduled on the generator's clock; the wait itself is real time.
        monotonic_ns = self._monotonic_ns
        period_ns = round(self._period_s * 1e9)
        due = monotonic_ns() + period_ns
        while not self._stop.wait(max(0, due - monotonic_ns()) / 1e9):
            due = monotonic_ns() + period_ns
            try:
                if not self._renew():
                    return
            except Exception:  # never let the thread die while the lease is valid
                with self._term_lock:
                    self._failed_renewals += 1

    def _renew(self) -> bool:
        """One renewal; False once there is nothing more to renew. Called by the renewal
        thread only (the one writer that moves the bounds on); never takes the issuing lock,
        so it applies during a `next_ids` batch."""
        if self._state != _VALID:
            return False
        sent_ns = 0
        response: Response | None
        try:
            # Not retried here: the next renewal is the retry, and a failed one keeps the terms.
            response, sent_ns, _ = self._client._timed_request(
                "POST",
                f"{self._lease_path}/renew",
                retries=0,
                timeout=self._renew_timeout,
                monotonic_ns=self._monotonic_ns,
            )
        except IdgenError:
            response = None  # the service is away: keep the terms
        renewed: tuple[int, int] | None = None
        if response is not None and response.status == 200:
            try:
                answer = response.json()
            except ValueError:
                answer = None
            # Terms for another lease (a leaseId, worker or datacenter not this one's) are no
            # renewal of this one: kept as a failed renewal.
            if isinstance(answer, dict) and all(
                name not in answer or _is_same(answer[name], self._terms[name]) for name in _SAME_LEASE
            ):
                until, server_now = answer.get("validUntilMs"), answer.get("serverNowMs")
                if _is_int(until) and _is_int(server_now):
                    renewed = (cast(int, until), cast(int, server_now))
        with self._term_lock:
            # Checked under the lock the stops are written under: a close, a loss or a fork
            # is never overwritten by a later deadline.
            if self._state != _VALID:
                return False
            if renewed is not None:
                until, server_now = renewed
                # Moved on, never back. The deadline first: the issuing path reads both
                # without a lock, and each bound holds on its own.
                self._deadline_ns = max(self._deadline_ns, sent_ns + (until - server_now) * 1_000_000)
                self._limit_ms = max(self._limit_ms, min(until, self._end_ms))
                self._renewals += 1
            elif response is not None and response.status in (404, 410):
                self._state = _LOST
                self._deadline_ns = _STOPPED
                return False
            else:
                self._failed_renewals += 1
        return True

    # -- giving the number back ---------------------------------------------------------------

    def close(self) -> None:
        """Stops issuing and gives the number back: it is free after the last ID's
        millisecond. Safe to call more than once. An IdgenError if the service refused."""
        self._close(from_signal=False)

    def __enter__(self) -> LeasedGenerator:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def _close(self, *, from_signal: bool) -> None:
        last_used = self._stop_issuing(from_signal=from_signal)
        if last_used is not None:
            self._release(last_used, from_signal=from_signal)

    def _stop_issuing(self, *, from_signal: bool) -> int | None:
        """Stops issuing and renewing: the last millisecond used, or None when there is
        nothing (more) to give back (closed already, lost, or inherited through fork)."""
        self._stop.set()
        with self._term_lock:
            state = self._state
            if state == _VALID:
                self._state = _CLOSED
                self._deadline_ns = _STOPPED
                self._closer = threading.get_ident()
        if state != _VALID:
            if state != _CLOSED:  # a closed one is forgotten when its release ends
                _forget(self)
            return None
        # No ID is begun from here on; one under way (a batch stops at its next millisecond)
        # ends before the issuing lock is ours, so the last millisecond read is the last used.
        with self._lock:
            last_used = max(self._last_ms, self._terms["resumeAfterMs"])
            if from_signal:
                # The handler may have interrupted a next_id of this thread that read the clock
                # and will still return its ID: cover it.
                last_used = max(last_used, min(self._time_ns() // 1_000_000, self._limit_ms - 1))
        return last_used

    def _release(self, last_used: int, *, from_signal: bool) -> None:
        try:
            if from_signal:
                # The process is ending: one quick try (the number expires after its TTL anyway).
                response = self._client.request(
                    "DELETE",
                    self._lease_path,
                    {"lastUsedMs": last_used},
                    retries=0,
                    timeout=min(_SIGNAL_RELEASE_TIMEOUT_S, self._client.timeout),
                )
            else:
                response = self._client.request("DELETE", self._lease_path, {"lastUsedMs": last_used})
        finally:
            self._released.set()
            _forget(self)
        thread = self._thread
        if not from_signal and thread is not None and thread is not threading.current_thread():
            thread.join(self._renew_timeout + 0.5)
        if response.status not in (204, 410):
            raise IdgenError(f"idgen: release: {response.status} {_reason(response)}", status=response.status)

    def _release_on_signal(self, last_used: int) -> None:
        try:
            self._release(last_used, from_signal=True)
        except Exception:  # the number then expires after its TTL
            pass

    def _handle_signals(self) -> None:
        _signalled[self] = None
        for signum in (signal.SIGTERM, signal.SIGINT):
            current = signal.getsignal(signum)
            if current is _on_signal or current == signal.SIG_IGN:
                continue  # ours already; or ignored, so the signal would not end the process: left so
            _previous[signum] = current
            signal.signal(signum, _on_signal)

    # -- fork ---------------------------------------------------------------------------------

    def _inherited(self) -> None:
        """In a forked child, at once (its only thread): closed, with nothing to release.
        Fresh locks and event: one held by a parent's thread at the fork stays held in the
        child, whose copy of that thread does not run."""
        self._lock = threading.RLock()
        self._term_lock = threading.RLock()
        self._stop = threading.Event()
        self._stop.set()
        self._thread = None
        self._state = _FORKED
        self._deadline_ns = _STOPPED


# Every generator of this process, for the fork hook.
_live: weakref.WeakSet[LeasedGenerator] = weakref.WeakSet()

# The generators that give their number back on SIGTERM and SIGINT (an ordered set), each
# until its release has ended, and per signal handled the handler there was before. One
# handler serves them all and passes the signal on once, after the last release (with a
# handler per generator, each passing the signal on to the one installed before it, a
# generator closed earlier cut those before it out of the chain).
_signalled: dict[LeasedGenerator, None] = {}
_previous: dict[int, _Handler] = {}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    previous = _previous.get(signum)
    # Handled once: a second signal while the numbers go back acts as it would have.
    _restore_signals()
    _release_all()
    # Then end as the signal would have.
    signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _release_all() -> None:
    """Every generator that handles signals gives its number back, all at once (a thread
    each: a service that does not answer holds the process a second, not a second a
    generator); a release under way in another thread (a close()) is waited for as long.
    Each stops issuing here, in the thread the handler interrupted: it may hold the
    generators' (reentrant) locks."""
    give_up = time.monotonic() + _SIGNAL_RELEASE_TIMEOUT_S
    here = threading.get_ident()
    releases: list[threading.Thread] = []
    under_way: list[threading.Event] = []
    for generator in list(_signalled):
        try:
            last_used = generator._stop_issuing(from_signal=True)
        except Exception:  # its number expires after its TTL; the others still go back
            continue
        if last_used is not None:
            releases.append(
                threading.Thread(
                    target=generator._release_on_signal,
                    args=(last_used,),
                    name=f"idgen release of worker {generator.worker}",
                    daemon=True,
                )
            )
        elif generator._state == _CLOSED and generator._closer != here:
            # (A close() of this thread, interrupted, cannot end before the handler does.)
            under_way.append(generator._released)
    started: list[threading.Thread] = []
    for thread in releases:
        try:
            thread.start()
            started.append(thread)
        except RuntimeError:  # no new thread (the interpreter is ending): one after another
            thread.run()
    for thread in started:
        thread.join()  # bounded by the request's timeout
    for released in under_way:
        released.wait(max(0.0, give_up - time.monotonic()))


def _forget(generator: LeasedGenerator) -> None:
    _signalled.pop(generator, None)
    if not _signalled:
        _restore_signals()


def _restore_signals() -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # the handler stays, and passes the signal on once nothing is left to release
    # Forgotten only once put back: the handler may run in between (and then puts it back).
    for signum, previous in list(_previous.items()):
        if signal.getsignal(signum) is _on_signal:
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        _previous.pop(signum, None)


def _after_fork_in_child() -> None:
    # The parent's generators are not the child's to release: its handlers only pass the
    # signal on.
    _signalled.clear()
    for generator in list(_live):
        try:
            generator._inherited()
        except Exception:  # pragma: no cover - nothing above raises; never fail a fork
            pass


os.register_at_fork(after_in_child=_after_fork_in_child)
