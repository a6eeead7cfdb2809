"""XLA:CPU options measured, not guessed: the batched chunk runner's
throughput (benchmarks/sweep_throughput.py: double wishbone, per-variant
static equilibrium + LSRT2 h = 1 ms, re-linearised every step) under each
XLA_FLAGS setting, one fresh process per setting (XLA reads its flags once),
one JAX device.

Usage: python benchmarks/xla_flags.py [--batch 256] [--steps 200]
Writes benchmarks/results/xla_flags.{json,md}. A flag this jaxlib does not
know makes its process fail: the row says so.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETTINGS = [
    ("default", ""),
    ("intra-op threads off", "--xla_cpu_multi_thread_eigen=false"),
    ("fast math on", "--xla_cpu_enable_fast_math=true"),
    ("fast min/max", "--xla_cpu_enable_fast_min_max=true"),
    ("prefer 512-bit vectors", "--xla_cpu_prefer_vector_width=512"),
    ("legacy (non-thunk) runtime", "--xla_cpu_use_thunk_runtime=false"),
    ("backend opt level 1", "--xla_backend_optimization_level=1"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    rows = []
    for name, flags in SETTINGS:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "t.json")
            env = dict(os.environ, XLA_FLAGS=flags, AXLE_CPU_DEVICES="1")
            proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sweep_throughput.py"),
                                   "--batches", str(args.batch), "--steps", str(args.steps), "--json", out],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
            if proc.returncode or not os.path.exists(out):
                err = (proc.stderr.strip().splitlines() or ["?"])[-1][:160]
                rows.append({"setting": name, "xla_flags": flags, "error": err})
                print(f"| {name} | `{flags}` | failed: {err} |", flush=True)
                continue
            r = json.load(open(out))["rows"][0]
        r.update(setting=name, xla_flags=flags)
        rows.append(r)
        print(f"| {name} | `{flags}` | {r['compile_s']:.1f} s | {r['variant_steps_per_s']:.0f} |", flush=True)
    base = next((r["variant_steps_per_s"] for r in rows if r["setting"] == "default" and "error" not in r), None)
    lines = ["| setting | XLA_FLAGS | compile | variant-steps/s | vs default |", "|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['setting']} | `{r['xla_flags']}` | - | failed: {r['error']} | - |")
        else:
            rel = f"{r['variant_steps_per_s'] / base:.2f}x" if base else "-"
            lines.append(f"| {r['setting']} | `{r['xla_flags']}` | {r['compile_s']:.1f} s | "
                         f"{r['variant_steps_per_s']:.0f} | {rel} |")
    res = os.path.join(ROOT, "benchmarks", "results")
    os.makedirs(res, exist_ok=True)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from single_variant import machine
    with open(os.path.join(res, "xla_flags.json"), "w") as f:
        json.dump({"rows": rows, "batch": args.batch, "steps": args.steps, "machine": machine(),
                   "command": "python benchmarks/xla_flags.py " + " ".join(sys.argv[1:])}, f, indent=2)
    with open(os.path.join(res, "xla_flags.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
