# Shared by scripts/with-postgres and scripts/pg-fixture (sourced, not run): finding PostgreSQL's binaries,
# free ports, and starting a throw-away cluster as the `postgres` user when run as root (PostgreSQL refuses
# to run as root).

log() { printf '[%s] %s\n' "${LOG_NAME:-postgres}" "$*" >&2; }

find_pg_bin() {
  local candidate
  if command -v pg_config >/dev/null 2>&1; then
    candidate="$(pg_config --bindir 2>/dev/null || true)"
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ]; then echo "$candidate"; return 0; fi
  fi
  for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r) /usr/local/bin /opt/homebrew/bin; do
    if [ -x "$candidate/initdb" ] && [ -x "$candidate/pg_ctl" ]; then echo "$candidate"; return 0; fi
  done
  return 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()' 2>/dev/null \
    || echo $(( 20000 + RANDOM % 20000 ))
}

random_password() { echo "skyros-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"; }

# Installs Debian packages when running as root with apt-get; otherwise fails, naming them.
apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    log "installing $* with apt-get"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "$@" >/dev/null
  else
    log "missing: $* (Debian/Ubuntu: sudo apt-get install $*)"
    return 1
  fi
}

# Sets RUN_AS (the prefix that runs a command as the cluster's owner) and hands ROOT to that owner.
own_root() {
  local root="$1"
  RUN_AS=()
  if [ "$(id -u)" = 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --home "$root" postgres
    chown -R postgres "$root"
    RUN_AS=(runuser -u postgres --)
  fi
}

# init_cluster DATA PASSWORD_FILE: initdb with a superuser `postgres` (that password), SCRAM over TCP.
init_cluster() {
  "${RUN_AS[@]}" "$PG_BIN/initdb" -D "$1" -U postgres --pwfile="$2" \
    --auth-local=trust --auth-host=scram-sha-256 -E UTF8 --locale=C >"$1.initdb.log" 2>&1 \
    || { cat "$1.initdb.log" >&2; return 1; }
}

# start_cluster DATA PORT SOCKET_DIR [extra postgres options…]: starts it on 127.0.0.1:PORT and waits.
start_cluster() {
  local data="$1" port="$2" socket="$3"
  shift 3
  "${RUN_AS[@]}" "$PG_BIN/pg_ctl" -D "$data" -l "$data.log" -w -t 60 start \
    -o "-p $port -k $socket -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off $*" \
    >/dev/null || { cat "$data.log" >&2; return 1; }
}
