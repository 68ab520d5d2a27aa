#!/bin/bash
# The admission-control sweep of BENCHMARKS.md ("Earliest deadline first under overload"):
# the null-backend server pinned to CPU 0 and the load client to CPU 1, both niced, open-loop
# Poisson arrivals at each rate with 2 s budgets.
#   benchmarks/admission-sweep.sh RATES SECONDS OUT.json [DATA_DIR]
# DATA_DIR (default bench-results/data, made by `make bench`'s setup-demo) is copied first, so
# the run's key is made in the copy.
set -eu
RATES=$1 SECONDS_PER_RATE=$2 OUT=$3 SOURCE=${4:-bench-results/data}
WORK=$(mktemp -d)
cp -r "$SOURCE" "$WORK/data"
export RAGTIME_DATA_DIR=$WORK/data RAGTIME_GENERATION_BACKEND=null RAGTIME_MAX_OUTPUT_TOKENS=16
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
PY=${PY:-.venv/bin/python}
KEY=$($PY -m app.cli keys create bench 2>/dev/null | grep '^rt_')
PORT=$($PY -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
nice -n 5 taskset -c 0 $PY -m app.cli serve --port "$PORT" --log-level warning \
  > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null; rm -rf "$WORK"' EXIT
for _ in $(seq 120); do
  curl -sf "http://127.0.0.1:$PORT/readyz" -o /dev/null && break
  sleep 0.5
done
nice -n 5 taskset -c 1 $PY -m app.cli bench load --url "http://127.0.0.1:$PORT" --key "$KEY" \
  --rates "$RATES" --duration "$SECONDS_PER_RATE" --budget-ms 2000 --warmup 4 --timeout 30 \
  --no-progress --json "$OUT"
