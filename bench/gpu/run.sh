#!/usr/bin/env bash
# The GPU check (bench/gpu/check.py) on one CUDA device, with only what the machine has installed:
# this working tree on PYTHONPATH, torch, and Accelerate / Lightning where present. At most 8
# minutes; the results table goes to $OUT/gpu_results.md (or bench/gpu/gpu_results.md).
#   bash bench/gpu/run.sh            # any extra arguments go to check.py (e.g. --quick)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
OUT_DIR="${OUT:-$ROOT/bench/gpu}"
mkdir -p "$OUT_DIR"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
timeout 480 python3 "$ROOT/bench/gpu/check.py" --device cuda --out "$OUT_DIR/gpu_results.md" "$@"
