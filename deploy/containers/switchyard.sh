#!/bin/sh
# The control plane image's entrypoint: one process kind per container.
#   web                the web command on :8000 (controlplane/web_server.py: one daphne
#                      process per core, or SWITCHYARD_WEB_PROCESSES, on one port); applies
#                      migrations first unless SWITCHYARD_MIGRATE=0; a pool of
#                      SWITCHYARD_DATABASE_POOL_SIZE (default 10) connections per process;
#                      not listening on SWITCHYARD_WEB_UNLISTENED_NETWORKS (CIDRs: the
#                      Triton nodes' network, deploy/containers/web_endpoints.py)
#   worker [args]      the Celery worker of the queues in SWITCHYARD_WORKER_QUEUES (default:
#                      the fleet lane, $SWITCHYARD_CELERY_QUEUE), plus a worker of its own
#                      for the releases lane with SWITCHYARD_RELEASE_SLOTS slots (default 2;
#                      0: none) so release ticks never wait behind a push, plus the nginx
#                      router of every cluster named in SWITCHYARD_ROUTER_CLUSTERS (the
#                      nginx driver reloads nginx by its pid and release ticks read its
#                      access log: they share a container). Routers listen on 127.0.0.1
#                      only; SWITCHYARD_ROUTER_PUBLISH, e.g. "8080=18080", forwards
#                      0.0.0.0:8080 to the router on 127.0.0.1:18080.
#   beat               Celery beat (exactly one per installation)
#   collector [args]   the telemetry collector
#   router CLUSTER     one cluster's nginx router alone (where no worker drives it)
#   front              the compose kit's published ports: nginx on :8000 in front of the web
#                      process (it sets X-Forwarded-For to the client's address; websockets
#                      pass), and plain TCP forwards from SWITCHYARD_FRONT_FORWARDS, e.g.
#                      "8080=router:8080,9090=prometheus:9090" (socat)
#   migrate            apply migrations and exit
#   anything else      run as given (e.g. `python manage.py createsuperuser`)
# Every kind but web and migrate waits until the database is reachable and migrated, so the
# start order of containers does not matter.
set -eu

retry() {  # retry N CMD...: run CMD until it succeeds, N times at most, 2 s apart
  tries=$1; shift
  until "$@"; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || { echo "switchyard: gave up on: $*" >&2; exit 1; }
    sleep 2
  done
}

schema_ready() { python manage.py migrate --check >/dev/null 2>&1; }

kind=${1:-web}
[ $# -gt 0 ] && shift
case "$kind" in
  web)
    if [ "${SWITCHYARD_MIGRATE:-1}" != 0 ]; then retry 150 python manage.py migrate --noinput; fi
    export SWITCHYARD_DATABASE_POOL_SIZE="${SWITCHYARD_DATABASE_POOL_SIZE:-10}"
    if [ -n "${SWITCHYARD_WEB_UNLISTENED_NETWORKS:-}" ]; then
      # shellcheck disable=SC2046  # one word per flag and endpoint
      exec python -m controlplane.web_server \
        $(python /app/deploy/containers/web_endpoints.py 8000) "$@"
    fi
    exec python -m controlplane.web_server -b 0.0.0.0 -p 8000 "$@" ;;
  migrate)
    retry 150 python manage.py migrate --noinput ;;
  worker)
    retry 300 schema_ready
    for pair in $(echo "${SWITCHYARD_ROUTER_PUBLISH:-}" | tr ',' ' '); do
      socat TCP-LISTEN:"${pair%%=*}",fork,reuseaddr,backlog=1024 TCP:127.0.0.1:"${pair#*=}" &
    done
    for cluster in $(echo "${SWITCHYARD_ROUTER_CLUSTERS:-}" | tr ',' ' '); do
      ( while true; do
          python manage.py run_router --cluster "$cluster" --wait 31536000 || true
          sleep 5
        done ) &
    done
    base=${SWITCHYARD_CELERY_QUEUE:-switchyard}
    slots=${SWITCHYARD_RELEASE_SLOTS:-2}
    if [ "$slots" -gt 0 ]; then
      ( while true; do
          celery -A controlplane worker --loglevel=INFO --hostname="releases@%h" \
            --queues="$base.releases" --concurrency="$slots" || true
          sleep 5
        done ) &
    fi
    exec celery -A controlplane worker --loglevel=INFO --hostname="worker@%h" \
      --queues="${SWITCHYARD_WORKER_QUEUES:-$base}" "$@" ;;
  beat)
    retry 300 schema_ready
    exec celery -A controlplane beat --loglevel=INFO "$@" ;;
  collector)
    retry 300 schema_ready
    exec python manage.py run_collector "$@" ;;
  front)
    for pair in $(echo "${SWITCHYARD_FRONT_FORWARDS:-}" | tr ',' ' '); do
      socat TCP-LISTEN:"${pair%%=*}",fork,reuseaddr,backlog=1024 TCP:"${pair#*=}" &
    done
    retry 150 getent hosts "${SWITCHYARD_FRONT_WEB:-web}"
    conf=$(mktemp -d)
    sed "s/@WEB@/${SWITCHYARD_FRONT_WEB:-web}/; s#@TMP@#$conf#g" \
      /app/deploy/containers/front-nginx.conf > "$conf/nginx.conf"
    exec nginx -e stderr -c "$conf/nginx.conf" ;;
  router)
    retry 300 schema_ready
    exec python manage.py run_router --wait 31536000 --cluster "$@" ;;
  *)
    exec "$kind" "$@" ;;
esac
