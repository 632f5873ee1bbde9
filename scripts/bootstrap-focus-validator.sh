#!/usr/bin/env bash
# The FinOps Foundation's FOCUS validator (PyPI focus-validator) in its own virtualenv,
# .venv-focus: its 2.x releases need Python >= 3.12, beside the project's 3.11 (docs/focus.md).
# Idempotent: a stamp naming the pinned version skips the install on the next run. Where no
# Python 3.12+ is found it says so and exits 0: the validator tests then skip (or fail with
# GPULEDGER_REQUIRE_SERVICES=1).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-focus}"
VERSION="2.2.1"
# focus-validator 2.2.1 wants numpy < 2 but leaves pyarrow open, and pyarrow >= 22 needs
# numpy 2 (the validator then fails on import): pin a pyarrow that runs with numpy 1.26
PINS=("focus-validator==$VERSION" "numpy==1.26.4" "pyarrow==21.0.0")
STAMP="$VENV/.installed-focus-validator-$VERSION-pyarrow-21.0.0"
if [ -f "$STAMP" ] && [ -x "$VENV/bin/focus-validator" ]; then
  echo "focus-validator $VERSION present in $VENV" >&2
  exit 0
fi
python=""
for candidate in "$(command -v python3.12 || true)" "$(command -v python3.13 || true)" \
    ~/.pyenv/versions/3.12*/bin/python ~/.pyenv/versions/3.13*/bin/python; do
  [ -n "$candidate" ] && [ -x "$candidate" ] || continue
  # a pyenv shim can exist without the version behind it: ask the interpreter itself
  if "$candidate" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "cannot install focus-validator $VERSION: expected Python >= 3.12 (python3.12 on PATH or" \
       "~/.pyenv/versions/3.12*), found none; the FOCUS validator tests will skip" >&2
  exit 0
fi
rm -rf "$VENV"
"$python" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "${PINS[@]}"
# from a scratch folder: the validator writes focus_validator_detailed.log where it runs
validator="$(cd "$VENV/bin" && pwd)/focus-validator"
scratch="$(mktemp -d)"
(cd "$scratch" && "$validator" --help >/dev/null)
rm -rf "$scratch"
touch "$STAMP"
echo "installed focus-validator $VERSION into $VENV ($("$VENV/bin/python" --version))" >&2
