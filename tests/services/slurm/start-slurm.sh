#!/usr/bin/env bash
# start-slurm.sh - bring up a REAL single-machine Slurm cluster with accounting for
# gpuledger's tests: munge -> MariaDB -> slurmdbd -> slurmctld -> 6 x `slurmd -N`,
# all on 127.0.0.1, with fake GPUs of two models (a100, h100), and shared GPUs in partition
# `shared`: MIG instances (mig-01) and shards/MPS (shard-01), docs/slurm.md "Shared GPUs".
#
#   sudo tests/services/slurm/start-slurm.sh      # idempotent; ~12 s from a purged state
#   tests/services/slurm/stop-slurm.sh [--purge]
#
# Environment (all optional):
#   GPULEDGER_SLURM_DIR         state folder (MariaDB datadir, spool, logs, pid files,
#                               fake device nodes, job files)   default /tmp/gpuledger-slurm
#   GPULEDGER_SLURM_CLUSTER     cluster name                    default gpuledger
#   GPULEDGER_SLURM_MYSQL_PORT  our own MariaDB's TCP port      default 13306
#   GPULEDGER_SLURM_CTLD_PORT / _DBD_PORT / _NODE_PORT_BASE     6817 / 6819 / 17000
#   GPULEDGER_SLURM_FRESH=1     stop everything and wipe the state folder first
#
# Slurm's config goes to /etc/slurm (Slurm's compiled-in location); must run as root.
# Installs the Debian packages when missing. Every daemon is started with all of its
# file descriptors redirected and in its own session, so a caller that captures this
# script's output through a pipe (pytest's subprocess.run) never hangs.
# Requires Debian 12's Slurm 22.05; notes in tests/fixtures/real_slurm/README.md.
set -euo pipefail
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:${PATH:-}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
S=${GPULEDGER_SLURM_DIR:-/tmp/gpuledger-slurm}
CLUSTER=${GPULEDGER_SLURM_CLUSTER:-gpuledger}
MYSQL_PORT=${GPULEDGER_SLURM_MYSQL_PORT:-13306}
CTLD_PORT=${GPULEDGER_SLURM_CTLD_PORT:-6817}
DBD_PORT=${GPULEDGER_SLURM_DBD_PORT:-6819}
NODE_PORT_BASE=${GPULEDGER_SLURM_NODE_PORT_BASE:-17000}
DB_PASS=slurmdbpass # local-only throwaway database

# node -> "type:count" of fake GPUs ("" = CPU-only). CPUs/memory are declared, not real
# (SlurmdParameters=config_overrides).
NODES=(a100-01 a100-02 h100-01 cpu-01 mig-01 shard-01)
declare -A NODE_GRES=([a100-01]="a100:8" [a100-02]="a100:8" [h100-01]="h100:4" [cpu-01]="")
# shared GPUs (docs/shared-gpus.md), in their own partition `shared` so that the whole-GPU job
# set never lands there: mig-01 has two A100s cut into MIG instances (GPU 0: 7 x 1g.10gb, GPU 1:
# 2 x 3g.20gb, typed with the model prefix as AutoDetect=nvml names them), shard-01 has two
# untyped GPUs handed out whole, as 8 shards (4 per GPU) or as 200 MPS units (100 per GPU).
declare -A SHARED_GRES=(
  [mig-01]="gpu:1g.10gb:7,gpu:a100_3g.20gb:2"
  [shard-01]="gpu:2,shard:8,mps:200"
)
declare -A NODE_HW=(
  [a100-01]="CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=512000"
  [a100-02]="CPUs=64 Boards=1 SocketsPerBoard=2 CoresPerSocket=16 ThreadsPerCore=2 RealMemory=512000"
  [h100-01]="CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=256000"
  [cpu-01]="CPUs=16 Boards=1 SocketsPerBoard=1 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=64000"
  [mig-01]="CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=256000"
  [shard-01]="CPUs=32 Boards=1 SocketsPerBoard=2 CoresPerSocket=8 ThreadsPerCore=2 RealMemory=256000"
)
# unix user -> preferred uid (fixed where free, so captured fixtures look alike across machines)
declare -A USER_UID=([alice]=20001 [bob]=20002 [carol]=20003)

log() { printf '[start-slurm %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
die() { log "ERROR: $*" >&2; exit 1; }
[ "$(uname -s)" = Linux ] || die "needs Linux"
[ "$(id -u)" = 0 ] || die "must run as root"

alive() { [ -s "$1" ] && kill -0 "$(cat "$1" 2>/dev/null)" 2>/dev/null; }
# run a daemon detached: own session, cwd /, no inherited stdin/stdout/stderr
daemon() { ( cd / && exec setsid "$@" ) </dev/null >/dev/null 2>&1 & }
wait_for() { # wait_for SECONDS DESCRIPTION CMD...
  local t=$1 what=$2; shift 2
  local end=$((SECONDS + t))
  until "$@" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$end" ]; then die "timed out after ${t}s waiting for: $what"; fi
    sleep 0.3
  done
}

T0=$SECONDS
# ---------------------------------------------------------------- 1. packages
need_install=0
for cmd in slurmctld slurmd slurmdbd sacct sreport sacctmgr mariadbd mariadb-install-db \
           mariadb munged mungekey pgrep ps; do
  command -v "$cmd" >/dev/null 2>&1 || { need_install=1; break; }
done
if [ "$need_install" = 1 ]; then
  command -v apt-get >/dev/null || die "Slurm packages missing and no apt-get"
  log "installing slurm-wlm slurmdbd mariadb-server munge"
  export DEBIAN_FRONTEND=noninteractive
  # keep the packages' init scripts from starting system daemons (system MariaDB on 3306,
  # a slurmctld without config, ...); we start our own below
  added_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod 755 /usr/sbin/policy-rc.d
    added_policy=1
  fi
  rc=0
  { apt-get -o DPkg::Lock::Timeout=600 update -q \
    && apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends \
         slurm-wlm slurmdbd mariadb-server munge procps; } </dev/null || rc=$?
  [ "$added_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  [ "$rc" = 0 ] || die "apt-get failed (exit $rc)"
fi

# ----------------------------------------------------------- 2. users & dirs
for u in alice bob carol; do
  if ! id "$u" >/dev/null 2>&1; then
    if getent passwd "${USER_UID[$u]}" >/dev/null; then useradd -m -s /bin/bash "$u"
    else useradd -m -s /bin/bash -u "${USER_UID[$u]}" "$u"; fi
  fi
done

if [ "${GPULEDGER_SLURM_FRESH:-0}" = 1 ]; then
  log "GPULEDGER_SLURM_FRESH=1: stopping and wiping $S"
  "$HERE/stop-slurm.sh" --purge
fi

mkdir -p "$S"/{run,log,spool/ctld,dev,jobs,out,mysql,mysqlrun}
chmod 755 "$S"
chown slurm:slurm "$S"/log "$S"/spool "$S"/spool/ctld "$S"/run
chmod 1777 "$S"/jobs
chown mysql:mysql "$S"/mysql "$S"/mysqlrun
# fake GPUs: character devices with /dev/null's numbers. slurmd rejects plain files
# ("is not a valid character or block device") and Count= without File= makes the node
# invalid ("gres/gpu count reported lower than configured").
for i in 0 1 2 3 4 5 6 7; do
  [ -c "$S/dev/gpu$i" ] || { rm -f "$S/dev/gpu$i"; mknod -m 666 "$S/dev/gpu$i" c 1 3; }
done
# mig-01's MIG instances: one device per instance (a real node names /dev/nvidia-caps/...)
for i in 0 1 2 3 4 5 6 7 8; do
  [ -c "$S/dev/mig$i" ] || { rm -f "$S/dev/mig$i"; mknod -m 666 "$S/dev/mig$i" c 1 3; }
done
for n in "${NODES[@]}"; do mkdir -p "$S/spool/slurmd-$n"; done
# inherited by the daemons and their slurmstepd: lets stop-slurm.sh recognise ours
export GPULEDGER_SLURM_DIR=$S

# ---------------------------------------------------------------- 3. munge
if [ ! -s /etc/munge/munge.key ]; then
  mungekey --create --keyfile=/etc/munge/munge.key
  chown munge:munge /etc/munge/munge.key; chmod 600 /etc/munge/munge.key
fi
mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge
if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
  log "starting munged"
  rm -f /run/munge/munged.pid
  ( cd / && exec runuser -u munge -- /usr/sbin/munged ) </dev/null >/dev/null 2>&1
  wait_for 20 munged sh -c 'munge -n </dev/null | unmunge'
  cp /run/munge/munged.pid "$S/run/munged.pid"   # stop-slurm.sh stops munged only if we started it
fi

# ---------------------------------------------------------------- 4. MariaDB
# own --defaults-file (Debian's /etc/mysql is skipped), own datadir, socket and port
cat > "$S/my.cnf" <<EOF
[mysqld]
user=mysql
datadir=$S/mysql
socket=$S/mysqlrun/mysqld.sock
pid-file=$S/mysqlrun/mysqld.pid
log-error=$S/log/mariadb.log
bind-address=127.0.0.1
port=$MYSQL_PORT
skip-name-resolve
# utf8mb4, or non-ASCII job names are stored as '?'
character-set-server=utf8mb4
collation-server=utf8mb4_general_ci
innodb_buffer_pool_size=128M
innodb_log_file_size=64M
innodb_lock_wait_timeout=900
EOF
chown mysql:mysql "$S/mysqlrun"
[ -e "$S/log/mariadb.log" ] || { touch "$S/log/mariadb.log"; chown mysql:mysql "$S/log/mariadb.log"; }
if [ ! -d "$S/mysql/mysql" ]; then
  log "initialising MariaDB datadir"
  mariadb-install-db --defaults-file="$S/my.cnf" --user=mysql --datadir="$S/mysql" \
    --auth-root-authentication-method=socket --skip-test-db \
    </dev/null >"$S/log/mariadb-install.log" 2>&1 || die "mariadb-install-db failed, see $S/log/mariadb-install.log"
fi
if ! alive "$S/mysqlrun/mysqld.pid"; then
  log "starting MariaDB on 127.0.0.1:$MYSQL_PORT"
  daemon /usr/sbin/mariadbd --defaults-file="$S/my.cnf"
  wait_for 60 mariadb mariadb-admin --socket="$S/mysqlrun/mysqld.sock" ping
fi
mariadb --socket="$S/mysqlrun/mysqld.sock" <<EOF
CREATE DATABASE IF NOT EXISTS slurm_acct_db CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASS';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY '$DB_PASS';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
FLUSH PRIVILEGES;
EOF

# ---------------------------------------------------------------- 5. config
mkdir -p /etc/slurm
cat > /etc/slurm/slurmdbd.conf <<EOF
# generated by gpuledger tests/services/slurm/start-slurm.sh
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=slurm
DebugLevel=info
LogFile=$S/log/slurmdbd.log
PidFile=$S/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$MYSQL_PORT
StorageUser=slurm
StoragePass=$DB_PASS
StorageLoc=slurm_acct_db
EOF
chown slurm:slurm /etc/slurm/slurmdbd.conf
chmod 600 /etc/slurm/slurmdbd.conf

GPU_NODES=""; CPU_NODES=""; SHARED_NODES=""
for n in "${NODES[@]}"; do
  if [ -n "${SHARED_GRES[$n]:-}" ]; then SHARED_NODES+="$n,"
  elif [ -n "${NODE_GRES[$n]}" ]; then GPU_NODES+="$n,"; else CPU_NODES+="$n,"; fi
done
{
cat <<EOF
# generated by gpuledger tests/services/slurm/start-slurm.sh
ClusterName=$CLUSTER
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$S/spool/ctld
SlurmdSpoolDir=$S/spool/slurmd-%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# fake hardware: trust this file instead of probing the machine (required)
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
PrologFlags=Contain
MpiDefault=none
ReturnToService=2
SwitchType=switch/none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1000
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightFairshare=10000
PriorityWeightQOS=10000
KillWait=2
OverTimeLimit=0
MinJobAge=600
InactiveLimit=0
JobRequeue=1
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStorageEnforce=associations,limits,qos
AccountingStorageTRES=gres/gpu,gres/gpu:a100,gres/gpu:h100,gres/gpu:1g.10gb,gres/gpu:a100_3g.20gb,gres/shard,gres/mps
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=5
JobCompType=jobcomp/none
GresTypes=gpu,shard,mps
EOF
i=0
for n in "${NODES[@]}"; do
  i=$((i + 1)); g=${NODE_GRES[$n]:-}
  if [ -n "${SHARED_GRES[$n]:-}" ]; then gres=" Gres=${SHARED_GRES[$n]}"; else gres=${g:+ Gres=gpu:$g}; fi
  echo "NodeName=$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$((NODE_PORT_BASE + i)) ${NODE_HW[$n]}$gres State=UNKNOWN"
done
echo "PartitionName=gpu Nodes=${GPU_NODES%,} Default=YES MaxTime=02:00:00 State=UP TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=10.0"
echo "PartitionName=cpu Nodes=${CPU_NODES%,} MaxTime=02:00:00 State=UP TRESBillingWeights=CPU=1.0,Mem=0.25G"
echo "PartitionName=shared Nodes=${SHARED_NODES%,} MaxTime=02:00:00 State=UP TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=10.0"
} > /etc/slurm/slurm.conf

{
echo "# generated by gpuledger tests/services/slurm/start-slurm.sh - fake GPUs (char devices)"
echo "AutoDetect=off"
for n in "${NODES[@]}"; do
  g=${NODE_GRES[$n]:-}
  if [ -n "$g" ]; then
    echo "NodeName=$n Name=gpu Type=${g%%:*} File=$S/dev/gpu[0-$(( ${g##*:} - 1 ))]"
  fi
done
# MIG: one gpu GRES per instance, typed by profile (GRES index 0-6: GPU 0, 7-8: GPU 1)
echo "NodeName=mig-01 Name=gpu Type=1g.10gb File=$S/dev/mig[0-6]"
echo "NodeName=mig-01 Name=gpu Type=a100_3g.20gb File=$S/dev/mig[7-8]"
# shards and MPS name the GPU files they share: Count is spread evenly over them
echo "NodeName=shard-01 Name=gpu File=$S/dev/gpu[0-1]"
echo "NodeName=shard-01 Name=shard Count=8 File=$S/dev/gpu[0-1]"
echo "NodeName=shard-01 Name=mps Count=200 File=$S/dev/gpu[0-1]"
} > /etc/slurm/gres.conf

# ---------------------------------------------------------------- 6. slurmdbd + cluster
if ! alive "$S/run/slurmdbd.pid"; then
  log "starting slurmdbd"
  daemon /usr/sbin/slurmdbd
fi
wait_for 60 "slurmdbd (sacctmgr list cluster)" sacctmgr -n list cluster
if ! sacctmgr -n -P list cluster format=cluster | grep -qx "$CLUSTER"; then
  sacctmgr -i add cluster "$CLUSTER" >/dev/null
fi

# ---------------------------------------------------------------- 7. slurmctld
if ! alive "$S/run/slurmctld.pid"; then
  log "starting slurmctld"
  daemon /usr/sbin/slurmctld
fi
wait_for 60 "slurmctld (scontrol ping)" sh -c 'scontrol ping | grep -q UP'

# ---------------------------------------------------------------- 8. slurmd x N
for n in "${NODES[@]}"; do
  if ! alive "$S/run/slurmd-$n.pid"; then
    log "starting slurmd -N $n"
    daemon /usr/sbin/slurmd -N "$n"
  fi
done

# ---------------------------------------------------------------- 9. accounts (while nodes register)
sa() { # sacctmgr, tolerating "already exists" (exit 1 with "Nothing new added")
  local out
  out=$(sacctmgr -i "$@" 2>&1) && return 0
  case $out in *"Nothing new added"*|*"already exists"*|*"Nothing modified"*) return 0 ;; esac
  die "sacctmgr $*: $out"
}
sa add qos high Priority=1000
sa add account research Cluster="$CLUSTER" Description="research division" Organization=research
sa add account physics Parent=research Cluster="$CLUSTER" Description="physics group" Organization=research
sa add account ml-research Parent=research Cluster="$CLUSTER" Description="ML research" Organization=research
sa add account ops Cluster="$CLUSTER" Description="operations" Organization=ops
sa add user alice Account=physics DefaultAccount=physics Cluster="$CLUSTER"
sa add user alice Account=ml-research Cluster="$CLUSTER"
sa add user bob Account=ml-research DefaultAccount=ml-research Cluster="$CLUSTER"
sa add user carol Account=ops DefaultAccount=ops Cluster="$CLUSTER"
sa modify user where name=alice,bob,carol set QOS=normal,high DefaultQOS=normal
assoc=$(sacctmgr -n -P list assoc cluster="$CLUSTER" format=account,user)
for a in 'physics|alice' 'ml-research|alice' 'ml-research|bob' 'ops|carol'; do
  grep -qxF "$a" <<<"$assoc" || die "association $a missing"
done

wait_for 90 "all ${#NODES[@]} nodes idle" sh -c \
  "[ \"\$(sinfo -h -N -o '%N %t' | awk '\$2 ~ /^(idle|mix|alloc)\$/ {print \$1}' | sort -u | wc -l)\" -ge ${#NODES[@]} ]"
# slurmctld learns new associations from slurmdbd asynchronously; wait until it accepts them
wait_for 30 "slurmctld knows user carol" sh -c "scontrol show assoc_mgr users=carol flags=users | grep -q 'UserName=carol'"

log "cluster '$CLUSTER' up in $((SECONDS - T0)) s: $(sinfo -h -o '%P:%D:%t' | tr '\n' ' ')"
