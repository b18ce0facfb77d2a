"""A process issuing IDs on a leased number with the package, for cli/tests/clients.rs (the
same protocol as the Node.js package's test/issuer.mjs):

    python3 issuer.py <url> <token file> <out file> <plan>

plan: `N` (issue N IDs, then close), `until-signal` (issue until SIGTERM or SIGINT: the
generator releases its number and the process ends by the signal), `until-stopped` (issue
until the generator stops, expired or lost; exit 0 without close), `until-stopped+K` (the
same, then close the stopped generator, lease again and issue K more, then close). The
lease is taken patiently: a 409 (every number held) is tried again every 100 ms for at most
a minute, else exit 1.

Every ID is appended to the out file as 8 little-endian bytes (written in whole records, so
a process killed mid-run leaves whole ones). Prints JSON lines, flushed at once:
`{"leased": terms}` each time it holds a number, `{"ended": {"count", "stoppedBy",
"validUntilMs", "renewals", "failedRenewals", "waits": {"not-yet", "clock-behind"}}}` each
time a lease's issuing ends, and `{"renewed": {"renewals", "failedRenewals"}}` whenever
either count changes. A refusal to wait (not-yet, clock-behind) is counted and retried a
millisecond later. The until-* plans are paced (100 IDs, then a millisecond's sleep); a
count is issued as fast as the generator goes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
from array import array
from types import FrameType

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from idgen_client import IdgenError, LeasedGenerator  # noqa: E402

CHUNK = 8192  # IDs per write: 64 KiB
PATIENCE_S = 60.0

assert array("Q").itemsize == 8


_never = threading.Event()
_sleep_fails = False


def pause(seconds: float) -> None:
    """`time.sleep`, or a timed wait where it fails: under libfaketime (the skewed-clock
    test) Python 3.11's `time.sleep` answers EINVAL."""
    global _sleep_fails
    if not _sleep_fails:
        try:
            time.sleep(seconds)
            return
        except OSError:
            _sleep_fails = True
    _never.wait(seconds)


def say(value: object) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


class Out:
    """The IDs, written in whole 8-byte records."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.ids = array("Q")
        self.little = sys.byteorder == "little"

    def flush(self) -> None:
        ids = self.ids
        if not ids:
            return
        if not self.little:
            ids.byteswap()
        data = memoryview(ids.tobytes())
        self.ids = array("Q")
        while data:
            written = os.write(self.fd, data)
            data = data[written:]


def lease_patiently(url: str, token: str) -> LeasedGenerator:
    give_up = time.monotonic() + PATIENCE_S
    while True:
        try:
            return LeasedGenerator.lease(url, token=token, holder=f"issuer pid {os.getpid()}")
        except IdgenError as error:
            if error.status != 409 or time.monotonic() >= give_up:
                raise
        pause(0.1)


def issue(generator: LeasedGenerator, out: Out, count: int | None, paced: bool) -> str:
    """Issues `count` IDs (None: until the generator stops), prints the "ended" line and
    answers what stopped it."""
    batch = 100 if paced else 4096
    waits = {"not-yet": 0, "clock-behind": 0}
    issued = 0
    stopped_by = "count"
    renewals, failed_renewals = generator.renewals, generator.failed_renewals
    next_id = generator.next_id
    while count is None or issued < count:
        ids = out.ids
        todo = batch if count is None else min(batch, count - issued)
        waiting = False
        done = 0
        while done < todo:
            try:
                ids.append(next_id())
            except IdgenError as error:
                if error.code == "not-yet" or error.code == "clock-behind":
                    waits[error.code] += 1
                    waiting = True
                    break
                stopped_by = error.code
                break
            done += 1
        issued += done
        if len(ids) >= CHUNK:
            out.flush()
        if generator.renewals != renewals or generator.failed_renewals != failed_renewals:
            renewals, failed_renewals = generator.renewals, generator.failed_renewals
            say({"renewed": {"renewals": renewals, "failedRenewals": failed_renewals}})
        if stopped_by != "count":
            break
        if waiting or paced:
            pause(0.001)
    out.flush()
    say(
        {
            "ended": {
                "count": issued,
                "stoppedBy": stopped_by,
                "validUntilMs": generator.terms["validUntilMs"],
                "renewals": generator.renewals,
                "failedRenewals": generator.failed_renewals,
                "waits": waits,
            }
        }
    )
    return stopped_by


def lease(url: str, token: str) -> LeasedGenerator:
    generator = lease_patiently(url, token)
    say({"leased": generator.terms})
    return generator


def main() -> int:
    if len(sys.argv) != 5:
        print("usage: issuer.py <url> <token file> <out file> <N | until-signal | until-stopped[+K]>", file=sys.stderr)
        return 2
    url, token_file, out_file, plan = sys.argv[1:5]
    match = re.fullmatch(r"([0-9]+)|until-signal|until-stopped(?:\+([0-9]+))?", plan)
    if match is None:
        print(f"issuer: unknown plan {plan!r}", file=sys.stderr)
        return 2
    with open(token_file, encoding="utf-8") as file:
        token = file.read().strip()
    out = Out(out_file)

    # On SIGTERM/SIGINT the generator's handler releases its number, then passes the signal
    # on to this one: write the IDs still buffered, then end by the signal.
    def on_signal(signum: int, frame: FrameType | None) -> None:
        out.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    try:
        generator = lease(url, token)
        if match.group(1) is not None:
            if issue(generator, out, int(match.group(1)), paced=False) == "count":
                generator.close()
        elif plan == "until-signal":
            if issue(generator, out, None, paced=True) == "closed":
                # Closed by the generator's signal handler: the signal ends the process.
                while True:
                    pause(1)
        else:
            issue(generator, out, None, paced=True)
            more = match.group(2)
            if more is not None:
                # Given back, or it would go on renewing (a renewal the service still honours
                # makes a generator valid again) and hold the number against the new lease.
                try:
                    generator.close()
                except IdgenError as error:
                    print(f"issuer: {error} (the number expires by itself)", file=sys.stderr)
                generator = lease(url, token)
                if issue(generator, out, int(more), paced=False) == "count":
                    generator.close()
    except IdgenError as error:
        print(f"issuer: {error}", file=sys.stderr)
        return 1
    finally:
        out.flush()
        os.close(out.fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
