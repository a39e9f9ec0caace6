# Shared by scripts/demo and scripts/test: a project virtualenv that is (re)installed only when
# pyproject.toml changes, and the local services the tests talk to.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

ensure_venv() {
  local py="${PYTHON:-python3}"
  if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "felab needs Python 3.11 or newer; set PYTHON=/path/to/python3.11" >&2
    exit 2
  fi
  if [ ! -x "$VENV/bin/python" ]; then
    echo "==> creating $VENV"
    "$py" -m venv "$VENV"
  fi
  local stamp="$VENV/.felab-installed"
  local want
  want="$(sha256sum "$ROOT/pyproject.toml" | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "==> installing felab and its dependencies into .venv"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e "$ROOT[dev]"
    echo "$want" > "$stamp"
  fi
}

# PostgreSQL and Redis: start them when they are down (this machine's own services).
ensure_services() {
  if command -v pg_isready >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
    if command -v pg_ctlcluster >/dev/null 2>&1; then
      echo "==> starting PostgreSQL"
      pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start || true
    fi
  fi
  if command -v redis-cli >/dev/null 2>&1 && ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    if command -v redis-server >/dev/null 2>&1; then
      echo "==> starting Redis"
      redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no || true
    fi
  fi
}
