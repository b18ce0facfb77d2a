"""How fast the package makes IDs: `python3 bench.py <url> <token file>`.

Prints one JSON line: `local_ids_per_s` (a leased generator's `next_id()` in a loop),
`local_batch_ids_per_s` (its `next_ids(1000)`), `http_ids_per_s` (`Client.ids(1000)` in a
loop), about 3 s each, and the local/HTTP ratio.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Callable

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "src"))

from idgen_client import Client, IdgenError, LeasedGenerator  # noqa: E402

SECONDS = 3.0


def _rate(run: Callable[[], int]) -> float:
    count = 0
    start = time.perf_counter()
    end = start + SECONDS
    while True:
        count += run()
        now = time.perf_counter()
        if now >= end:
            return count / (now - start)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: bench.py <url> <token file>")
    url, token_file = sys.argv[1:3]
    with open(token_file, encoding="utf-8") as file:
        token = file.read().strip()
    with LeasedGenerator.lease(url, token=token, holder=f"bench pid {os.getpid()}") as generator:
        # Wait for the previous holder's term to end.
        while True:
            try:
                generator.next_id()
                break
            except IdgenError as error:
                if error.code != "not-yet":
                    raise
                time.sleep(0.01)
        next_id = generator.next_id
        next_ids = generator.next_ids

        def loop() -> int:
            for _ in range(10_000):
                next_id()
            return 10_000

        def batch() -> int:
            for _ in range(10):
                next_ids(1000)
            return 10_000

        local = _rate(loop)
        local_batch = _rate(batch)
    client = Client(url)

    def over_http() -> int:
        return len(client.ids(1000))

    remote = _rate(over_http)
    print(
        json.dumps(
            {
                "local_ids_per_s": round(local),
                "local_batch_ids_per_s": round(local_batch),
                "http_ids_per_s": round(remote),
                "local_over_http": round(local / remote, 1),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
