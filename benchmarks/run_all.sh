#!/usr/bin/env bash
# Every benchmark, one after the other on a quiet machine, each writing its table to
# benchmarks/results/. Pass --quick for a smoke run (its tables go to the temp folder, not
# results/: see results_io.py). No figure leaves a warm-up out (benchmarks/latency.py);
# bench_cold_start keeps the stores it builds in /tmp/rdfmem-bench-cache between runs.
# Needs: pip install -e ".[test,bench]" (and apt-get install wrk virtuoso-opensource for the
# server and remote benchmarks, nodejs and npm for the official MCP memory server that
# bench_mcp compares with).
set -euo pipefail
cd "$(dirname "$0")/.."
for bench in kv decisions memories agent_loop cold_start processes remote remote_search \
  remote_saves server mcp langgraph; do
  echo "== $bench"
  python "benchmarks/bench_$bench.py" "$@"
done
