#!/usr/bin/env bash
# Install the lowest versions pyproject.toml allows (every `name>=x` of
# [project] dependencies pinned to `name==x`) into a fresh virtual
# environment and run the smoke test (store, history, a short job) there.
#   tools/check_min_versions.sh            # venv in a temporary directory, removed after
#   KEEP_VENV=/tmp/minv tools/check_min_versions.sh   # keep (and reuse) the venv
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
VENV="${KEEP_VENV:-$(mktemp -d)/venv}"
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PINS="$("$VENV/bin/python" - "$ROOT/pyproject.toml" <<'PY'
import re, sys, tomllib
deps = tomllib.load(open(sys.argv[1], "rb"))["project"]["dependencies"]
for d in deps:
    m = re.fullmatch(r"\s*([A-Za-z0-9_.\-\[\]]+)\s*>=\s*([0-9][^,;\s]*)\s*", d)
    if not m:
        sys.exit(f"no plain lower bound in dependency {d!r}")
    print(f"{m.group(1)}=={m.group(2)}")
PY
)"
echo "minimum versions:" $PINS
# shellcheck disable=SC2086
"$VENV/bin/pip" install -q $PINS
cd "$ROOT"
"$VENV/bin/python" -W ignore::DeprecationWarning tools/smoke_min_versions.py --job
[ -n "${KEEP_VENV:-}" ] || rm -rf "$(dirname "$VENV")"
echo "minimum versions: ok"
