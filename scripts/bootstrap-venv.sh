#!/usr/bin/env bash
# Create the project virtualenv and install the locked dependencies.
# On a bare Debian, python3 lacks venv/ensurepip: install python3-venv when we are root.
set -euo pipefail
VENV="${1:-.venv}"
if ! python3 -m venv --help >/dev/null 2>&1 || ! python3 -c "import ensurepip" >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing python3-venv (Debian)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq python3-venv >/dev/null
  else
    echo "error: expected python3 with the venv module, found none: install python3-venv" >&2
    exit 1
  fi
fi
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -c constraints.txt -e ".[dev]"
# The duckdb CLI ($VENV/bin/duckdb, README "Querying while the pipeline writes") must be the same
# DuckDB as the Python package, or it may refuse the ledger file: pin it to the installed version
# (constraints.txt pins it too, so a drift between the two pins fails here, loudly).
DUCKDB_VERSION="$("$VENV/bin/python" -c 'import duckdb; print(duckdb.__version__)')"
"$VENV/bin/python" -m pip install -q -c constraints.txt "duckdb-cli==$DUCKDB_VERSION"
echo "installed into $VENV" >&2
