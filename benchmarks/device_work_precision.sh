#!/usr/bin/env bash
# The pothole work-precision diagram (benchmarks/work_precision.py --loadcase
# pothole --stop-law switching: 2 axles x 3 methods x 5 h x 4 N = 120
# compiles) split over the CPU cores of a device machine: SHARDS processes,
# each pinned to its own core (taskset), JAX on the CPU (the diagram is the
# single-variant CPU figure, as the longitudinal one). The Radau references
# come from REFS (computed once beforehand: --reference-cache). Run from the
# repository root with .gpu_site/ and .wp_refs/ carried (see gpu_check.sh;
# .wp_refs/: `--reference-cache .wp_refs` of a local run). The device
# machine returns at most 8 files from $OUT: everything goes into one
# tarball, $OUT/work_precision_pothole.tgz; unpack it here and merge with
#   python benchmarks/work_precision.py --merge OUT.json SEED.json DIR/*.shard*.json
# The first use (2026-11-26, 16 shards, 545 s) measured 55 of the 120
# combinations (one compile took 45-120 s on one core of that machine);
# the rows already in benchmarks/results/work_precision_pothole.json are
# seeded into every shard, so a call measures only what is missing. The
# machine goes back 30 s after a call: a second call starts a fresh one.
export PYTHONUNBUFFERED=1
REPO=$(pwd)
OUT=${OUT:-/tmp/wp_out}
WORK=${WORK:-/tmp/wp_dev}   # kept while the machine stays warm: a second call resumes there
REFS=${REFS:-$REPO/.wp_refs}
SHARDS=${SHARDS:-16}
TOTAL=${TOTAL:-540}
mkdir -p "$OUT" "$WORK"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$REPO"/.gpu_site/whl/*.whl || echo "WHEEL INSTALL FAILED"
export PYTHONPATH=/tmp/site:$REPO/.gpu_site/site:$REPO
export JAX_PLATFORMS=cpu
unset AXLE_CPU_DEVICES
lscpu | grep -E "Model name|^CPU\(s\)" | tee "$WORK/machine.txt"
# rows already measured (SEED, default the committed diagram) are kept:
# every shard resumes from them and measures only the missing combinations
SEED=${SEED:-$REPO/benchmarks/results/work_precision_pothole.json}
for k in $(seq 0 $((SHARDS - 1))); do
    [ -f "$SEED" ] && [ ! -f "$WORK/work_precision_pothole.shard$k.json" ] && \
        cp "$SEED" "$WORK/work_precision_pothole.shard$k.json"
done
START=$SECONDS
for k in $(seq 0 $((SHARDS - 1))); do
    timeout $((TOTAL - (SECONDS - START))) taskset -c "$k" python3 benchmarks/work_precision.py \
        --loadcase pothole --stop-law switching --reference-cache "$REFS" --no-cache \
        --shard "$k/$SHARDS" --repeat "${REPEAT:-2}" --resume --out-dir "$WORK" >> "$WORK/shard$k.log" 2>&1 &
done
wait
echo "=== done, t+$((SECONDS - START)) s"
tar czf "$OUT/work_precision_pothole.tgz" -C "$WORK" .
grep -h "combinations," "$WORK"/shard*.log; grep -c "\[ok\]" "$WORK"/shard*.log
