#!/usr/bin/env bash
# make run: start upstream-sim and `tollgate serve` with the demo config, seed
# a demo customer and key, print curl commands. Ctrl-C (SIGINT) or SIGTERM
# stops everything and exits 0 once tollgate has stopped cleanly (1 if it
# did not), so `make run` does not end in "make: *** Error 130".
# TOLLGATE_LISTEN, TOLLGATE_ADMIN_LISTEN and SIM_LISTEN move the listeners
# (the demo config is then written to the data directory with SIM_LISTEN
# in its base_urls); TOLLGATE_DEMO_CONFIG names another config, whose
# base_urls must name SIM_LISTEN.
set -euo pipefail
cd "$(dirname "$0")/.."

export TOLLGATE_ADMIN_TOKEN="${TOLLGATE_ADMIN_TOKEN:-demo-admin-token}"
export TOLLGATE_DATA_DIR="${TOLLGATE_DATA_DIR:-$PWD/tollgate-data}"
export TOLLGATE_LISTEN="${TOLLGATE_LISTEN:-127.0.0.1:8080}"
export TOLLGATE_ADMIN_LISTEN="${TOLLGATE_ADMIN_LISTEN:-127.0.0.1:8081}"
sim_listen="${SIM_LISTEN:-127.0.0.1:9090}"
config="${TOLLGATE_DEMO_CONFIG:-examples/demo.yaml}"
mkdir -p "$TOLLGATE_DATA_DIR"
if [ -z "${TOLLGATE_DEMO_CONFIG:-}" ] && [ "$sim_listen" != 127.0.0.1:9090 ]; then
	config="$TOLLGATE_DATA_DIR/demo.yaml"
	sed "s|http://127.0.0.1:9090/|http://$sim_listen/|" examples/demo.yaml >"$config"
fi

# A demo already running on these listeners (a second `make run`) must not
# be disturbed: its logs would be truncated and a key made on it.
for addr in "$sim_listen" "$TOLLGATE_LISTEN" "$TOLLGATE_ADMIN_LISTEN"; do
  host="${addr%:*}"; port="${addr##*:}"
  if (exec 3<>"/dev/tcp/${host:-127.0.0.1}/$port") 2>/dev/null; then
    echo "make run: $addr is already in use (a demo already running?): stop it, or move the listeners with SIM_LISTEN, TOLLGATE_LISTEN and TOLLGATE_ADMIN_LISTEN" >&2
    exit 1
  fi
done

pids=()
tollgate_pid=
stopped=0
tollgate_status=0

# stop ends every process started here, tollgate first: the streams it
# still relays get TOLLGATE_SHUTDOWN_GRACE to finish from upstream-sim,
# which is stopped only once tollgate has exited. It waits for them and
# sets tollgate_status to tollgate's exit status (0 after a clean shutdown).
stop() {
  [ "$stopped" = 1 ] && return
  stopped=1
  echo
  echo "stopping..."
  if [ -n "$tollgate_pid" ]; then
    kill -TERM "$tollgate_pid" 2>/dev/null || true
    wait "$tollgate_pid" 2>/dev/null || tollgate_status=$?
  fi
  stop_rest
  wait 2>/dev/null || true
  pids=()
  if [ "$tollgate_status" = 0 ]; then
    echo "stopped."
  else
    echo "tollgate stopped with status $tollgate_status; see $TOLLGATE_DATA_DIR/tollgate.log" >&2
  fi
}

# stop_rest sends SIGTERM to every process started here and not yet reaped.
stop_rest() {
  for p in ${pids[@]+"${pids[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
}

# interrupted is Ctrl-C or SIGTERM: the way this script is meant to end.
interrupted() {
  trap - INT TERM
  stop
  [ "$tollgate_status" = 0 ] && exit 0
  exit 1
}
trap interrupted INT TERM
# A second Ctrl-C while stop waits for tollgate ends this script at once;
# upstream-sim, which no Ctrl-C reaches, is then stopped here.
trap 'stop; stop_rest' EXIT

# upstream-sim gets a process group of its own (set -m), out of reach of
# the terminal's Ctrl-C, which goes to the foreground group: else it shut
# down in 10s and broke the streams tollgate was still relaying. stop ends
# it after tollgate. ($! is still its pid; setsid is not on macOS.)
set -m
./bin/upstream-sim -listen "$sim_listen" 2>>"$TOLLGATE_DATA_DIR/upstream-sim.log" &
pids+=($!)
set +m
./bin/tollgate serve --config "$config" 2>>"$TOLLGATE_DATA_DIR/tollgate.log" &
tollgate_pid=$!
pids+=($tollgate_pid)

# The URLs the demo prints must be ones curl takes: a listen address may
# leave its host out (":8081", the documented form) or name every
# interface, which a client reaches at the loopback address. tollgate demo
# derives the LLM API's URL from TOLLGATE_LISTEN so itself.
admin_host="${TOLLGATE_ADMIN_LISTEN%:*}"
case "$admin_host" in
  "" | 0.0.0.0) admin_host=127.0.0.1 ;;
  "[::]") admin_host="[::1]" ;;
esac
# tollgate demo waits up to 30 s for the admin API; a tollgate serve that
# exits meanwhile (a config it refuses, a data directory another process
# holds) ends the wait at once, so that its reason is shown without delay.
./bin/tollgate demo --admin-url "http://$admin_host:${TOLLGATE_ADMIN_LISTEN##*:}" &
demo_pid=$!
pids+=($demo_pid)
demo_status=
while kill -0 "$demo_pid" 2>/dev/null; do
  if ! kill -0 "$tollgate_pid" 2>/dev/null; then
    # An HTTP client, with nothing to finish; its "Killed" notice hidden.
    { kill -KILL "$demo_pid" || true; wait "$demo_pid" || true; } 2>/dev/null
    demo_status=1
    break
  fi
  sleep 0.2
done
if [ -z "$demo_status" ]; then
  demo_status=0
  wait "$demo_pid" || demo_status=$?
fi
unset 'pids[${#pids[@]}-1]'
if [ "$demo_status" != 0 ]; then
  echo "tollgate did not start; the last lines of $TOLLGATE_DATA_DIR/tollgate.log:" >&2
  tail -n 20 "$TOLLGATE_DATA_DIR/tollgate.log" >&2
  exit 1
fi
echo "Logs: $TOLLGATE_DATA_DIR/tollgate.log and upstream-sim.log. Ctrl-C stops everything."
status=0
wait -n "${pids[@]}" || status=$?
# tollgate and upstream-sim exit 0 only when told to stop (SIGINT or
# SIGTERM): a Ctrl-C that reached them before this shell, which then may
# not run its INT trap (bash's wait for a child that handled SIGINT). That
# is a stop as Ctrl-C asks for, not a process ending on its own.
[ "$status" = 0 ] && interrupted
# Only a process that ended on its own gets here.
echo "a demo process exited on its own (status $status); the last lines of $TOLLGATE_DATA_DIR/tollgate.log:" >&2
tail -n 20 "$TOLLGATE_DATA_DIR/tollgate.log" >&2
exit 1
