#!/usr/bin/env bash
# Install, in one apt transaction, the Debian packages the real-service tests need:
# Slurm with accounting (slurm-wlm, slurmdbd, mariadb-server, munge), Prometheus, Chromium, and
# Java (17 on Debian 12) for the standalone Spark cluster (tests/services/spark) when no java is
# on PATH.
# Elsewhere (not root, not Debian) it says so and the tests that need them skip with a reason.
set -euo pipefail
PACKAGES=(slurm-wlm slurmdbd mariadb-server munge prometheus chromium)
if ! command -v java >/dev/null && [ -z "${JAVA_HOME:-}" ]; then
  # Debian 12 has Java 17; Debian 13 ships 21 only (Spark 4 runs on either)
  if grep -qs '^VERSION_ID="12"' /etc/os-release; then
    PACKAGES+=(openjdk-17-jre-headless)
  else
    PACKAGES+=(openjdk-21-jre-headless)
  fi
fi
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages present: ${PACKAGES[*]}" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "cannot install ${missing[*]} (needs root and apt); tests that need them will skip" >&2
  exit 0
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get -o DPkg::Lock::Timeout=600 update -qq
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Packaged services may start on machines with systemd; the tests run their own instances.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  for unit in prometheus slurmctld slurmd slurmdbd mariadb munge; do
    systemctl stop "$unit" >/dev/null 2>&1 || true
  done
fi
