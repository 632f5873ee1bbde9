#!/usr/bin/env bash
# capture-fixtures.sh - write real Slurm outputs into tests/fixtures/real_slurm/ (parser
# fixtures for the ingest, format references for the simulator). Every file's exact command
# goes to commands.txt.
#
#   tests/services/slurm/capture-fixtures.sh --fresh [DEST]   start (wiping state), submit the
#                                                              job set, capture, stop --purge
#   tests/services/slurm/capture-fixtures.sh [DEST]           capture from a cluster on which
#                                                              submit-jobs.sh already ran
# DEST defaults to tests/fixtures/real_slurm. Takes ~2 min with --fresh.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S=${GPULEDGER_SLURM_DIR:-/tmp/gpuledger-slurm}
FRESH=0
if [ "${1:-}" = --fresh ]; then FRESH=1; shift; fi
DEST=$(realpath -m "${1:-$HERE/../../fixtures/real_slurm}")

log() { printf '[capture %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "$FRESH" = 1 ]; then
  GPULEDGER_SLURM_FRESH=1 "$HERE/start-slurm.sh"
  "$HERE/submit-jobs.sh" "$S/out"
  trap '"$HERE/stop-slurm.sh" --purge' EXIT
fi
[ -s "$S/out/window.env" ] || { log "no $S/out/window.env: run submit-jobs.sh first"; exit 1; }
# shellcheck disable=SC1091
. "$S/out/window.env"

# docs/contracts.md
SACCT_FIELDS=JobID,JobIDRaw,User,UID,Account,Partition,QOS,State,ExitCode,DerivedExitCode,Submit,Eligible,Start,End,Elapsed,ElapsedRaw,TimelimitRaw,AllocCPUS,AllocNodes,NodeList,AllocTRES,ReqTRES,Cluster,Reservation,Reason,Flags,WCKey,JobName,AdminComment
CLASSIC_FIELDS=JobID,JobIDRaw,JobName,User,$(tr ',' '\n' <<<"$SACCT_FIELDS" \
  | grep -vxE 'JobID|JobIDRaw|JobName|User' | paste -sd,)
US=$'\x1f'
LOCAL_TZ=Europe/Berlin
utc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S; }
loc() { TZ=$LOCAL_TZ date -d "@$1" +%Y-%m-%dT%H:%M:%S; }

mkdir -p "$DEST"
CMDS=$DEST/commands.txt
{
  echo "# Exact command behind each file in this folder (run as root on the test cluster of"
  echo "# tests/services/slurm; Slurm 22.05.8 from Debian 12). Produced by capture-fixtures.sh."
  echo "# Job set window (UTC): $(utc "$WINDOW_START") .. $(utc "$WINDOW_END")   [epoch $WINDOW_START .. $WINDOW_END]"
  echo "# Rolled-up hours:      $(utc "$ROLLUP_START") .. $(utc "$ROLLUP_END")"
  echo
} >"$CMDS"
shq() { # shell-quote one word readably: plain if safe, 0x1f as $'\x1f', else '...'
  local a=$1
  if [[ $a =~ ^[A-Za-z0-9_./:=,%+@-]+$ ]]; then printf '%s' "$a"
  elif [[ ${a//$US/} =~ ^[A-Za-z0-9_./:=,%+@-]*$ ]]; then printf '%s' "${a//$US/\$\'\\x1f\'}"
  else printf "'%s'" "${a//\'/\'\\\'\'}"; fi
}
cap() { # cap FILE [VAR=value...] CMD... : run CMD (stdout -> DEST/FILE), record it in commands.txt
  local file=$1 a line=""; shift
  for a in "$@"; do line+="$(shq "$a") "; done
  printf '%s:\n    %s\n\n' "$file" "${line% }" >>"$CMDS"
  env "$@" >"$DEST/$file"
}

cp "$S/out/manifest.tsv" "$DEST/manifest.tsv"
cp "$S/out/window.env" "$DEST/window.env"

# (a) the contract's extraction
cap sacct-unitsep-epoch.txt TZ=UTC SLURM_TIME_FORMAT=%s sacct --allusers --duplicates \
  --parsable2 --noconvert "--delimiter=$US" -S "$(utc "$WINDOW_START")" -E "$(utc "$WINDOW_END")" \
  "--format=$SACCT_FIELDS"
# (b) plain -P, local ISO times in a non-UTC zone, classic order (JobName third)
cap sacct-P-europe-berlin.txt TZ=$LOCAL_TZ sacct --allusers --duplicates --parsable2 \
  --noconvert -S "$(loc "$WINDOW_START")" -E "$(loc "$WINDOW_END")" "--format=$CLASSIC_FIELDS"
# the job cancelled while pending never started: it is in no time-window query, only with -j
CP=$(awk -F'\t' '$1 == "cancel-pending" {print $2}' "$S/out/manifest.tsv")
cap sacct-cancelled-pending-unitsep-epoch.txt TZ=UTC SLURM_TIME_FORMAT=%s sacct \
  --duplicates --parsable2 --noconvert "--delimiter=$US" -j "$CP" "--format=$SACCT_FIELDS"

# (c) sreport over the rolled-up hours
RS=$(utc "$ROLLUP_START"); RE=$(utc "$ROLLUP_END")
cap sreport-cluster-utilization-gpu.txt TZ=UTC sreport -P -t seconds -T gres/gpu \
  cluster utilization "start=$RS" "end=$RE"
cap sreport-account-utilization-by-user-gpu.txt TZ=UTC sreport -P -t seconds -T gres/gpu \
  cluster AccountUtilizationByUser "start=$RS" "end=$RE"
cap sreport-cluster-utilization-gpu-typed.txt TZ=UTC sreport -P -t seconds \
  -T gres/gpu,gres/gpu:a100,gres/gpu:h100 cluster utilization "start=$RS" "end=$RE"
cap sreport-account-utilization-by-user-gpu-typed.txt TZ=UTC sreport -P -t seconds \
  -T gres/gpu,gres/gpu:a100,gres/gpu:h100 cluster AccountUtilizationByUser "start=$RS" "end=$RE"

# cluster description: account tree, TRES ids, config
cap sacctmgr-associations.txt sacctmgr -n -P list associations cluster="$CLUSTER" \
  format=Cluster,Account,ParentName,User,DefaultQOS,QOS
cap sacctmgr-tres.txt sacctmgr -n -P list tres format=Type,Name,ID
cap etc-slurm-slurm.conf cat /etc/slurm/slurm.conf
cap etc-slurm-gres.conf cat /etc/slurm/gres.conf

# (d) + (e) a GPU job while it is RUNNING (submitted after the window; cancelled afterwards)
RUN=$(cd "$S/jobs" && runuser -u alice -- sbatch --parsable --chdir="$S/jobs" \
  --output="$S/jobs/slurm-%j.out" -A physics -p gpu --gres=gpu:a100:2 -c 4 -t 10 \
  -J long-train "$S/jobs/sleep.sh" 600 </dev/null)
RUN=${RUN%%;*}
for _ in $(seq 1 100); do
  scontrol show job "$RUN" | grep -q 'JobState=RUNNING' && break; sleep 0.3
done
sleep 6   # let the first accounting sample (JobAcctGatherFrequency=task=5) arrive
{ printf '# running GPU job %s (alice/physics, a100:2), captured while RUNNING, then cancelled\n\n' "$RUN"; } >>"$CMDS"
cap scontrol-show-job-d-running-gpu.txt scontrol show job -d "$RUN"
cap sacct-running-unitsep-epoch.txt TZ=UTC SLURM_TIME_FORMAT=%s sacct --duplicates \
  --parsable2 --noconvert "--delimiter=$US" -j "$RUN" "--format=$SACCT_FIELDS"
cap sacct-running-P-europe-berlin.txt TZ=$LOCAL_TZ sacct --duplicates --parsable2 \
  --noconvert -j "$RUN" "--format=$CLASSIC_FIELDS"
scancel "$RUN"
printf 'running-at-capture\t%s\talice\tphysics\ta100:2 -c4, captured RUNNING (files *running*), then scancel; not in the window\n' \
  "$RUN" >"$DEST/manifest-running.tsv"
log "wrote $(find "$DEST" -maxdepth 1 -type f | wc -l) files to $DEST"
