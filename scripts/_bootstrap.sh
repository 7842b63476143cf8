# shellcheck shell=bash
# Shared setup for scripts/*: sourced, not run.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/_bootstrap.sh"
#   mindstore_bootstrap test          # or: mindstore_bootstrap test,bench
#   mindstore_bootstrap ""            # no extras: the plain package (scripts/demo)
#   "$MINDSTORE_PY" -m pytest ...
#
# Creates .venv in the repository root if it is missing (Python >= 3.11; set
# MINDSTORE_PYTHON=/path/to/python to choose one), and installs the project editable with
# the given extras (pip install -e '.[extras]', or -e . for none) only when pyproject.toml
# changed since the last install of those extras (a stamp file in .venv). Needs only
# python3 and PyPI. MINDSTORE_SKIP_INSTALL=1 skips the install step entirely.

set -euo pipefail

MINDSTORE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MINDSTORE_VENV="${MINDSTORE_ROOT}/.venv"
MINDSTORE_PY="${MINDSTORE_VENV}/bin/python"
export MINDSTORE_ROOT MINDSTORE_VENV MINDSTORE_PY

_ms_say() { printf 'mindstore: %s\n' "$*" >&2; }
_ms_die() { _ms_say "error: $*"; exit 1; }

# prints the first interpreter that is Python >= 3.11
_ms_find_python() {
    local candidate
    for candidate in ${MINDSTORE_PYTHON:-} python3.13 python3.12 python3.11 python3 python; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
            >/dev/null 2>&1; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

_ms_ensure_venv() {
    if [ -x "$MINDSTORE_PY" ]; then
        if ! "$MINDSTORE_PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
            >/dev/null 2>&1; then
            _ms_die "${MINDSTORE_VENV} uses Python $("$MINDSTORE_PY" -V 2>&1 || echo '?'); mindstore needs >= 3.11. Remove .venv and run again."
        fi
        return 0
    fi
    local python
    python="$(_ms_find_python)" || _ms_die "Python 3.11 or newer is required (found: $(python3 -V 2>&1 || echo 'no python3')). Install it, or set MINDSTORE_PYTHON=/path/to/python3.11."
    _ms_say "creating .venv with $("$python" -V 2>&1)"
    if ! "$python" -m venv "$MINDSTORE_VENV"; then
        rm -rf "$MINDSTORE_VENV"
        _ms_die "'$python -m venv' failed (on Debian/Ubuntu: apt-get install python3-venv)"
    fi
}

_ms_pyproject_hash() {
    "$MINDSTORE_PY" - "$MINDSTORE_ROOT/pyproject.toml" <<'PY'
import hashlib, sys
with open(sys.argv[1], "rb") as f:
    print(hashlib.sha256(f.read()).hexdigest())
PY
}

# mindstore_bootstrap [extras]  (extras: comma-separated, default "test"; "" for none)
mindstore_bootstrap() {
    local extras="${1-test}"
    _ms_ensure_venv
    if [ "${MINDSTORE_SKIP_INSTALL:-0}" = "1" ]; then
        return 0
    fi
    local target="." needs="mindstore"
    [ -n "$extras" ] && target=".[${extras}]"
    [[ ",${extras}," == *,test,* ]] && needs="mindstore, pytest"
    local name="${extras//,/-}"
    local stamp="${MINDSTORE_VENV}/.mindstore-installed-${name:-plain}"
    local want have=""
    want="$(_ms_pyproject_hash)"
    [ -f "$stamp" ] && have="$(cat "$stamp")"
    if [ "$want" = "$have" ]; then
        return 0
    fi
    if [ -z "$extras" ]; then  # any current install has the plain package
        local other
        for other in "${MINDSTORE_VENV}"/.mindstore-installed-*; do
            if [ -f "$other" ] && [ "$(cat "$other")" = "$want" ]; then
                return 0
            fi
        done
    fi
    _ms_say "installing mindstore${target#.} into .venv (pyproject.toml changed or first run)"
    "$MINDSTORE_PY" -m pip install --quiet --disable-pip-version-check --upgrade pip \
        || _ms_say "warning: could not upgrade pip; continuing with $("$MINDSTORE_PY" -m pip --version 2>&1 | cut -d' ' -f1-2)"
    if (cd "$MINDSTORE_ROOT" && "$MINDSTORE_PY" -m pip install --quiet --disable-pip-version-check -e "$target"); then
        printf '%s\n' "$want" >"$stamp"
    elif "$MINDSTORE_PY" -c "import ${needs}" >/dev/null 2>&1; then
        _ms_say "warning: 'pip install -e ${target}' failed (offline?); using the environment already in .venv"
    else
        _ms_die "'pip install -e ${target}' failed; see the messages above"
    fi
}
