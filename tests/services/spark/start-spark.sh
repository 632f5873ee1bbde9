#!/usr/bin/env bash
# Start a real standalone Spark cluster on 127.0.0.1: one master and one worker, both launched by
# the pyspark package's own `bin/spark-class` (no Spark download, no local mode), on Java 17.
#
#   start-spark.sh DATA_DIR MASTER_PORT MASTER_WEBUI_PORT WORKER_PORT WORKER_WEBUI_PORT
#
# DATA_DIR  working directory owned by this script (created if missing):
#             conf/                 an empty SPARK_CONF_DIR (nothing from the machine leaks in)
#             spark-defaults.conf   the daemons' properties file (also what marks them as ours)
#             work/                 SPARK_WORKER_DIR: the executors' folders and their logs
#             local/                SPARK_LOCAL_DIRS: shuffle and spill files
#             master.pid, worker.pid, master.log, worker.log, start-spark.log (with timings)
# PORTs     TCP ports on 127.0.0.1 (the caller picks free ones).
#
# Environment: SPARK_HOME (default: the pyspark package of PYTHON, default the repo's
# .venv/bin/python), JAVA_HOME or java on PATH (Java 17), SPARK_WORKER_CORES (default 2),
# SPARK_WORKER_MEMORY (default 2g), SPARK_READY_TIMEOUT (default 60 s).
#
# Ready means: the master's JSON (http://127.0.0.1:MASTER_WEBUI_PORT/json/) lists the worker as
# ALIVE. On failure both daemons are stopped and the logs' tails printed.
# stdout carries only the master URL spark://127.0.0.1:MASTER_PORT (last line); logs go to stderr.
#
# Exit codes: 0 ok; 1 start failure or not ready in time; 2 usage; 3 java or pyspark missing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
READY_TIMEOUT="${SPARK_READY_TIMEOUT:-60}"
LOGFILE=""

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
log() {
  local line
  line="[start-spark $(date -u +%H:%M:%S)] $*"
  echo "$line" >&2
  if [ -n "$LOGFILE" ]; then echo "$line" >>"$LOGFILE"; fi
}
die() { local code="$1"; shift; log "ERROR: $*"; exit "$code"; }

[ $# -eq 5 ] || {
  echo "usage: $0 DATA_DIR MASTER_PORT MASTER_WEBUI_PORT WORKER_PORT WORKER_WEBUI_PORT" >&2
  exit 2
}
DATA_DIR="$1"; MASTER_PORT="$2"; MASTER_WEBUI_PORT="$3"; WORKER_PORT="$4"; WORKER_WEBUI_PORT="$5"
for p in "$MASTER_PORT" "$MASTER_WEBUI_PORT" "$WORKER_PORT" "$WORKER_WEBUI_PORT"; do
  [[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65535 ] || die 2 "bad port: $p"
done
mkdir -p "$DATA_DIR"
DATA_DIR="$(cd "$DATA_DIR" && pwd -P)"
LOGFILE="$DATA_DIR/start-spark.log"

# ----------------------------------------------------------------------------- java, pyspark
if [ -n "${JAVA_HOME:-}" ]; then
  JAVA="$JAVA_HOME/bin/java"
else
  JAVA="$(command -v java || true)"
fi
[ -n "$JAVA" ] && [ -x "$JAVA" ] \
  || die 3 "java not found (Debian: apt-get install openjdk-17-jre-headless)"
JAVA_VERSION="$("$JAVA" -version 2>&1 | head -1)"
if [ -z "${SPARK_HOME:-}" ]; then
  PYTHON="${PYTHON:-$ROOT/.venv/bin/python}"
  SPARK_HOME="$("$PYTHON" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))' \
                2>/dev/null)" || die 3 "pyspark is not installed for $PYTHON (pip install pyspark)"
fi
[ -x "$SPARK_HOME/bin/spark-class" ] || die 3 "no bin/spark-class under SPARK_HOME=$SPARK_HOME"
export SPARK_HOME

# ----------------------------------------------------------------------------- helpers
MASTER_URL="spark://127.0.0.1:${MASTER_PORT}"
JSON_URL="http://127.0.0.1:${MASTER_WEBUI_PORT}/json/"

alive_workers() {  # the master's count of ALIVE workers, or nothing
  curl -sf -m 2 "$JSON_URL" 2>/dev/null \
    | grep -o '"aliveworkers" *: *[0-9]*' | grep -o '[0-9]*$' || true
}

is_ours() {  # pid -> 0 if a live (non-zombie) JVM started with our properties file
  local pid="$1" state
  [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
  state="$(sed 's/^.*) //' "/proc/$pid/stat" | cut -d' ' -f1)"
  [ "$state" != Z ] && [ "$state" != X ] || return 1
  tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null | grep -qxF -- "$DATA_DIR/spark-defaults.conf"
}

fail_with_logs() {
  local msg="$1"
  for f in master.log worker.log; do
    if [ -f "$DATA_DIR/$f" ]; then
      echo "----- last lines of $DATA_DIR/$f" >&2
      tail -25 "$DATA_DIR/$f" >&2
    fi
  done
  "$HERE/stop-spark.sh" "$DATA_DIR" >&2 || true
  die 1 "$msg"
}

for role in master worker; do
  if is_ours "$(cat "$DATA_DIR/$role.pid" 2>/dev/null || true)"; then
    die 1 "a $role started for $DATA_DIR is still running (stop-spark.sh $DATA_DIR first)"
  fi
  rm -f "$DATA_DIR/$role.pid"
done

# ----------------------------------------------------------------------------- configuration
mkdir -p "$DATA_DIR/conf" "$DATA_DIR/work" "$DATA_DIR/local"
cat >"$DATA_DIR/spark-defaults.conf" <<EOF
# written by start-spark.sh: a loopback-only test cluster
spark.ui.reverseProxy false
spark.master.rest.enabled false
spark.worker.cleanup.enabled false
EOF
export SPARK_CONF_DIR="$DATA_DIR/conf"
export SPARK_LOCAL_IP=127.0.0.1
export SPARK_MASTER_HOST=127.0.0.1
export SPARK_LOCAL_DIRS="$DATA_DIR/local"
export SPARK_WORKER_DIR="$DATA_DIR/work"
export SPARK_DAEMON_MEMORY="${SPARK_DAEMON_MEMORY:-512m}"
# the daemons and the executors they launch see UTC, whatever the machine's zone
export SPARK_DAEMON_JAVA_OPTS="-Duser.timezone=UTC ${SPARK_DAEMON_JAVA_OPTS:-}"
export TZ=UTC
CORES="${SPARK_WORKER_CORES:-2}"
MEMORY="${SPARK_WORKER_MEMORY:-2g}"

log "SPARK_HOME=$SPARK_HOME; $JAVA_VERSION"
# Run "$@" as a daemon: stdin from /dev/null, output to the log $1, and no other inherited file
# descriptor: a caller capturing our output (pytest's subprocess.run) is not kept waiting, and a
# lock the caller holds (`flock LOCK start-spark.sh …`) is not held on by the JVMs for their whole
# life. spark-class execs the JVM, so the pid written is the JVM's.
daemon() {
  local logfile="$1" pidfile="$2"; shift 2
  (
    for fd in /proc/self/fd/*; do
      fd="${fd##*/}"
      if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec nohup "$@" </dev/null >"$logfile" 2>&1
  ) &
  echo $! >"$pidfile"
}
t0="$(now)"
daemon "$DATA_DIR/master.log" "$DATA_DIR/master.pid" \
  "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
  --host 127.0.0.1 --port "$MASTER_PORT" --webui-port "$MASTER_WEBUI_PORT" \
  --properties-file "$DATA_DIR/spark-defaults.conf"
daemon "$DATA_DIR/worker.log" "$DATA_DIR/worker.pid" \
  "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker \
  --host 127.0.0.1 --port "$WORKER_PORT" --webui-port "$WORKER_WEBUI_PORT" \
  --cores "$CORES" --memory "$MEMORY" --work-dir "$DATA_DIR/work" \
  --properties-file "$DATA_DIR/spark-defaults.conf" "$MASTER_URL"

deadline=$(( $(date +%s) + READY_TIMEOUT ))
while :; do
  n="$(alive_workers)"
  if [ -n "$n" ] && [ "$n" -ge 1 ]; then break; fi
  for role in master worker; do
    is_ours "$(cat "$DATA_DIR/$role.pid")" || fail_with_logs "the $role exited during start-up"
  done
  [ "$(date +%s)" -lt "$deadline" ] \
    || fail_with_logs "no worker registered with $MASTER_URL within ${READY_TIMEOUT}s"
  sleep 0.2
done
log "master pid $(cat "$DATA_DIR/master.pid") and worker pid $(cat "$DATA_DIR/worker.pid")" \
    "($CORES cores, $MEMORY) ready at $MASTER_URL in $(elapsed "$t0") s"
echo "$MASTER_URL"
