#!/usr/bin/env bash
# Stop the Prometheus that start-prom.sh started for DATA_DIR, by its pid file (never by name).
#
#   stop-prom.sh DATA_DIR [TIMEOUT_SECONDS]
#
# Sends SIGTERM, waits up to TIMEOUT (default 30 s) for the process to exit (a zombie counts as
# exited), then SIGKILL and waits again. The pid is only signalled if /proc/PID/cmdline is a
# prometheus serving DATA_DIR/tsdb (guards against a recycled pid). A missing/stale pid file is
# not an error. Exit 0 when no server for DATA_DIR is left running.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 DATA_DIR [TIMEOUT_SECONDS]" >&2; exit 2; }
[ -d "$1" ] || { echo "[stop-prom] no such directory: $1 (nothing to stop)" >&2; exit 0; }
DATA_DIR="$(cd "$1" && pwd -P)"
TIMEOUT="${2:-30}"
PIDFILE="$DATA_DIR/prometheus.pid"
TSDB="$DATA_DIR/tsdb"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
log() {
  local line="[stop-prom $(date -u +%H:%M:%S)] $*"
  echo "$line" >&2
  echo "$line" >>"$DATA_DIR/start-prom.log" 2>/dev/null || true
}

alive() {  # live, non-zombie process that is our prometheus
  local pid="$1" state
  [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--storage.tsdb.path=$TSDB"
}

wait_gone() {  # pid seconds -> 0 if gone in time
  local pid="$1" deadline=$(( $(date +%s) + $2 ))
  while alive "$pid"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

PID="$(cat "$PIDFILE" 2>/dev/null || true)"
if [ -z "$PID" ]; then
  log "no pid file in $DATA_DIR: nothing to stop"
  exit 0
fi
if ! alive "$PID"; then
  log "pid $PID is not a running prometheus for $DATA_DIR: removing stale pid file"
  rm -f "$PIDFILE"
  exit 0
fi
t0="$(now)"
kill -TERM "$PID" 2>/dev/null || true
if ! wait_gone "$PID" "$TIMEOUT"; then
  log "pid $PID still running ${TIMEOUT}s after SIGTERM: SIGKILL"
  kill -KILL "$PID" 2>/dev/null || true
  wait_gone "$PID" 10 || { log "ERROR: pid $PID survived SIGKILL"; exit 1; }
fi
rm -f "$PIDFILE"
log "stopped pid $PID in $(elapsed "$t0") s"
