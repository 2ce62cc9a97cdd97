#!/bin/sh
# Start tritonserver from the nvidia-pytriton wheel the way Switchyard drives its nodes:
# explicit model control, every address open inside the container, p99 summaries on.
# The control API (repository: load, unload, index; shared memory; trace; logging) answers
# only requests carrying the header `switchyard-node-key` with the key read from
# TRITON_NODE_KEY_FILE (default /run/secrets/node_key); the node refuses to start without
# one. TRITON_NODE_KEY_FILE=none starts it unrestricted (a node only Switchyard's own
# network reaches, with a control plane that sends no key). Extra arguments are passed to
# tritonserver.
set -eu
key_file=${TRITON_NODE_KEY_FILE:-/run/secrets/node_key}
restricted=${TRITON_RESTRICTED_APIS:-model-repository,shared-memory,trace,logging}
if [ "$key_file" != none ]; then
  key=$(cat "$key_file" 2>/dev/null || true)
  case "$key" in
    "" | *[!A-Za-z0-9._~+/-]*)
      echo "triton-node: $key_file holds no node key (letters, digits, . _ ~ + / -)" >&2
      exit 64 ;;
  esac
  set -- --http-restricted-api="$restricted:switchyard-node-key=$key" \
    --grpc-restricted-protocol="$restricted:switchyard-node-key=$key" "$@"
fi
root=$(python -c 'import pathlib, pytriton; print(pathlib.Path(pytriton.__file__).parent / "tritonserver")')
libs="$root/../../nvidia_pytriton.libs"
backends="${TRITON_BACKENDS_DIR:-$HOME/backends}"
mkdir -p "$backends/python"
# The python backend needs the stub built for this Python (links keep $ORIGIN lookups).
for f in "$root"/backends/python/*; do ln -sf "$f" "$backends/python/"; done
ln -sf "$root/python_backend_stubs/3.11/triton_python_backend_stub" "$backends/python/"
export LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}"
exec "$root/bin/tritonserver" \
  --model-repository="${TRITON_MODEL_REPOSITORY:-/models}" \
  --backend-directory="$backends" \
  --model-control-mode=explicit \
  --disable-auto-complete-config \
  --http-port=8000 --grpc-port=8001 --metrics-port=8002 \
  --metrics-config=summary_latencies=true \
  --metrics-interval-ms="${TRITON_METRICS_INTERVAL_MS:-2000}" \
  --exit-timeout-secs=10 \
  --log-verbose=0 \
  "$@"
