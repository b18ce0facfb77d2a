#!/usr/bin/env bash
# Load test of the HTTP service on loopback with wrk (Debian's `wrk` package), beside a
# baseline endpoint of the same server (`/healthz`: the cost of the HTTP stack itself) and
# the in-process `next_ids` figure, in one run. Writes the "HTTP service" section of
# docs/benchmarks.md (between its markers) and target/idgen-bench/service.txt.
#
#   benches/service.sh            # 10 s per scenario, 1 wrk thread, 32 connections
#
# wrk gets one thread: on a 2-core machine two wrk threads starve the server they measure.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
seconds=${SECONDS_PER_RUN:-10}
connections=${CONNECTIONS:-32}
threads=${WRK_THREADS:-1}
out=target/idgen-bench
mkdir -p "$out"

cargo build --release -p idgen-cli
in_process=$(cargo bench --bench in_process_batches -- 1000 2>/dev/null | grep '^{')

lease_dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/release/idgen serve --listen "127.0.0.1:$port" --lease-dir "$lease_dir/leases" >"$out/service.log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$lease_dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

load() { wrk -t"$threads" -c"$connections" -d"${seconds}s" --latency "http://127.0.0.1:$port$1"; }
baseline=$(load /healthz)
one=$(load "/v1/ids?count=1")
thousand=$(load "/v1/ids?count=1000")
printf '%s\n\n%s\n\n%s\n' "$baseline" "$one" "$thousand" >"$out/service.txt"

python3 - "$in_process" "$seconds" "$connections" "$threads" <<'PY' "$one" "$thousand" "$baseline"
import json, re, sys, pathlib, datetime, subprocess
in_process = json.loads(sys.argv[1]); seconds, connections, threads = sys.argv[2:5]
one, thousand, baseline = sys.argv[5], sys.argv[6], sys.argv[7]

def parse(text):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    lat = {p: re.search(rf"\s{p}%\s+([\d.]+\w+)", text).group(1) for p in ("50", "90", "99")}
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: (.*)", text)
    return rps, lat, int(bad.group(1)) if bad else 0, errors.group(1) if errors else "none"

rb, lb, badb, errb = parse(baseline)
r1, l1, bad1, err1 = parse(one)
r1000, l1000, bad1000, err1000 = parse(thousand)
ids_http = r1000 * 1000
ids_local = in_process["ids_per_second"]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
section = f"""<!-- service -->
## HTTP service (`idgen serve`, loopback)

Measured {datetime.date.today()} on {cores} cores ({cpu}), with wrk, the service and the
in-process run sharing the machine, in one run of `benches/service.sh`: wrk with {threads}
thread(s) (more would starve the server on 2 cores) and {connections} connections for
{seconds} s per scenario, default layout (ceiling 4,096,000 IDs/s per worker). The baseline
is `GET /healthz` on the same server: the cost of the HTTP stack itself.

| scenario | requests/s | IDs/s | p50 | p90 | p99 | non-2xx | socket errors |
|---|---|---|---|---|---|---|---|
| baseline `/healthz` | {rb:,.0f} | - | {lb['50']} | {lb['90']} | {lb['99']} | {badb} | {errb} |
| count=1 | {r1:,.0f} | {r1:,.0f} | {l1['50']} | {l1['90']} | {l1['99']} | {bad1} | {err1} |
| count=1000 | {r1000:,.0f} | {ids_http:,.0f} | {l1000['50']} | {l1000['90']} | {l1000['99']} | {bad1000} | {err1000} |

In-process `next_ids(1000)` from one thread (`cargo bench --bench in_process_batches`):
{ids_local:,.0f} IDs/s. At count=1 the service answers **{r1 / rb:.2f}x** the baseline's
requests per second (what issuing an ID adds to a request); at count=1000 it delivers
**{ids_http / ids_local:.2f}x** the in-process rate. Both the in-process run and the service at count=1000 are
held by the layout's ceiling ({ids_local / 4_096_000:.1%} and {ids_http / 4_096_000:.1%} of
4,096,000 IDs/s), so at that batch size the service costs no throughput.
<!-- /service -->"""
page = pathlib.Path("docs/benchmarks.md")
text = page.read_text()
if "<!-- service -->" in text:
    text = re.sub(r"<!-- service -->.*?<!-- /service -->", lambda _: section, text, flags=re.S)
else:
    text = text.rstrip("\n") + "\n\n" + section + "\n"
page.write_text(text)
print(section)
PY
