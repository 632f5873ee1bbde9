#!/usr/bin/env bash
# stop-slurm.sh - stop what start-slurm.sh started, by pid file (never pkill/killall):
# cancel queued jobs, then slurmd(s) + slurmctld, slurmdbd, MariaDB, and munged only if
# start-slurm.sh started it. Packages, users and /etc/slurm stay.
#   --purge   also delete the state folder ($GPULEDGER_SLURM_DIR, default /tmp/gpuledger-slurm)
set -uo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}
S=${GPULEDGER_SLURM_DIR:-/tmp/gpuledger-slurm}
PURGE=0
for a in "$@"; do
  case $a in
    --purge) PURGE=1 ;;
    *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
  esac
done

log() { printf '[stop-slurm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }

pid_of() { # pid_of PIDFILE COMM -> prints the pid if it is alive and named COMM
  local pid
  [ -s "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  [ "$(ps -o comm= -p "$pid" 2>/dev/null)" = "$2" ] || return 1
  echo "$pid"
}
term() { # term NAME PIDFILE COMM -> sends TERM, records the pid for wait_gone
  local pid
  if pid=$(pid_of "$2" "$3"); then
    log "stopping $1 (pid $pid)"
    kill -TERM "$pid" 2>/dev/null
    PENDING+=("$pid:$1:$2")
  else
    rm -f "$2"
  fi
}
wait_gone() { # wait for every pid in PENDING (30 s each at most, then KILL)
  local item pid name pf
  for item in "${PENDING[@]}"; do
    pid=${item%%:*}; name=${item#*:}; pf=${name#*:}; name=${name%%:*}
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      log "$name (pid $pid) still alive after 30 s - sending KILL"
      kill -KILL "$pid" 2>/dev/null
    fi
    rm -f "$pf"
  done
  PENDING=()
}
PENDING=()
T0=$SECONDS

# 1. cancel jobs still queued or running, so no slurmstepd lingers
if pid_of "$S/run/slurmctld.pid" slurmctld >/dev/null; then
  mapfile -t jobs < <(timeout 10 squeue -h -o %A 2>/dev/null | sort -u)
  if [ "${#jobs[@]}" -gt 0 ]; then
    log "cancelling jobs: ${jobs[*]}"
    timeout 10 scancel --quiet "${jobs[@]}" 2>/dev/null || true
    for _ in $(seq 1 40); do
      [ -z "$(timeout 5 squeue -h -t R,CG 2>/dev/null)" ] && break
      sleep 0.25
    done
  fi
fi

# 2. all slurmd and slurmctld at once (each slurmd takes ~2 s to exit)
for pf in "$S"/run/slurmd-*.pid; do
  [ -e "$pf" ] || continue
  n=${pf##*/slurmd-}; term "slurmd ${n%.pid}" "$pf" slurmd
done
term slurmctld "$S/run/slurmctld.pid" slurmctld
wait_gone
# slurmstepd of our jobs left behind: recognised by the GPULEDGER_SLURM_DIR that
# start-slurm.sh exports to the daemons (checked per pid in /proc/PID/environ)
for pid in $(pgrep -x slurmstepd 2>/dev/null); do
  if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "GPULEDGER_SLURM_DIR=$S"; then
    log "killing leftover slurmstepd $pid"; kill -KILL "$pid" 2>/dev/null || true
  fi
done

# 3. slurmdbd, then its database
term slurmdbd "$S/run/slurmdbd.pid" slurmdbd
wait_gone
term mariadbd "$S/mysqlrun/mysqld.pid" mariadbd
# 4. munged (no Slurm daemon is left to need it), only when start-slurm.sh started it: it
#    copies munged's pid file then
if [ -s "$S/run/munged.pid" ]; then
  term munged "$S/run/munged.pid" munged
  wait_gone
  rm -f /run/munge/munged.pid
fi
wait_gone

if [ "$PURGE" = 1 ] && [ -d "$S" ]; then
  case $(realpath -m "$S") in
    /|/tmp|/root|/home|/etc|/usr|/var) log "refusing to remove $S" ;;
    *) log "removing $S"; rm -rf "$S" ;;
  esac
fi
log "done in $((SECONDS - T0)) s"
