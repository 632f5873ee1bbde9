#!/usr/bin/env bash
# Start a loopback-only Prometheus whose TSDB is backfilled from an OpenMetrics file.
#
#   start-prom.sh OM_FILE DATA_DIR PORT     backfill (if needed) + start (if needed); prints the URL
#   start-prom.sh --install-only            only make sure prometheus + promtool are installed
#
# OM_FILE   OpenMetrics text (timestamps in seconds, ends with "# EOF"), plain or gzip (.gz or
#           gzip magic bytes).
# DATA_DIR  working directory owned by this script (created if missing):
#             tsdb/              the Prometheus storage (promtool blocks + whatever the server writes)
#             backfill.stamp     sha256 of OM_FILE + promtool version the blocks were built from
#             prometheus.yml     config with NO scrape jobs (nothing ever lands in the head)
#             prometheus.pid     pid of the server;  port: its port;  prometheus.log: its output
#             start-prom.log     what this script did, with timings
# PORT      TCP port on 127.0.0.1.
#
# Idempotent: if a server started by this script for DATA_DIR is alive, answers /-/ready on PORT and
# was built from the same file, it is left alone (URL printed again). A different file or port stops
# that server first. The backfill is skipped when backfill.stamp matches.
# stdout carries only the URL (last line); logs go to stderr and DATA_DIR/start-prom.log.
#
# Exit codes: 0 ok; 1 failure (backfill, start, readiness); 2 usage;
#             3 prometheus/promtool missing and cannot be installed here (not Linux, no apt-get,
#               not root and no password-less sudo, or apt-get failed).
#
# Installation: Debian/Ubuntu package `prometheus` (Debian 12: 2.42, promtool included), installed
# with --no-install-recommends (keeps prometheus-node-exporter out). The packaged service (systemd or
# sysv init, if the package's postinst started it) is stopped right after our install; a service
# that was already installed before is never touched.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
READY_TIMEOUT="${PROM_READY_TIMEOUT:-60}"   # seconds to wait for /-/ready
LOGFILE=""

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
log() {
  local line
  line="[start-prom $(date -u +%H:%M:%S)] $*"
  echo "$line" >&2
  if [ -n "$LOGFILE" ]; then echo "$line" >>"$LOGFILE"; fi
}
die() { local code="$1"; shift; log "ERROR: $*"; exit "$code"; }

# ----------------------------------------------------------------------------- install
ensure_installed() {
  if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    return 0
  fi
  [ "$(uname -s)" = Linux ] || die 3 "prometheus/promtool not found and this is not Linux"
  command -v apt-get >/dev/null 2>&1 || die 3 "prometheus/promtool not found and no apt-get to install them"
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo=(sudo -n)
    else
      die 3 "prometheus/promtool not found; installing needs root (or password-less sudo)"
    fi
  fi
  local t0 apt
  t0="$(now)"
  apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600)
  log "installing prometheus (apt-get update + install --no-install-recommends)"
  "${apt[@]}" update -qq >&2 || die 3 "apt-get update failed"
  "${apt[@]}" install -y -qq --no-install-recommends prometheus >&2 \
    || die 3 "apt-get install prometheus failed"
  # The postinst may have started the packaged service on 0.0.0.0:9090 (it does not in containers
  # whose policy-rc.d denies service starts). It is not ours to keep running.
  if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
    if systemctl is-active --quiet prometheus 2>/dev/null; then
      log "stopping and disabling the packaged prometheus.service"
      "${sudo[@]}" systemctl stop prometheus || true
    fi
    "${sudo[@]}" systemctl disable prometheus >/dev/null 2>&1 || true
  elif [ -x /etc/init.d/prometheus ] && [ -f /run/prometheus/prometheus.pid ] \
       && kill -0 "$(cat /run/prometheus/prometheus.pid)" 2>/dev/null; then
    log "stopping the packaged prometheus sysv service"
    "${sudo[@]}" /etc/init.d/prometheus stop >&2 || true
  fi
  command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 \
    || die 3 "prometheus installed but prometheus/promtool still not on PATH"
  log "installed $(prometheus --version 2>&1 | head -1) in $(elapsed "$t0") s"
}

if [ "${1:-}" = "--install-only" ]; then
  ensure_installed
  exit 0
fi
[ $# -eq 3 ] || { echo "usage: $0 OM_FILE DATA_DIR PORT | $0 --install-only" >&2; exit 2; }
OM_FILE="$1"; DATA_DIR="$2"; PORT="$3"
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] || die 2 "bad PORT: $PORT"
[ -f "$OM_FILE" ] || die 2 "OpenMetrics file not found: $OM_FILE"
mkdir -p "$DATA_DIR"
DATA_DIR="$(cd "$DATA_DIR" && pwd -P)"
OM_FILE="$(cd "$(dirname "$OM_FILE")" && pwd -P)/$(basename "$OM_FILE")"
TSDB="$DATA_DIR/tsdb"
PIDFILE="$DATA_DIR/prometheus.pid"
URL="http://127.0.0.1:${PORT}"
LOGFILE="$DATA_DIR/start-prom.log"

# One start-prom.sh per DATA_DIR at a time. fd 9 must not leak into prometheus (see `9>&-` below),
# otherwise the server would hold the lock for its whole life.
exec 9>"$DATA_DIR/.start-prom.lock"
if command -v flock >/dev/null 2>&1; then flock 9; fi

ensure_installed

# ----------------------------------------------------------------------------- helpers
# GET $URL/-/ready -> 0 if HTTP 200. curl if present, else wget, else bash's /dev/tcp.
http_ready() {
  if command -v curl >/dev/null 2>&1; then
    curl -sf -m 2 -o /dev/null "$URL/-/ready"
  elif command -v wget >/dev/null 2>&1; then
    wget -q -T 2 -t 1 -O /dev/null "$URL/-/ready"
  else
    (
      exec 3<>"/dev/tcp/127.0.0.1/$PORT" || exit 1
      printf 'GET /-/ready HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
      IFS= read -r -t 2 status <&3 || exit 1
      [[ "$status" == HTTP/*" 200"* ]]
    ) 2>/dev/null
  fi
}

# Is $1 a live (non-zombie) prometheus process serving our TSDB?
is_our_server() {
  local pid="$1" state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)"
  [ "$state" != Z ] && [ "$state" != X ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "--storage.tsdb.path=$TSDB"
}

file_sha256() { sha256sum "$1" | cut -d' ' -f1; }

# ----------------------------------------------------------------------------- already running?
STAMP="sha256=$(file_sha256 "$OM_FILE") promtool=$(promtool --version 2>&1 | head -1 | awk '{print $3}') max-block-duration=168h"
OLD_PID="$(cat "$PIDFILE" 2>/dev/null || true)"
if is_our_server "$OLD_PID"; then
  if [ "$(cat "$DATA_DIR/backfill.stamp" 2>/dev/null)" = "$STAMP" ] \
     && [ "$(cat "$DATA_DIR/port" 2>/dev/null)" = "$PORT" ] && http_ready; then
    log "already running: pid $OLD_PID at $URL"
    echo "$URL"
    exit 0
  fi
  log "a server (pid $OLD_PID) runs on $DATA_DIR with another file/port or is not ready: stopping it"
  "$HERE/stop-prom.sh" "$DATA_DIR" >&2
elif [ -n "$OLD_PID" ]; then
  log "removing stale pid file (pid $OLD_PID is gone)"
  rm -f "$PIDFILE"
fi

# ----------------------------------------------------------------------------- backfill
if [ -d "$TSDB" ] && [ "$(cat "$DATA_DIR/backfill.stamp" 2>/dev/null)" = "$STAMP" ]; then
  log "TSDB already built from this file ($(du -sh "$TSDB" | cut -f1)); backfill skipped"
else
  rm -rf "$TSDB" "$TSDB.tmp" "$DATA_DIR/backfill.stamp" "$DATA_DIR/input.om"
  INPUT="$OM_FILE"
  if [[ "$OM_FILE" == *.gz ]] || [ "$(head -c2 "$OM_FILE" | od -An -tx1 | tr -d ' \n')" = 1f8b ]; then
    t0="$(now)"
    gzip -dc "$OM_FILE" >"$DATA_DIR/input.om"   # promtool mmaps its input: needs a plain file
    INPUT="$DATA_DIR/input.om"
    log "decompressed $(basename "$OM_FILE") ($(du -h "$INPUT" | cut -f1)) in $(elapsed "$t0") s"
  fi
  t0="$(now)"
  # --max-block-duration (a hidden flag in 2.42): promtool re-reads the whole input once per output
  # block, so a few big blocks instead of one per 2 h is much faster on long inputs.
  if ! promtool tsdb create-blocks-from openmetrics --max-block-duration=168h \
        "$INPUT" "$TSDB.tmp" >"$DATA_DIR/backfill.log" 2>&1; then
    tail -20 "$DATA_DIR/backfill.log" >&2
    rm -rf "$TSDB.tmp" "$DATA_DIR/input.om"
    die 1 "promtool backfill failed (see $DATA_DIR/backfill.log)"
  fi
  rm -f "$DATA_DIR/input.om"
  mv "$TSDB.tmp" "$TSDB"
  echo "$STAMP" >"$DATA_DIR/backfill.stamp"
  log "backfilled $(grep -c '^[0-9A-Z]\{26\} ' "$DATA_DIR/backfill.log" || true) block(s) in $(elapsed "$t0") s ($(du -sh "$TSDB" | cut -f1))"
fi

# ----------------------------------------------------------------------------- start
if http_ready; then
  die 1 "something else already answers on $URL (port $PORT in use)"
fi
# No scrape_configs: nothing is ever appended to the head, so retention (relative to the newest
# block) never deletes the backfilled history. The retention flag is belt and braces.
cat >"$DATA_DIR/prometheus.yml" <<'EOF'
# written by start-prom.sh: no scrape jobs on purpose
global:
  scrape_interval: 30s
  evaluation_interval: 30s
EOF
echo "$PORT" >"$DATA_DIR/port"
t0="$(now)"
# All fds redirected (stdin from /dev/null, stdout/stderr to the log, lock fd closed) so a caller
# that captures our output (pytest's subprocess.run) is not kept waiting by the server.
nohup prometheus \
  --config.file="$DATA_DIR/prometheus.yml" \
  --storage.tsdb.path="$TSDB" \
  --storage.tsdb.retention.time=100y \
  --web.listen-address="127.0.0.1:$PORT" \
  --web.enable-lifecycle \
  </dev/null >>"$DATA_DIR/prometheus.log" 2>&1 9>&- &
PID=$!
echo "$PID" >"$PIDFILE"
deadline=$(( $(date +%s) + READY_TIMEOUT ))
until http_ready; do
  if ! kill -0 "$PID" 2>/dev/null; then
    tail -20 "$DATA_DIR/prometheus.log" >&2
    rm -f "$PIDFILE"
    die 1 "prometheus exited during start-up (see $DATA_DIR/prometheus.log)"
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    tail -20 "$DATA_DIR/prometheus.log" >&2
    "$HERE/stop-prom.sh" "$DATA_DIR" >&2 || true
    die 1 "prometheus not ready after ${READY_TIMEOUT}s"
  fi
  sleep 0.05
done
# Ready could in theory come from another process that grabbed the port; make sure ours is alive.
is_our_server "$PID" || die 1 "prometheus (pid $PID) is not running after /-/ready answered"
log "started pid $PID on $URL, ready in $(elapsed "$t0") s"
echo "$URL"
