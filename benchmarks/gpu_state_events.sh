#!/usr/bin/env bash
# GPU check of the state events (BENCHMARKS.md, "State events"): run from the
# repository root on a device machine, .gpu_site/ carried (see gpu_check.sh).
#   a. benchmarks/event_cost.py --batch 1024: the pothole on the double
#      wishbone, 0 / 10 / 100 % of the variants through the stops
#   b. pytest tests/kernels/test_state_events.py (all tiers) on the GPU, in one
#      process (-n 4 failed on its first use: every xdist worker's JAX takes
#      most of the GPU's memory, the second one cannot start)
export PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
TOTAL=${TOTAL:-500}
START=$SECONDS
left() { echo $(( TOTAL - (SECONDS - START) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$REPO"/.gpu_site/whl/*.whl || echo "WHEEL INSTALL FAILED"
export PYTHONPATH=/tmp/site:$REPO/.gpu_site/site:$REPO
unset JAX_PLATFORMS JAX_PLATFORM_NAME AXLE_CPU_DEVICES
export JAX_COMPILATION_CACHE_DIR=${JAX_COMPILATION_CACHE_DIR:-/tmp/jax_cache}
nvidia-smi -L
python3 -c "import jax; print(jax.__version__, jax.devices())"
echo "=== a. event cost, batch ${BATCH:-1024} ($(left) s left)"
timeout $(( $(left) * 6 / 10 )) python3 benchmarks/event_cost.py --batch "${BATCH:-1024}" 2>&1 | tee "$OUT/event_cost.txt"
echo "=== b. tests/kernels/test_state_events.py ($(left) s left)"
timeout $(( $(left) - 10 )) python3 -m pytest -p no:cacheprovider -q -m "" -n 0 \
    tests/kernels/test_state_events.py 2>&1 | tail -25 | tee "$OUT/tests.txt"
echo "=== done, t+$((SECONDS - START)) s"
