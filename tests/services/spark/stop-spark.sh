#!/usr/bin/env bash
# Stop the Spark worker and master that start-spark.sh started for DATA_DIR, by their pid files
# (never by name).
#
#   stop-spark.sh DATA_DIR [TIMEOUT_SECONDS]
#
# The worker first (it kills the executors it launched), then the master. Each gets SIGTERM, up to
# TIMEOUT (default 30 s) to exit, then SIGKILL. A pid is only signalled if /proc/PID/cmdline names
# DATA_DIR/spark-defaults.conf (guards against a recycled pid). A missing or stale pid file is not
# an error. Exit 0 when no daemon for DATA_DIR is left running.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 DATA_DIR [TIMEOUT_SECONDS]" >&2; exit 2; }
[ -d "$1" ] || { echo "[stop-spark] no such directory: $1 (nothing to stop)" >&2; exit 0; }
DATA_DIR="$(cd "$1" && pwd -P)"
TIMEOUT="${2:-30}"

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
log() {
  local line="[stop-spark $(date -u +%H:%M:%S)] $*"
  echo "$line" >&2
  echo "$line" >>"$DATA_DIR/start-spark.log" 2>/dev/null || true
}

alive() {
  local pid="$1" state
  [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)" || return 1
  [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$DATA_DIR/spark-defaults.conf"
}

wait_gone() {  # pid seconds -> 0 if gone in time
  local pid="$1" deadline=$(( $(date +%s) + $2 ))
  while alive "$pid"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

status=0
for role in worker master; do
  pidfile="$DATA_DIR/$role.pid"
  pid="$(cat "$pidfile" 2>/dev/null || true)"
  if [ -z "$pid" ]; then
    continue
  fi
  if ! alive "$pid"; then
    rm -f "$pidfile"
    continue
  fi
  t0="$(now)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone "$pid" "$TIMEOUT"; then
    log "$role pid $pid still running ${TIMEOUT}s after SIGTERM: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || { log "ERROR: $role pid $pid survived SIGKILL"; status=1; continue; }
  fi
  rm -f "$pidfile"
  log "stopped the $role (pid $pid) in $(elapsed "$t0") s"
done
exit "$status"
