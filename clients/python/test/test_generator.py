"""The leased generator's bit maths and clock rules on a fake clock (injected, `clock=`),
without a service (`lease()` talks to a stub on 127.0.0.1):
`python3 -m unittest discover -s test` from clients/python."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType
from typing import Any, Callable

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
sys.path.insert(0, SRC)

from idgen_client import Client, Clock, IdgenError, LeasedGenerator, SystemClock  # noqa: E402
from idgen_client._leased import _STOPPED, _parse_epoch  # noqa: E402

EPOCH_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
NOW_MS = 1_800_000_000_000
MS = 1_000_000


class FakeClock:
    """A `Clock` the test moves by hand; `wall_step_ms`: how far each wall reading moves it
    on after being read."""

    def __init__(self) -> None:
        self.wall_ms = NOW_MS
        self.wall_step_ms = 0
        self.mono_ns = 10_000 * MS

    def time_ns(self) -> int:
        wall_ms = self.wall_ms
        self.wall_ms += self.wall_step_ms
        return wall_ms * MS

    def monotonic_ns(self) -> int:
        return self.mono_ns


def terms(**changes: Any) -> dict[str, Any]:
    value: dict[str, Any] = {
        "leaseId": "00ff",
        "datacenter": 3,
        "worker": 5,
        "ttlMs": 3000,
        "resumeAfterMs": NOW_MS - 1,
        "validUntilMs": NOW_MS + 3000,
        "renewEveryMs": 1000,
        "serverNowMs": NOW_MS,
        "layout": {
            "timeBits": 41,
            "datacenterBits": 5,
            "workerBits": 5,
            "sequenceBits": 12,
            "epoch": "2024-01-01T00:00:00.000Z",
        },
    }
    value.update(changes)
    return value


class Stub:
    """A lease API on 127.0.0.1 for `lease()`: the terms above (with `changes`), a first
    renewal answered `renewed` (status, body), every later one 503; the release's body kept
    in `released`, the first `busy_releases` releases answered 503. A renewal sets `arrived`,
    then waits for `gate` (when set to an Event) before answering."""

    def __init__(self, renewed: tuple[int, object] = (503, None), *, busy_releases: int = 0, **changes: Any) -> None:
        self.terms = terms(**changes)
        self.renewed = renewed
        self.renewals = 0
        self.released: object = None
        self.releases = 0
        self.busy_releases = busy_releases
        self.gate: threading.Event | None = None
        self.arrived = threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.answer(*stub.post(self.path))

            def do_DELETE(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                stub.releases += 1
                if stub.releases <= stub.busy_releases:
                    self.answer(503, {"error": "busy"})
                    return
                stub.released = body
                self.answer(204, None)

            def answer(self, status: int, body: object) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    def post(self, path: str) -> tuple[int, object]:
        if path == "/v1/generators/lease":
            return 200, self.terms
        if path == "/v1/generators/00ff/renew":
            self.arrived.set()
            if self.gate is not None:
                self.gate.wait(10)
            self.renewals += 1
            return self.renewed if self.renewals == 1 else (503, {"error": "away"})
        return 404, {"error": "no such path"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Stub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


class Releases:
    """A lease API on 127.0.0.1 for several generators: the Nth lease (from 0) is worker N,
    lease ID N repeated; its release's body is kept in `released[N]`, `arrived[N]` set, and
    the answer sent `delays[N]` seconds later, and noted in `answered` only if the client
    still waits for it (its connection open)."""

    def __init__(self, delays: list[float]) -> None:
        self.delays = delays
        self.leases = 0
        self.released: dict[int, Any] = {}
        self.arrived = [threading.Event() for _ in delays]
        self.answered: list[int] = []
        self.lock = threading.Lock()
        releases = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                with releases.lock:
                    index = releases.leases
                    releases.leases += 1
                now = int(time.time() * 1000)
                body = terms(
                    leaseId=str(index) * 32,
                    worker=index,
                    resumeAfterMs=now - 1,
                    validUntilMs=now + 60_000,
                    serverNowMs=now,
                    renewEveryMs=60_000,
                )
                self.answer(200, json.dumps(body).encode())

            def do_DELETE(self) -> None:
                index = int(self.path[-1])
                releases.released[index] = json.loads(self.rfile.read(int(self.headers["content-length"])))
                releases.arrived[index].set()
                time.sleep(releases.delays[index])
                # A client gone (a process that ended) has closed its end: readable, at its end.
                if select.select([self.connection], [], [], 0)[0]:
                    try:
                        if not self.connection.recv(1, socket.MSG_PEEK):
                            return
                    except OSError:
                        return
                releases.answered.append(index)
                self.answer(204, b"")

            def answer(self, status: int, data: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.01,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> Releases:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


# Four generators with signal handling: 1 closed, 3 closing in another thread, then a
# wait for the signal.
SEVERAL_GENERATORS = """
import sys, threading, time
sys.path.insert(0, sys.argv[2])
from idgen_client import LeasedGenerator
generators = [LeasedGenerator.lease(sys.argv[1], token="t") for _ in range(4)]
generators[1].close()
threading.Thread(target=generators[3].close).start()
print("leased", flush=True)
while True:
    time.sleep(60)
"""


class SteppingClock(FakeClock):
    """Each wall reading moves both clocks a millisecond on; the reading of `hook_at_ms`
    first calls `hook` (once)."""

    def __init__(self, hook_at_ms: int, hook: Callable[[], None]) -> None:
        super().__init__()
        self.hook_at_ms = hook_at_ms
        self.hook: Callable[[], None] | None = hook

    def time_ns(self) -> int:
        hook = self.hook
        if self.wall_ms == self.hook_at_ms and hook is not None:
            self.hook = None
            hook()
        wall_ms = self.wall_ms
        self.wall_ms += 1
        self.mono_ns += MS
        return wall_ms * MS


class Signals:
    """SIGTERM and SIGINT as they were, put back on leaving; SIGTERM set to a Python handler
    that records the signals it gets in `received`."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.saved = [(signum, signal.getsignal(signum)) for signum in (signal.SIGTERM, signal.SIGINT)]

    def record(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)

    def wait(self, seconds: float) -> None:
        """Until a signal is recorded (the handlers run between bytecodes), at most `seconds`."""
        give_up = time.monotonic() + seconds
        while not self.received and time.monotonic() < give_up:
            time.sleep(0.001)

    def __enter__(self) -> Signals:
        signal.signal(signal.SIGTERM, self.record)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.saved:
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


class GeneratorTest(unittest.TestCase):
    def setUp(self) -> None:
        self.clocks = FakeClock()

    def generator(self, **changes: Any) -> LeasedGenerator:
        mono = self.clocks.mono_ns
        return LeasedGenerator(Client("http://127.0.0.1:9"), terms(**changes), mono, mono, clock=self.clocks)

    def code(self, generator: LeasedGenerator) -> str:
        with self.assertRaises(IdgenError) as caught:
            generator.next_id()
        return caught.exception.code

    def test_bits(self) -> None:
        generator = self.generator()
        first = generator.next_id()
        self.assertEqual(first, ((NOW_MS - EPOCH_MS) << 22) | (3 << 17) | (5 << 12))
        self.assertEqual(generator.next_id(), first + 1)
        self.assertEqual(generator.next_ids(3), [first + 2, first + 3, first + 4])

    def test_epoch(self) -> None:
        self.assertEqual(_parse_epoch("2024-01-01T00:00:00Z"), EPOCH_MS)
        self.assertEqual(_parse_epoch("2024-01-01T00:00:00.123456Z"), EPOCH_MS + 123)
        self.assertEqual(_parse_epoch("2024-01-01T01:00:00+01:00"), EPOCH_MS)
        with self.assertRaises(ValueError):
            _parse_epoch("2024-01-01T00:00:00")

    def test_bad_layouts(self) -> None:
        for layout in (
            {"timeBits": 41, "datacenterBits": 5, "workerBits": 5, "sequenceBits": 13, "epoch": "2024-01-01T00:00:00Z"},
            {"timeBits": 41.0, "datacenterBits": 5, "workerBits": 5, "sequenceBits": 12, "epoch": "2024-01-01T00:00:00Z"},
            {"timeBits": 43, "datacenterBits": -2, "workerBits": 5, "sequenceBits": 12, "epoch": "2024-01-01T00:00:00Z"},
            {"timeBits": 41, "datacenterBits": 5, "workerBits": 5, "sequenceBits": 12, "epoch": "yesterday"},
        ):
            with self.assertRaises(IdgenError):
                self.generator(layout=layout)
        with self.assertRaises(IdgenError):
            self.generator(worker=32)

    def test_not_yet_then_term(self) -> None:
        generator = self.generator(resumeAfterMs=NOW_MS + 50)
        self.assertEqual(self.code(generator), "not-yet")
        self.clocks.mono_ns += 50 * MS
        # Monotonic time has come, but the wall clock is behind the previous mark.
        self.assertEqual(self.code(generator), "clock-behind")
        self.clocks.wall_ms += 51
        self.assertEqual(generator.next_id() >> 22, NOW_MS + 51 - EPOCH_MS)

    def test_deadline_and_mark(self) -> None:
        generator = self.generator()
        generator.next_id()
        self.clocks.mono_ns += 3000 * MS
        self.assertEqual(generator.state, "expired")
        self.assertEqual(self.code(generator), "expired")
        # A wall clock running ahead meets the mark first.
        generator = self.generator()
        self.clocks.wall_ms += 3000
        self.assertEqual(self.code(generator), "expired")
        self.clocks.wall_ms -= 1
        self.assertEqual(generator.next_id() >> 22, NOW_MS + 2999 - EPOCH_MS)

    def test_resume_from_arrival_deadline_from_send(self) -> None:
        # The service read its clock (serverNowMs) somewhere between the send and the arrival:
        # the term's start counts from the arrival, its end from the send.
        sent_ns = self.clocks.mono_ns
        received_ns = sent_ns + 200 * MS
        self.clocks.mono_ns = received_ns
        generator = LeasedGenerator(
            Client("http://127.0.0.1:9"),
            terms(resumeAfterMs=NOW_MS + 50, validUntilMs=NOW_MS + 3000),
            sent_ns,
            received_ns,
            clock=self.clocks,
        )
        resume_ns = received_ns + 50 * MS
        deadline_ns = sent_ns + 3000 * MS
        self.clocks.wall_ms = NOW_MS + 251  # past the previous holder's mark
        self.clocks.mono_ns = sent_ns + 50 * MS + 1  # the resume instant counted from the send
        self.assertEqual(self.code(generator), "not-yet")
        self.clocks.mono_ns = resume_ns - 1
        with self.assertRaises(IdgenError) as caught:
            generator.next_id()
        self.assertEqual(caught.exception.code, "not-yet")
        self.assertIn("ends in 1 ms", str(caught.exception))
        self.clocks.mono_ns = resume_ns
        first = generator.next_id()
        self.assertEqual(first >> 22, NOW_MS + 251 - EPOCH_MS)
        self.clocks.wall_ms = NOW_MS + 2999  # before the mark: only the deadline stops it
        self.clocks.mono_ns = deadline_ns - 1
        self.assertEqual(generator.next_id() >> 22, NOW_MS + 2999 - EPOCH_MS)
        self.assertEqual(generator.state, "valid")
        self.clocks.mono_ns = deadline_ns  # before received_ns + 3000 ms
        self.assertEqual(generator.state, "expired")
        self.assertEqual(self.code(generator), "expired")
        with self.assertRaises(IdgenError) as caught:
            generator.next_ids(2)
        self.assertEqual(caught.exception.code, "expired")

    def test_clock_back(self) -> None:
        generator = self.generator()
        first = generator.next_id()
        self.clocks.wall_ms -= 10
        self.assertEqual(generator.next_id(), first + 1)  # ridden out
        self.clocks.wall_ms -= 1
        self.assertEqual(self.code(generator), "clock-behind")
        self.clocks.wall_ms += 12
        self.assertEqual(generator.next_id() >> 22, NOW_MS + 1 - EPOCH_MS)

    def test_sequence_exhausted(self) -> None:
        generator = self.generator()
        ids = generator.next_ids(4096)
        self.assertEqual(ids[-1] & 4095, 4095)
        # The wall clock moves on a millisecond at each reading: the first still reads NOW_MS.
        self.clocks.wall_step_ms = 1
        following = generator.next_id()
        self.assertEqual(following >> 22, NOW_MS + 1 - EPOCH_MS)
        self.assertEqual(following & 4095, 0)
        more = generator.next_ids(5000)
        self.assertEqual(more, sorted(set(more)))
        self.assertGreater(more[0], following)

    def test_clock_argument(self) -> None:
        clock: Clock = self.clocks
        self.assertIs(self.generator().clock, clock)
        self.assertIsInstance(SystemClock(), Clock)
        mono = time.monotonic_ns()
        generator = LeasedGenerator(Client("http://127.0.0.1:9"), terms(), mono, mono)
        self.assertIsInstance(generator.clock, SystemClock)
        with self.assertRaises(TypeError):
            LeasedGenerator(Client("http://127.0.0.1:9"), terms(), mono, mono, clock=object())  # type: ignore[arg-type]

    def test_lease_on_the_clock(self) -> None:
        # A day ahead of the real monotonic clock, and frozen: a request timed or a renewal
        # scheduled on the real clock would put the bounds far from these.
        start_ns = self.clocks.mono_ns = time.monotonic_ns() + 86_400_000 * MS
        renewed = (200, {"validUntilMs": NOW_MS + 10_000, "serverNowMs": NOW_MS})
        with Stub(renewed, resumeAfterMs=NOW_MS + 50, renewEveryMs=10) as stub:
            generator = LeasedGenerator.lease(stub.url, token="t", handle_signals=False, clock=self.clocks, retries=0)
            try:
                self.assertEqual(self.code(generator), "not-yet")
                # The first renewal, sent at start_ns on this clock, moves the deadline to
                # start_ns + 10 s (the lease's was start_ns + 3 s); the later ones fail.
                give_up = time.monotonic() + 5
                while generator.renewals < 1 and time.monotonic() < give_up:
                    time.sleep(0.005)
                self.assertEqual(generator.renewals, 1)
                self.clocks.mono_ns = start_ns + 50 * MS
                self.clocks.wall_ms = NOW_MS + 51
                self.assertEqual(generator.next_id() >> 22, NOW_MS + 51 - EPOCH_MS)
                self.clocks.mono_ns = start_ns + 10_000 * MS - 1
                self.clocks.wall_ms = NOW_MS + 9_999
                self.assertEqual(generator.next_id() >> 22, NOW_MS + 9_999 - EPOCH_MS)
                self.clocks.mono_ns += 1
                self.assertEqual(self.code(generator), "expired")
            finally:
                generator.close()
            self.assertEqual(stub.released, {"lastUsedMs": NOW_MS + 9_999})
            self.assertEqual(generator.state, "closed")
            self.assertEqual(self.code(generator), "closed")

    def test_close_and_lost_stop_at_once(self) -> None:
        with Stub() as stub:
            generator = LeasedGenerator.lease(stub.url, token="t", handle_signals=False, clock=self.clocks)
            first = generator.next_id()
            generator.close()
            self.assertEqual(stub.released, {"lastUsedMs": NOW_MS})
            self.assertEqual(generator.state, "closed")
            self.assertEqual(self.code(generator), "closed")
            with self.assertRaises(IdgenError) as caught:
                generator.next_ids(1)
            self.assertEqual(caught.exception.code, "closed")
            generator.close()  # again: nothing
        with Stub((410, {"error": "gone"}), renewEveryMs=10) as stub:
            generator = LeasedGenerator.lease(stub.url, token="t", handle_signals=False, clock=self.clocks)
            self.assertEqual(generator.next_id(), first)
            give_up = time.monotonic() + 5
            while generator.state == "valid" and time.monotonic() < give_up:
                time.sleep(0.005)
            self.assertEqual(generator.state, "lost")
            self.assertEqual(self.code(generator), "lost")
            generator.close()  # lost: nothing to give back
            self.assertIsNone(stub.released)

    def test_fork_closes_the_child(self) -> None:
        # The parent's locks held at the fork by another thread (as the renewal thread may):
        # the child's generator must not wait for them, issue, or release the parent's lease.
        with Stub() as stub, Signals() as signals:
            mono = self.clocks.mono_ns
            generator = LeasedGenerator(Client(stub.url), terms(), mono, mono, clock=self.clocks)
            first = generator.next_id()
            generator._handle_signals()
            held, done = threading.Event(), threading.Event()

            def hold() -> None:
                with generator._lock, generator._term_lock:
                    held.set()
                    done.wait(10)

            holder = threading.Thread(target=hold)
            holder.start()
            self.assertTrue(held.wait(5))
            reading, writing = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: report through the pipe, and never return
                code = 1
                try:
                    os.close(reading)
                    report: dict[str, object] = {"state": generator.state}
                    for name, call in (("next_id", generator.next_id), ("next_ids", lambda: generator.next_ids(2))):
                        try:
                            report[name] = call()
                        except IdgenError as error:
                            report[name] = [error.code, str(error)]
                    os.kill(os.getpid(), signal.SIGTERM)
                    signals.wait(5)
                    report["received"] = signals.received
                    report["handler restored"] = signal.getsignal(signal.SIGTERM) == signals.record
                    generator.close()
                    report["closed"] = generator.state
                    os.write(writing, json.dumps(report).encode())
                    code = 0
                finally:
                    os._exit(code)
            os.close(writing)
            done.set()
            holder.join()
            give_up = time.monotonic() + 10
            status = None
            while time.monotonic() < give_up:
                finished, status = os.waitpid(pid, os.WNOHANG)
                if finished:
                    break
                time.sleep(0.01)
            else:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(reading)
                self.fail("the forked child hung (a lock held at the fork)")
            with os.fdopen(reading, "rb") as pipe:
                result: Any = json.loads(pipe.read() or b"null")
            self.assertEqual(status, 0, result)
            fork_message = "inherited through fork"
            self.assertEqual(result["state"], "closed")
            for name in ("next_id", "next_ids"):
                self.assertEqual(result[name][0], "closed", result)
                self.assertIn(fork_message, result[name][1])
            self.assertEqual(result["received"], [signal.SIGTERM])
            self.assertTrue(result["handler restored"])
            self.assertEqual(result["closed"], "closed")
            # Nothing released by the child; the parent's generator goes on.
            self.assertIsNone(stub.released)
            self.assertEqual(generator.state, "valid")
            self.assertEqual(generator.next_id(), first + 1)
            generator.close()
            self.assertEqual(stub.released, {"lastUsedMs": NOW_MS})

    def test_release_on_signal_is_quick(self) -> None:
        # A service that takes the connection and never answers.
        with socket.socket() as blackhole, Signals() as signals:
            blackhole.bind(("127.0.0.1", 0))
            blackhole.listen(8)
            client = Client(f"http://127.0.0.1:{blackhole.getsockname()[1]}", retries=1, timeout=4.0)
            mono = self.clocks.mono_ns
            generator = LeasedGenerator(client, terms(), mono, mono, clock=self.clocks)
            generator.next_id()
            generator._handle_signals()
            start = time.monotonic()
            os.kill(os.getpid(), signal.SIGTERM)
            signals.wait(15)
            took = time.monotonic() - start
            # Passed on to the previous handler after one try of at most a second.
            self.assertEqual(signals.received, [signal.SIGTERM])
            self.assertLess(took, 2.5)
            self.assertEqual(generator.state, "closed")
            blackhole.setblocking(False)
            tries = 0
            while True:
                try:
                    blackhole.accept()[0].close()
                except BlockingIOError:
                    break
                tries += 1
            self.assertEqual(tries, 1)

    def test_signal_releases_every_generator(self) -> None:
        # Four generators in a child process: 0 and 2 valid at the signal, 1 closed before it,
        # 3 closing in another thread (its release held by the service) when it comes. The
        # service answers the releases at different times, 2's at once: a process that ends
        # after some releases, or that passes over one, keeps numbers.
        with Releases([0.2, 0.0, 0.0, 0.3]) as service:
            child = subprocess.Popen(
                [sys.executable, "-c", SEVERAL_GENERATORS, service.url, SRC],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None and child.stderr is not None
            line, status = "", None
            try:
                if select.select([child.stdout], [], [], 10)[0]:
                    line = child.stdout.readline()
                if line == "leased\n" and service.arrived[3].wait(10):
                    child.send_signal(signal.SIGTERM)
                    status = child.wait(10)
            finally:
                if child.poll() is None:
                    child.kill()
                    child.wait()
                errors = child.stderr.read()
                child.stdout.close()
                child.stderr.close()
            self.assertEqual(line, "leased\n", errors)
            self.assertTrue(service.arrived[3].is_set(), errors)
            self.assertEqual(status, -signal.SIGTERM, errors)
            self.assertEqual(sorted(service.released), [0, 1, 2, 3])
            for index, body in service.released.items():
                self.assertIsInstance(body["lastUsedMs"], int, index)
            self.assertEqual(sorted(service.answered), [0, 1, 2, 3], "releases answered to the child")

    def test_close_keeps_the_retries(self) -> None:
        with Stub(busy_releases=1) as stub:
            mono = self.clocks.mono_ns
            generator = LeasedGenerator(Client(stub.url, backoff=0.01), terms(), mono, mono, clock=self.clocks)
            generator.next_id()
            generator.close()
            self.assertEqual(stub.releases, 2)
            self.assertEqual(stub.released, {"lastUsedMs": NOW_MS})

    def test_renewal_for_another_lease(self) -> None:
        with Stub() as stub:
            mono = self.clocks.mono_ns
            generator = LeasedGenerator(Client(stub.url, retries=0), terms(), mono, mono, clock=self.clocks)
            answer = dict(terms(validUntilMs=NOW_MS + 10_000), layout=None)
            for change in ({"leaseId": "0100"}, {"worker": 6}, {"datacenter": 4}, {"worker": True}, {"leaseId": None}):
                stub.renewals, stub.renewed = 0, (200, dict(answer, **change))
                self.assertTrue(generator._renew())
            self.assertEqual((generator.renewals, generator.failed_renewals), (0, 5))
            self.assertEqual(generator.terms["validUntilMs"], NOW_MS + 3000)
            self.clocks.mono_ns += 3000 * MS
            self.assertEqual(self.code(generator), "expired")
            # Its own terms (and an answer without those fields) renew it.
            self.clocks.mono_ns -= 3000 * MS
            for body in (answer, {"validUntilMs": NOW_MS + 20_000, "serverNowMs": NOW_MS}):
                stub.renewals, stub.renewed = 0, (200, body)
                self.assertTrue(generator._renew())
            self.assertEqual((generator.renewals, generator.failed_renewals), (2, 5))
            self.assertEqual(generator.terms["validUntilMs"], NOW_MS + 20_000)
            self.clocks.mono_ns += 3000 * MS
            self.assertEqual(generator.state, "valid")

    def test_renewal_during_a_batch(self) -> None:
        # A batch of 40 ms on a term of 20: the renewal made 10 ms in must apply to the rest.
        generator: LeasedGenerator | None = None

        def renew() -> None:
            assert generator is not None
            thread = threading.Thread(target=generator._renew)
            thread.start()
            thread.join(1)  # the renewal does not wait for the batch

        clocks = SteppingClock(NOW_MS + 10, renew)
        with Stub((200, {"validUntilMs": NOW_MS + 10_000, "serverNowMs": NOW_MS})) as stub:
            mono = clocks.mono_ns
            generator = LeasedGenerator(
                Client(stub.url, retries=0), terms(validUntilMs=NOW_MS + 20), mono, mono, clock=clocks
            )
            ids = generator.next_ids(4096 * 40)
            self.assertEqual(generator.renewals, 1)
            self.assertEqual(len(ids), 4096 * 40)
            self.assertEqual(ids[-1] >> 22, NOW_MS + 39 - EPOCH_MS)
            self.assertEqual(ids, sorted(set(ids)))

    def test_renewal_never_overwrites_a_stop(self) -> None:
        renewed = (200, {"validUntilMs": NOW_MS + 10_000, "serverNowMs": NOW_MS})
        with Stub(renewed) as stub:
            stub.gate = threading.Event()
            mono = self.clocks.mono_ns
            generator = LeasedGenerator(Client(stub.url, retries=0), terms(), mono, mono, clock=self.clocks)
            results: list[bool] = []
            thread = threading.Thread(target=lambda: results.append(generator._renew()))
            thread.start()
            self.assertTrue(stub.arrived.wait(5))
            generator.close()  # while the renewal's request is under way
            self.assertEqual(stub.released, {"lastUsedMs": NOW_MS - 1})
            stub.gate.set()
            thread.join(5)
            self.assertEqual(results, [False])
            self.assertEqual(stub.renewals, 1)
            self.assertEqual(generator.renewals, 0)
            self.assertEqual(generator._deadline_ns, _STOPPED)
            self.assertEqual(self.code(generator), "closed")

    def test_terms_end_at_the_layout_end(self) -> None:
        # A layout of 2^40 ms that ends a second after NOW_MS: a mark past it is reported as
        # the layout's end, the issuing limit.
        end_ms = NOW_MS + 1000
        epoch = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(milliseconds=end_ms - (1 << 40))
        layout = {
            "timeBits": 40,
            "datacenterBits": 5,
            "workerBits": 5,
            "sequenceBits": 13,
            "epoch": epoch.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        }
        generator = self.generator(layout=layout, validUntilMs=NOW_MS + 3000)
        self.assertEqual(generator.terms["validUntilMs"], end_ms)
        self.clocks.wall_ms = end_ms - 1
        self.assertEqual(generator.next_id() >> 23, (1 << 40) - 1)
        self.clocks.wall_ms = end_ms
        self.assertEqual(self.code(generator), "expired")

    def test_handle_signals_off_main_thread(self) -> None:
        errors: list[BaseException] = []

        def lease() -> None:
            try:
                LeasedGenerator.lease("http://127.0.0.1:9", token="t")
            except BaseException as error:  # noqa: BLE001
                errors.append(error)

        thread = threading.Thread(target=lease)
        thread.start()
        thread.join()
        self.assertIsInstance(errors[0], ValueError)
        self.assertIn("handle_signals=False", str(errors[0]))


if __name__ == "__main__":
    unittest.main()
