#!/bin/sh
# Start tritonserver from the nvidia-pytriton wheel the way Switchyard drives its nodes:
# explicit model control, every address open inside the container, p99 summaries on.
# Extra arguments are passed to tritonserver.
set -eu
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
