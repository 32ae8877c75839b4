#!/usr/bin/env bash
# The triton backend on a real NVIDIA GPU, in one run: the backend's tests (GPU ones included), the
# GPU's measured ceilings beside its datasheet, the suite's Triton baselines on the paper
# workloads, printed as a table, and a Triton kernel exported (accelopt export) and called on CUDA
# tensors. Needs python3 with torch and triton (a CUDA build) and an NVIDIA GPU. What accelopt
# imports beyond them comes from .whl/ when present (made by benchmarks/gpu_wheels.sh, for a
# machine with no package index), else from pip.
#   bash benchmarks/gpu_check.sh            # all of it
#   QUICK=1 bash benchmarks/gpu_check.sh    # tests and a few problems only
#   SEEDS=5 bash benchmarks/gpu_check.sh    # correctness seeds per kernel (default 3: the float64
#                                             references of the paper sizes run on the host CPU)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" >/dev/null; then
    site=$(mktemp -d)
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
    export PYTHONPATH="$site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
else
    "$PY" -m pip install -q -e .  # no [triton] extra: keep the machine's CUDA torch and triton
fi
ACCELOPT_CACHE_DIR=$(mktemp -d)
export ACCELOPT_CACHE_DIR
unset TRITON_INTERPRET

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
"$PY" -c "import torch, triton; print('torch', torch.__version__, '| triton', triton.__version__,
'| cuda', torch.version.cuda, '|', torch.cuda.get_device_name(0))"

echo "== tests of the triton backend (GPU tests included)"
"$PY" -m pytest -q -p no:cacheprovider -o addopts="--import-mode=importlib" \
    tests/backends/test_triton_gpu.py tests/backends/test_triton_checks.py \
    tests/backends/test_triton_hosted.py tests/backends/test_triton_containment.py || status=$?

echo "== the silu baseline in its own contained process on the GPU: the layers it had"
"$PY" -m accelopt eval silu src/accelopt/problems/suite/silu/baseline_triton.py --backend triton \
    --workload paper --seeds 2 --workspace "$ACCELOPT_CACHE_DIR/ws" \
    --json "$ACCELOPT_CACHE_DIR/contained.json" || status=$?
"$PY" -c "import json, sys; e = json.load(open(sys.argv[1])); e = e[0] if isinstance(e, list) else e
print(e.get('status'), e.get('latency_s'), e.get('isolation'))" "$ACCELOPT_CACHE_DIR/contained.json" \
    || status=$?

echo "== ceilings: datasheet and measured"
"$PY" -m accelopt hardware --backend triton --measure

echo "== baselines on the paper workloads"
problems=()
if [ -n "${QUICK:-}" ]; then problems=(--problem silu --problem matmul --problem rmsnorm_matmul); fi
"$PY" -m accelopt bench run --backend triton --workload paper --kernel baseline "${problems[@]}" \
    --seeds "${SEEDS:-3}" --json "$ACCELOPT_CACHE_DIR/bench.json"
if [ -n "${OUT:-}" ]; then cp "$ACCELOPT_CACHE_DIR/bench.json" "$OUT/gpu_bench.json"; fi

echo "== the silu Triton baseline exported (accelopt export) and called on CUDA tensors"
exported="$ACCELOPT_CACHE_DIR/silu-export"
"$PY" -m accelopt export silu --kernel baseline --backend triton --workload cpu \
    --to "$exported" --workspace "$ACCELOPT_CACHE_DIR/ws" || status=$?
"$PY" - "$exported" <<'CHECK' || status=$?
import sys, torch
sys.path.insert(0, sys.argv[1])
from silu_kernel import silu
for shape in [(2048, 3584), (1000, 3)]:  # the exported workload's shape, then a new one
    x = torch.randn(*shape, device="cuda")
    err = ((silu(x) - torch.nn.functional.silu(x)).norm() / torch.nn.functional.silu(x).norm())
    print(f"export: silu{shape} on {x.device}: relative error {err.item():.2e}")
    assert err.item() < 1e-5
CHECK
exit "${status:-0}"
