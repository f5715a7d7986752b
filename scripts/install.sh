# Sourced by scripts/serve and scripts/test: create .venv and install into it only when the inputs
# changed since the last install (a stamp in .venv holding their hash), so that a second start
# needs no package index.
#
#   ensure_venv
#   if ! install_is_current NAME; then pip install ...; mark_installed NAME; fi

PYTHON=${PYTHON:-python3}

ensure_venv() {
  if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
  fi
}

# The hash of what an install depends on: the project files and locks that exist, and the venv's
# Python (a venv recreated with another interpreter installs again).
install_inputs_hash() {
  local name=$1 f
  {
    echo "stamp $name"
    .venv/bin/python -c 'import sys; print(sys.version)'
    for f in pyproject.toml client/pyproject.toml requirements*.txt *.lock client/*.lock; do
      if [ -f "$f" ]; then echo "$f"; cat "$f"; fi
    done
  } | sha256sum | cut -d' ' -f1
}

install_is_current() {
  local stamp=".venv/.installed-$1"
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(install_inputs_hash "$1")" ]
}

# Written only after every install step succeeded (the scripts run with set -e).
mark_installed() {
  install_inputs_hash "$1" > ".venv/.installed-$1"
}

# The console's browser tests (tests/console) drive Debian's chromium and its driver: installed with
# apt-get when missing (as root, or through sudo when it needs no password).
ensure_browser() {
  if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    return 0
  fi
  command -v apt-get >/dev/null 2>&1 || { echo "warning: no apt-get: install chromium and chromium-driver" >&2; return 0; }
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo -n"; fi
  $sudo apt-get update -qq >/dev/null || true
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
}
