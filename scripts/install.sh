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
