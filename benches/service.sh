#!/usr/bin/env bash
# Load test of the HTTP service on loopback with wrk (Debian's `wrk` package), beside the
# in-process `next_ids` figure, in one run. Writes the "HTTP service" section of
# docs/benchmarks.md (between its markers) and target/idgen-bench/service.txt.
#
#   benches/service.sh            # 10 s per scenario, 2 wrk threads, 32 connections
set -euo pipefail
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
seconds=${SECONDS_PER_RUN:-10}
connections=${CONNECTIONS:-32}
out=target/idgen-bench
mkdir -p "$out"

cargo build --release -p idgen-cli
in_process=$(cargo bench --bench in_process_batches -- 1000 2>/dev/null | grep '^{')

lease_dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
target/release/idgen serve --listen "127.0.0.1:$port" --lease-dir "$lease_dir" >"$out/service.log" 2>&1 &
pid=$!
trap 'kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$lease_dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

run() { wrk -t2 -c"$connections" -d"${seconds}s" --latency "http://127.0.0.1:$port/v1/ids?count=$1"; }
one=$(run 1)
thousand=$(run 1000)
printf '%s\n\n%s\n' "$one" "$thousand" >"$out/service.txt"

python3 - "$in_process" "$seconds" "$connections" <<'PY' "$one" "$thousand"
import json, re, sys, pathlib, datetime, subprocess
in_process = json.loads(sys.argv[1]); seconds, connections = sys.argv[2], sys.argv[3]
one, thousand = sys.argv[4], sys.argv[5]

def parse(text):
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    lat = {p: re.search(rf"\s{p}%\s+([\d.]+\w+)", text).group(1) for p in ("50", "90", "99")}
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    errors = re.search(r"Socket errors: (.*)", text)
    return rps, lat, int(bad.group(1)) if bad else 0, errors.group(1) if errors else "none"

r1, l1, bad1, err1 = parse(one)
r1000, l1000, bad1000, err1000 = parse(thousand)
ids_http = r1000 * 1000
ids_local = in_process["ids_per_second"]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
cores = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
section = f"""<!-- service -->
## HTTP service (`idgen serve`, loopback)

Measured {datetime.date.today()} on {cores} cores ({cpu}), with wrk, the service and the
in-process run sharing the machine, in one run of `benches/service.sh`: wrk with 2 threads
and {connections} connections for {seconds} s per scenario, `GET /v1/ids?count=N`, default
layout (ceiling 4,096,000 IDs/s per worker).

| scenario | requests/s | IDs/s | p50 | p90 | p99 | non-2xx | socket errors |
|---|---|---|---|---|---|---|---|
| count=1 | {r1:,.0f} | {r1:,.0f} | {l1['50']} | {l1['90']} | {l1['99']} | {bad1} | {err1} |
| count=1000 | {r1000:,.0f} | {ids_http:,.0f} | {l1000['50']} | {l1000['90']} | {l1000['99']} | {bad1000} | {err1000} |

In-process `next_ids(1000)` from one thread (`cargo bench --bench in_process_batches`):
{ids_local:,.0f} IDs/s. The service at count=1000 delivers **{ids_http / ids_local:.2f}x** that;
at count=1 it delivers **{r1 / ids_local:.4f}x** (one request per ID: the HTTP round trip,
not the generator, is the cost). Both the in-process run and the service at count=1000 are
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
