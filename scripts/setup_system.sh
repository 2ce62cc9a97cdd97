#!/usr/bin/env bash
# System set-up shared by `make demo` and `make test`: Debian packages the project needs,
# PostgreSQL and Redis running on 127.0.0.1, and the default database. Idempotent.
set -euo pipefail

say() { printf 'setup: %s\n' "$*"; }
fail() { printf 'setup: %s\n' "$*" >&2; exit 1; }

missing=()
[ -x /usr/sbin/nginx ] || command -v nginx >/dev/null 2>&1 || missing+=(nginx)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v pg_ctlcluster >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v npm >/dev/null 2>&1 || missing+=(npm)
command -v prometheus >/dev/null 2>&1 || [ -x /usr/bin/prometheus ] || missing+=(prometheus)

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || fail "missing Debian packages: ${missing[*]}; install them as root with: apt-get install ${missing[*]}"
    sudo=sudo
  fi
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get could not install ${missing[*]}; run it by hand to see why."
fi

# PostgreSQL on 127.0.0.1:5432 (trust auth on these machines; see README for others).
if ! pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; then
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)
  [ -n "$version" ] || fail "PostgreSQL is installed but has no cluster; create one with: pg_createcluster 15 main"
  say "starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 \
    || pg_ctlcluster "$version" main start >/dev/null 2>&1 || true
  for _ in $(seq 1 40); do pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null && break; sleep 0.5; done
  pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null \
    || fail "PostgreSQL does not answer on 127.0.0.1:5432; start it (pg_ctlcluster $version main start) or set DATABASE_URL."
fi

# Redis on 127.0.0.1:6379 (Celery broker and channel layer; nothing kept on disk).
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
  say "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
    --dir /tmp --logfile "" >/dev/null 2>&1 || true
  for _ in $(seq 1 20); do redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 && break; sleep 0.25; done
  redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1 \
    || fail "Redis does not answer on 127.0.0.1:6379; start it (redis-server) or set REDIS_URL."
fi

# The default database and its role `switchyard`, not a superuser (only when DATABASE_URL is
# not set: a custom one is the user's).
if [ -z "${DATABASE_URL:-}" ]; then
  bash "$(dirname "$0")/setup_database.sh" switchyard switchyard \
    || fail "could not set up role and database 'switchyard' as user postgres on 127.0.0.1; create them or set DATABASE_URL."
fi

# --- install kit (issue #15): containers for the compose end-to-end test -------------------
# podman + runc build and run the compose kit's images (crun fails on this kernel's cgroup
# hybrid mode); debootstrap makes the base image from the Debian archive (no registry needed);
# docker-compose (Debian's 1.29) checks docker-compose.yml offline; podman-compose (PyPI,
# requirements.txt) runs it.
kit_missing=()
command -v podman >/dev/null 2>&1 || kit_missing+=(podman)
command -v runc >/dev/null 2>&1 || kit_missing+=(runc)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || kit_missing+=(debootstrap)
command -v docker-compose >/dev/null 2>&1 || kit_missing+=(docker-compose)
# Service-name DNS on podman's CNI bridge networks (compose services find each other by name).
[ -x /usr/lib/cni/dnsname ] || kit_missing+=(golang-github-containernetworking-plugin-dnsname)
# kubectl's built-in kustomize renders the Kubernetes overlays in the suite (Debian's is 1.20).
command -v kubectl >/dev/null 2>&1 || kit_missing+=(kubernetes-client)
if [ ${#kit_missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  say "installing Debian packages for the install kit: ${kit_missing[*]}"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends \
    "${kit_missing[@]}" uidmap slirp4netns fuse-overlayfs >/dev/null \
    || fail "apt-get could not install ${kit_missing[*]}; run it by hand to see why."
fi
# --- end install kit -----------------------------------------------------------------------
