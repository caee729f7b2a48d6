#!/usr/bin/env bash
# make run: start upstream-sim and `tollgate serve` with the demo config, seed
# a demo customer and key, print curl commands; Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."

export TOLLGATE_ADMIN_TOKEN="${TOLLGATE_ADMIN_TOKEN:-demo-admin-token}"
export TOLLGATE_DATA_DIR="${TOLLGATE_DATA_DIR:-./tollgate-data}"
export TOLLGATE_LISTEN="${TOLLGATE_LISTEN:-127.0.0.1:8080}"
export TOLLGATE_ADMIN_LISTEN="${TOLLGATE_ADMIN_LISTEN:-127.0.0.1:8081}"
mkdir -p "$TOLLGATE_DATA_DIR"

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "stopping..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "stopped."
}
trap stop INT TERM EXIT

./bin/upstream-sim -listen 127.0.0.1:9090 2>"$TOLLGATE_DATA_DIR/upstream-sim.log" &
pids+=($!)
./bin/tollgate serve --config examples/demo.yaml 2>"$TOLLGATE_DATA_DIR/tollgate.log" &
pids+=($!)

if ! ./bin/tollgate demo --admin-url "http://$TOLLGATE_ADMIN_LISTEN" --gateway-url "http://$TOLLGATE_LISTEN"; then
  echo "tollgate did not start; the last lines of $TOLLGATE_DATA_DIR/tollgate.log:" >&2
  tail -n 20 "$TOLLGATE_DATA_DIR/tollgate.log" >&2
  exit 1
fi
echo "Logs: $TOLLGATE_DATA_DIR/tollgate.log and upstream-sim.log. Ctrl-C stops everything."
wait -n "${pids[@]}"
