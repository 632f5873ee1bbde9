#!/usr/bin/env bash
# submit-jobs.sh - submit gpuledger's test job set to the cluster of start-slurm.sh, drive
# every job to its end state (completed, failed, timeout, requeued, cancelled), then force
# the accounting rollup so that sreport has data. Takes ~1.5 min: the TIMEOUT job dominates
# (limits are whole minutes; slurmctld checks them only every 30 s), everything else runs
# next to it. Started in the last 4 minutes of an hour, it first waits for the next hour.
#
#   tests/services/slurm/submit-jobs.sh [OUT_DIR]      (default $GPULEDGER_SLURM_DIR/out)
#
# Writes OUT_DIR/manifest.tsv   kind<TAB>jobid<TAB>user<TAB>account<TAB>note
#        OUT_DIR/window.env     CLUSTER, WINDOW_START/WINDOW_END (epoch s, UTC; every job of
#                               the set lies inside), ROLLUP_START/ROLLUP_END (epoch s, whole
#                               hours: the range given to `sacctmgr rollup`, use it for sreport)
#        OUT_DIR/scontrol-snapshot.txt  `TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details
#                               show job` taken while the gpus-5-two-node job runs (its GPUs
#                               per node, 4 + 1 on idle nodes, which sacct does not keep)
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}
export TZ=UTC
S=${GPULEDGER_SLURM_DIR:-/tmp/gpuledger-slurm}
OUT=${1:-$S/out}
J=$S/jobs
mkdir -p "$OUT" "$J"; chmod 1777 "$J"
MAN=$OUT/manifest.tsv
CLUSTER=$(scontrol show config | sed -n 's/^ClusterName *= *//p')
T0=$SECONDS

log() { printf '[submit-jobs %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
ids=()
sub() { # sub KIND USER ACCOUNT NOTE sbatch-args... -> prints the job id, appends to the manifest
  local kind=$1 user=$2 account=$3 note=$4 id; shift 4
  id=$(cd "$J" && runuser -u "$user" -- sbatch --parsable --chdir="$J" \
        --output="$J/slurm-%j.out" -A "$account" "$@" </dev/null)
  id=${id%%;*}
  printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$id" "$user" "$account" "$note" >>"$MAN"
  log "$kind -> $id ($user/$account)"
  echo "$id"
}
state() { scontrol show job "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1; }
wait_state() { # wait_state JOBID TIMEOUT STATE...
  local id=$1 end=$((SECONDS + $2)) st; shift 2
  while :; do
    st=$(state "$id")
    for want in "$@"; do [ "$st" = "$want" ] && return 0; done
    [ "$SECONDS" -lt "$end" ] || die "job $id never reached $* (is ${st:-gone})"
    sleep 0.3
  done
}

# ---- batch scripts ------------------------------------------------------------------------
cat >"$J/sleep.sh" <<'EOF'
#!/bin/bash
echo "job $SLURM_JOB_ID on $SLURMD_NODENAME gpus=${CUDA_VISIBLE_DEVICES:-none}"
sleep "${1:-3}"
EOF
cat >"$J/fail.sh" <<'EOF'
#!/bin/bash
sleep 2
echo "about to fail" >&2
exit 1
EOF
cat >"$J/array.sh" <<'EOF'
#!/bin/bash
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID gpus=${CUDA_VISIBLE_DEVICES:-none}"
sleep $((2 + SLURM_ARRAY_TASK_ID % 2))
[ "$SLURM_ARRAY_TASK_ID" = 2 ] && exit 2
exit 0
EOF
cat >"$J/multistep.sh" <<'EOF'
#!/bin/bash
srun -n1 --gres=gpu:a100:1 -J preprocess sleep 2
srun -n2 -J train bash -c 'echo rank $SLURM_PROCID gpus=$CUDA_VISIBLE_DEVICES; sleep 3'
srun -n1 -J evaluate bash -c 'exit 3' || echo "evaluate step failed (expected)"
srun -n1 --overlap -J report true
EOF
cat >"$J/multinode.sh" <<'EOF'
#!/bin/bash
srun -l bash -c 'echo $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES; sleep 3'
EOF
cat >"$J/requeue.sh" <<'EOF'
#!/bin/bash
# first run: long (it is requeued while running); after the requeue: short
echo "run ${SLURM_RESTART_COUNT:-0} of $SLURM_JOB_ID"
if [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ]; then sleep 3; else sleep 120; fi
EOF
chmod 755 "$J"/*.sh

# ---- submit ---------------------------------------------------------------------------------
# sreport reads hourly rollups. A job set that straddled an hour boundary once left sreport's
# account rows at 0 after the forced rollup; the set takes ~1.5-2 min, so when the hour ends
# within 4 min, start in the next one.
left=$(( 3600 - $(date +%s) % 3600 ))
if [ "$left" -lt 240 ]; then
  log "the hour ends in $left s: waiting for the next one"
  sleep $(( left + 2 ))
fi
WINDOW_START=$(( $(date +%s) - 1 ))
printf 'kind\tjobid\tuser\taccount\tnote\n' >"$MAN"
# the time-limit job first: it is the critical path (ends 60-90 s after it starts)
TO=$(sub timeout carol ops "-t 1 (whole minutes), sleeps 300 -> TIMEOUT" \
       -p cpu -n1 -t 1 -J too-slow "$J/sleep.sh" 300)
# second, while both a100 nodes are idle: Slurm fills the first node, 4 + 1 (not 3 + 2)
G5=$(sub gpus-5-two-node alice physics "--gpus=5 -N2 on a100-[01-02]: 4 + 1 GPUs (scontrol -d), sacct only gres/gpu=5" \
       -p gpu --gpus=5 -N 2 -w a100-01,a100-02 -t 5 -J split-5 "$J/sleep.sh" 20)
RQ=$(sub requeue bob ml-research "--requeue a100:1; scontrol requeue while RUNNING, released, runs again" \
       -p gpu --requeue --gres=gpu:a100:1 -t 5 -J requeue-me "$J/requeue.sh")
CR=$(sub cancel-running alice physics "a100:1, scancel by alice while RUNNING" \
       -p gpu --gres=gpu:a100:1 -t 5 -J cancel-me "$J/sleep.sh" 300)
CP=$(sub cancel-pending alice physics "--hold a100:4, scancel while PENDING (never starts)" \
       -p gpu --hold --gres=gpu:a100:4 -t 5 -J held-job "$J/sleep.sh" 1)
sub gpu-1-typed alice physics "--gres=gpu:a100:1 -c4 --mem=8G" \
  -p gpu --gres=gpu:a100:1 -c 4 --mem=8G -t 5 -J train-small "$J/sleep.sh" 4 >/dev/null
sub gpu-2-untyped bob ml-research "--gpus=2 untyped, --cpus-per-gpu/--mem-per-gpu" \
  -p gpu --gpus=2 --cpus-per-gpu=4 --mem-per-gpu=16G -t 5 -J finetune "$J/sleep.sh" 5 >/dev/null
sub gpu-3-untyped-gres carol ops "--gres=gpu:3 untyped" \
  -p gpu --gres=gpu:3 -t 5 -J ops-burn-in "$J/sleep.sh" 4 >/dev/null
sub gpu-4-h100 alice ml-research "--gres=gpu:h100:4, account ml-research, qos high" \
  -p gpu --qos=high --gres=gpu:h100:4 -c 16 -t 5 -J llm-eval "$J/sleep.sh" 5 >/dev/null
sub gpu-8-a100 bob ml-research "--gres=gpu:a100:8 on one node" \
  -p gpu --gres=gpu:a100:8 -c 32 --mem=200G -t 5 -J pretrain-8gpu "$J/sleep.sh" 5 >/dev/null
sub two-node alice physics "-N2 --ntasks-per-node=1 --gres=gpu:a100:2 (4 GPUs), srun -l" \
  -p gpu -N2 --ntasks-per-node=1 --gres=gpu:a100:2 -t 5 -J pretrain-2node "$J/multinode.sh" >/dev/null
sub array bob ml-research "--array=0-3%2 --gres=gpu:1, task 2 exits 2" \
  -p gpu --array=0-3%2 --gres=gpu:1 -t 5 -J sweep "$J/array.sh" >/dev/null
sub multistep alice physics "a100:2 -n2; srun steps preprocess/train/evaluate(exit 3)/report" \
  -p gpu --gres=gpu:a100:2 -n2 -t 5 -J pipeline "$J/multistep.sh" >/dev/null
sub fail-exit1 carol ops "gpu:1, batch script exits 1 after 2 s" \
  -p gpu --gres=gpu:1 -t 5 -J bad-job "$J/fail.sh" >/dev/null
sub name-pipe alice physics "job name contains |" \
  -p gpu --gres=gpu:a100:1 -t 5 -J 'train|resnet50' "$J/sleep.sh" 3 >/dev/null
sub name-unicode bob ml-research "non-ASCII job name with emoji" \
  -p gpu --gres=gpu:1 -t 5 -J 'モデル学習-ü-🚀' "$J/sleep.sh" 3 >/dev/null

# ---- GPU indices while the 5-GPU job runs (sacct never has them) -------------------------------
wait_state "$G5" 60 RUNNING
TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show job >"$OUT/scontrol-snapshot.txt"
grep -q "^JobId=$G5 " "$OUT/scontrol-snapshot.txt" || die "snapshot lacks job $G5"
log "scontrol snapshot taken while job $G5 runs"

# ---- drive the life cycles -----------------------------------------------------------------
wait_state "$CP" 30 PENDING
sleep 2
runuser -u alice -- scancel "$CP"; log "cancelled pending $CP"

wait_state "$CR" 60 RUNNING
wait_state "$RQ" 60 RUNNING
sleep 3
runuser -u alice -- scancel "$CR"; log "cancelled running $CR"
scontrol requeue "$RQ"; log "requeued $RQ"
# a requeued job is held back (BeginTime ~2 min ahead): release it once it is pending again.
# Not within the same second as the requeue: slurmd revoked the old launch credential, and a
# new one with the same timestamp is refused ("Job credential revoked" -> the job FAILS).
wait_state "$RQ" 60 PENDING
sleep 2
for _ in $(seq 1 50); do
  scontrol update jobid="$RQ" StartTime=now 2>/dev/null && break
  sleep 0.3
done
wait_state "$RQ" 60 RUNNING COMPLETING COMPLETED
log "requeued job $RQ runs again"

# ---- wait for the whole set ----------------------------------------------------------------
mapfile -t ALL < <(awk -F'\t' 'NR > 1 {print $2}' "$MAN")
IDLIST=$(IFS=,; echo "${ALL[*]}")
end=$((SECONDS + 240))
while [ -n "$(squeue -h -j "$IDLIST" -t PD,R,CG,CF,RQ,S 2>/dev/null)" ]; do
  [ "$SECONDS" -lt "$end" ] || { squeue -j "$IDLIST" >&2; die "jobs did not finish"; }
  sleep 1
done
# the job records reach slurmdbd asynchronously: wait until sacct shows only end states
end=$((SECONDS + 60))
while sacct -n -P -X -j "$IDLIST" -o State 2>/dev/null | grep -qE 'PENDING|RUNNING|COMPLETING|REQUEUED'; do
  [ "$SECONDS" -lt "$end" ] || die "slurmdbd still shows unfinished jobs"
  sleep 0.5
done
sleep 1
WINDOW_END=$(( $(date +%s) + 1 ))
log "all jobs finished ($((SECONDS - T0)) s)"

# ---- force the hourly rollup (sreport reads only the rollup tables) -----------------------
# The end must be the start of the NEXT hour: rolling up to "now" leaves the current hour
# empty. (Idle/Reported then include the rest of that hour.)
ROLLUP_START=$(( WINDOW_START / 3600 * 3600 ))
ROLLUP_END=$(( (WINDOW_END / 3600 + 1) * 3600 ))
RS=$(date -u -d "@$ROLLUP_START" +%Y-%m-%dT%H:%M:%S)
RE=$(date -u -d "@$ROLLUP_END" +%Y-%m-%dT%H:%M:%S)
for attempt in 1 2 3 4 5; do
  sacctmgr -i rollup "$RS" "$RE" >/dev/null
  alloc=$(sreport -n -P -t seconds -T gres/gpu cluster utilization start="$RS" end="$RE" \
            format=Allocated | head -1)
  # the per-account rollup too: the tests compare against AccountUtilizationByUser
  used=$(sreport -n -P -t seconds -T gres/gpu cluster AccountUtilizationByUser start="$RS" \
           end="$RE" | awk -F'|' '{ s += $NF } END { print s + 0 }')
  [ "${alloc:-0}" -gt 0 ] 2>/dev/null && [ "${used:-0}" -gt 0 ] 2>/dev/null && break
  [ "$attempt" -lt 5 ] || die "sreport shows no GPU time (cluster $alloc s, accounts $used s) after rollup $RS $RE"
  sleep 1
done
log "rollup $RS .. $RE done; sreport gres/gpu: allocated $alloc s, accounts $used s"

cat >"$OUT/window.env" <<EOF
CLUSTER=$CLUSTER
WINDOW_START=$WINDOW_START
WINDOW_END=$WINDOW_END
ROLLUP_START=$ROLLUP_START
ROLLUP_END=$ROLLUP_END
EOF
log "done in $((SECONDS - T0)) s; manifest $MAN"
