#!/usr/bin/env bash
# submit-shared-jobs.sh - the shared-GPU job set (docs/shared-gpus.md) on partition `shared` of
# start-slurm.sh: MIG instances on mig-01 (profiles 1g.10gb and a100_3g.20gb, one job with both),
# shards and MPS units on shard-01. Every job runs at once for ~15 s; while they run the script
# takes the `scontrol show job -d` snapshot (which GPUs, shards, MPS units each holds) and the
# `scontrol -o show node` snapshot (the nodes' Gres=), then waits until sacct shows them ended.
# ~30 s. Independent of submit-jobs.sh (its own OUT_DIR and window).
#
#   tests/services/slurm/submit-shared-jobs.sh [OUT_DIR]  (default $GPULEDGER_SLURM_DIR/out-shared)
#
# Writes OUT_DIR/manifest.tsv  kind<TAB>jobid<TAB>user<TAB>account<TAB>note
#        OUT_DIR/window.env    CLUSTER, WINDOW_START/WINDOW_END (epoch s, UTC)
#        OUT_DIR/scontrol-jobs.txt   TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show job
#        OUT_DIR/scontrol-nodes.txt  TZ=UTC SLURM_TIME_FORMAT=%s scontrol -o show node
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}
export TZ=UTC
S=${GPULEDGER_SLURM_DIR:-/tmp/gpuledger-slurm}
OUT=${1:-$S/out-shared}
J=$S/jobs
mkdir -p "$OUT" "$J"; chmod 1777 "$J"
MAN=$OUT/manifest.tsv
CLUSTER=$(scontrol show config | sed -n 's/^ClusterName *= *//p')
T0=$SECONDS

log() { printf '[submit-shared-jobs %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }
sub() { # sub KIND USER ACCOUNT NOTE sbatch-args... -> appends to the manifest
  local kind=$1 user=$2 account=$3 note=$4 id; shift 4
  id=$(cd "$J" && runuser -u "$user" -- sbatch --parsable --chdir="$J" \
        --output="$J/slurm-%j.out" -A "$account" -p shared -t 5 "$@" </dev/null) \
    || die "sbatch for $kind failed"
  id=${id%%;*}
  printf '%s\t%s\t%s\t%s\t%s\n' "$kind" "$id" "$user" "$account" "$note" >>"$MAN"
  log "$kind -> $id ($user/$account)"
}

cat >"$J/shared.sh" <<'EOF'
#!/bin/bash
echo "job $SLURM_JOB_ID on $SLURMD_NODENAME gpus=${CUDA_VISIBLE_DEVICES:-none} shards=${SLURM_SHARDS_ON_NODE:-none} mps=${CUDA_MPS_ACTIVE_THREAD_PERCENTAGE:-none}"
sleep "${1:-15}"
EOF
chmod 755 "$J/shared.sh"

WINDOW_START=$(( $(date +%s) - 1 ))
printf 'kind\tjobid\tuser\taccount\tnote\n' >"$MAN"
# mig-01: 7 x 1g.10gb (GPU 0) + 2 x a100_3g.20gb (GPU 1); these four fit together (2+1+1 of 1g,
# 1+1 of 3g)
sub mig-1g-2 alice physics "--gres=gpu:1g.10gb:2: two MIG instances" \
  --gres=gpu:1g.10gb:2 -J mig-small "$J/shared.sh"
sub mig-3g-1 bob ml-research "--gres=gpu:a100_3g.20gb:1: one 3g instance (model-prefixed type)" \
  --gres=gpu:a100_3g.20gb:1 -J mig-medium "$J/shared.sh"
sub mig-mixed alice ml-research "--gres=gpu:1g.10gb:1,gpu:a100_3g.20gb:1: two profiles in one job" \
  --gres=gpu:1g.10gb:1,gpu:a100_3g.20gb:1 -J mig-two-profiles "$J/shared.sh"
sub mig-untyped carol ops "--gres=gpu:1 -w mig-01 untyped: Slurm picks an instance" \
  --gres=gpu:1 -w mig-01 -J mig-any "$J/shared.sh"
# shard-01: 2 GPUs x 4 shards, 2 GPUs x 100 MPS units. Shards and MPS are not given on a GPU
# another job holds whole or by the other mode, so: shards 2 + 3 (both GPUs' shards can be
# used), MPS 50 on the GPU not yet used by shards if any is left.
sub shard-2 alice physics "--gres=shard:2" --gres=shard:2 -J shard-two "$J/shared.sh"
sub shard-3 bob ml-research "--gres=shard:3" --gres=shard:3 -J shard-three "$J/shared.sh"
sub mps-50 carol ops "--gres=mps:50 (after the shard jobs end: a GPU is either)" \
  --gres=mps:50 -J mps-half "$J/shared.sh" 3

# ---- snapshots while they run ------------------------------------------------------------------
mapfile -t ALL < <(awk -F'\t' 'NR > 1 {print $2}' "$MAN")
IDLIST=$(IFS=,; echo "${ALL[*]}")
SHARD2=$(awk -F'\t' '$1 == "shard-2" {print $2}' "$MAN")
MIGMIX=$(awk -F'\t' '$1 == "mig-mixed" {print $2}' "$MAN")
end=$((SECONDS + 60))
until [ "$(squeue -h -j "$SHARD2,$MIGMIX" -t R | wc -l)" -ge 2 ]; do
  [ "$SECONDS" -lt "$end" ] || { squeue -j "$IDLIST" >&2; die "shard/MIG jobs never ran"; }
  sleep 0.5
done
sleep 1
TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show job >"$OUT/scontrol-jobs.txt"
TZ=UTC SLURM_TIME_FORMAT=%s scontrol -o show node >"$OUT/scontrol-nodes.txt"
squeue -j "$IDLIST" -o '%i %j %T %b %N' >&2 || true
# The MPS job runs beside the shard jobs only when Slurm has put all five shards on one GPU;
# otherwise it waits for them to end (a GPU is either). Its block is then taken when it runs,
# appended once (the CI run of 2026-12-07 found it pending at the first snapshot).
MPS=$(awk -F'\t' '$1 == "mps-50" {print $2}' "$MAN")
if ! awk -v id="$MPS" '$1 == "JobId="id {b=1} b && /JobState=RUNNING/ {f=1; exit}
                          b && /^$/ {exit} END {exit !f}' "$OUT/scontrol-jobs.txt"; then
  end=$((SECONDS + 120))
  until [ "$(squeue -h -j "$MPS" -t R | wc -l)" -ge 1 ]; do
    [ "$SECONDS" -lt "$end" ] || { squeue -j "$IDLIST" >&2; die "MPS job never ran"; }
    sleep 0.2
  done
  # drop the pending block, keep the running one
  awk -v id="$MPS" '$1 == "JobId="id {skip=1} skip && /^$/ {skip=0; next} !skip' \
    "$OUT/scontrol-jobs.txt" >"$OUT/scontrol-jobs.tmp"
  TZ=UTC SLURM_TIME_FORMAT=%s scontrol --all --details show job "$MPS" >>"$OUT/scontrol-jobs.tmp"
  mv "$OUT/scontrol-jobs.tmp" "$OUT/scontrol-jobs.txt"
  log "MPS job $MPS snapshot taken when it ran"
fi
log "scontrol snapshots taken"

end=$((SECONDS + 180))
while [ -n "$(squeue -h -j "$IDLIST" -t PD,R,CG,CF,RQ,S 2>/dev/null)" ]; do
  [ "$SECONDS" -lt "$end" ] || { squeue -j "$IDLIST" >&2; die "jobs did not finish"; }
  sleep 1
done
end=$((SECONDS + 60))
while sacct -n -P -X -j "$IDLIST" -o State 2>/dev/null | grep -qE 'PENDING|RUNNING|COMPLETING|REQUEUED'; do
  [ "$SECONDS" -lt "$end" ] || die "slurmdbd still shows unfinished jobs"
  sleep 0.5
done
sleep 1
WINDOW_END=$(( $(date +%s) + 1 ))
cat >"$OUT/window.env" <<EOF
CLUSTER=$CLUSTER
WINDOW_START=$WINDOW_START
WINDOW_END=$WINDOW_END
EOF
log "done in $((SECONDS - T0)) s; manifest $MAN"
