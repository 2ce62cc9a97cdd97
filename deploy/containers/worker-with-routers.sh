#!/bin/sh
# The Celery worker of a one-host install, plus the nginx router of each cluster named in
# SWITCHYARD_ROUTER_CLUSTERS (comma-separated). Both live in one container because the
# nginx driver reloads nginx by its pid and release analysis reads its access log.
# A router waits for its cluster to be registered, and restarts if it stops.
set -eu
for cluster in $(echo "${SWITCHYARD_ROUTER_CLUSTERS:-}" | tr ',' ' '); do
  (
    while true; do
      python manage.py run_router --cluster "$cluster" --wait 31536000 || true
      sleep 5
    done
  ) &
done
exec celery -A controlplane worker --loglevel=INFO --hostname=worker@%h "$@"
