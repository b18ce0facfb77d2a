#!/usr/bin/env bash
# The client packages' speed, one process each on this machine: a leased generator's
# nextId/next_id in a loop and its batch call (1,000 at a time), against Client.ids(1000)
# over HTTP from the same process, in one run against one release-built `idgen serve`.
# Twice: on the default layout (12 sequence bits: 4,096 IDs per ms per number is a ceiling
# of the layout, not of the code) and on one with 16 sequence bits (the code's own speed).
#
#   benches/clients.sh        # about 40 s; writes target/idgen-bench/clients.txt
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/idgen-bench
mkdir -p "$out"
cargo build --release -p idgen-cli

work=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && { kill -INT $pid 2>/dev/null; wait $pid 2>/dev/null; }; rm -rf "$work"' EXIT
echo "bench-token-$$" >"$work/token"

run() { # name, layout flags...
    local name=$1
    shift
    local port
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    rm -rf "$work/leases"
    target/release/idgen serve --listen "127.0.0.1:$port" --lease-dir "$work/leases" \
        --blocks-dir "$work/blocks" --workers 0-3 --lease-api-token-file "$work/token" "$@" \
        >"$work/service.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    local url="http://127.0.0.1:$port"
    echo "$name node   $(node clients/node/bench.mjs "$url" "$work/token")"
    echo "$name python $(python3 clients/python/bench.py "$url" "$work/token")"
    kill -INT $pid
    wait $pid 2>/dev/null || true
    pid=""
}

{
    echo "$(date -u +%FT%TZ) $(nproc) cores, node $(node --version), $(python3 --version)"
    run default
    run seq16 --datacenter-bits 1 --worker-bits 5 --sequence-bits 16
} | tee "$out/clients.txt"
