#!/usr/bin/env bash
# capture-format-all.sh - write the wide and site-shaped sacct dumps of the test job set into
# tests/fixtures/real_slurm/format-all/: `sacct --format=ALL --duplicates -P`, a site's own
# field list (NNodes, NCPUS; no JobIDRaw, no Cluster), sacct's default fields, the scontrol
# snapshot submit-jobs.sh took while the 5-GPU two-node job ran, and sreport over the rolled-up
# hours. Every file's exact command goes to commands.txt.
#
#   tests/services/slurm/capture-format-all.sh --fresh [DEST]   start (wiping state), submit the
#                                                                job set, capture, stop --purge
#   tests/services/slurm/capture-format-all.sh [DEST]           capture from a cluster on which
#                                                                submit-jobs.sh already ran
# DEST defaults to tests/fixtures/real_slurm/format-all. Takes ~2 min with --fresh.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S=${GPULEDGER_SLURM_DIR:-/tmp/gpuledger-slurm}
FRESH=0
if [ "${1:-}" = --fresh ]; then FRESH=1; shift; fi
DEST=$(realpath -m "${1:-$HERE/../../fixtures/real_slurm/format-all}")

log() { printf '[capture-format-all %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if [ "$FRESH" = 1 ]; then
  GPULEDGER_SLURM_FRESH=1 "$HERE/start-slurm.sh"
  "$HERE/submit-jobs.sh" "$S/out"
  trap '"$HERE/stop-slurm.sh" --purge' EXIT
fi
for f in window.env manifest.tsv scontrol-snapshot.txt; do
  [ -s "$S/out/$f" ] || { log "no $S/out/$f: run submit-jobs.sh first"; exit 1; }
done
# shellcheck disable=SC1091
. "$S/out/window.env"

# a site's own list: NNodes/NCPUS for AllocNodes/AllocCPUS, no JobIDRaw, no Cluster
SITE_FIELDS=JobID,JobName,User,Account,Partition,QOS,State,Submit,Start,End,Elapsed,NNodes,NCPUS,NodeList,AllocTRES
utc() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%S; }

mkdir -p "$DEST"
CMDS=$DEST/commands.txt
{
  echo "# Exact command behind each file in this folder (run as root on the test cluster of"
  echo "# tests/services/slurm; $(sinfo --version) from Debian 12). Produced by capture-format-all.sh."
  echo "# Job set window (UTC): $(utc "$WINDOW_START") .. $(utc "$WINDOW_END")   [epoch $WINDOW_START .. $WINDOW_END]"
  echo "# Rolled-up hours:      $(utc "$ROLLUP_START") .. $(utc "$ROLLUP_END")"
  echo
} >"$CMDS"
cap() { # cap FILE [VAR=value...] CMD... : run CMD (stdout -> DEST/FILE), record it in commands.txt
  local file=$1 a line=""; shift
  for a in "$@"; do
    if [[ $a =~ ^[A-Za-z0-9_./:=,%+@-]+$ ]]; then line+="$a "; else line+="'$a' "; fi
  done
  printf '%s:\n    %s\n\n' "$file" "${line% }" >>"$CMDS"
  env "$@" >"$DEST/$file"
}

cp "$S/out/manifest.tsv" "$DEST/manifest.tsv"
cp "$S/out/window.env" "$DEST/window.env"
cp "$S/out/scontrol-snapshot.txt" "$DEST/scontrol-snapshot.txt"
printf 'scontrol-snapshot.txt:\n    TZ=UTC SLURM_TIME_FORMAT=%%s scontrol --all --details show job   (by submit-jobs.sh, while job %s ran)\n\n' \
  "$(awk -F'\t' '$1 == "gpus-5-two-node" {print $2}' "$S/out/manifest.tsv")" >>"$CMDS"

cap sacct-helpformat.txt sacct --helpformat
cap sacct-format-all-P.txt TZ=UTC sacct --allusers --duplicates --parsable2 --format=ALL \
  -S "$(utc "$WINDOW_START")" -E "$(utc "$WINDOW_END")"
cap sacct-site-fields-P.txt TZ=UTC sacct --allusers --duplicates --parsable2 \
  "--format=$SITE_FIELDS" -S "$(utc "$WINDOW_START")" -E "$(utc "$WINDOW_END")"
cap sacct-default-fields-P.txt TZ=UTC sacct --allusers --duplicates --parsable2 \
  -S "$(utc "$WINDOW_START")" -E "$(utc "$WINDOW_END")"
RS=$(utc "$ROLLUP_START"); RE=$(utc "$ROLLUP_END")
cap sreport-account-utilization-by-user-gpu.txt TZ=UTC sreport -P -t seconds -T gres/gpu \
  cluster AccountUtilizationByUser "start=$RS" "end=$RE"
log "wrote $(find "$DEST" -maxdepth 1 -type f | wc -l) files to $DEST"
