"""Memory traffic per variant-step of the engine's time-response chunk runner,
measured by cache simulation (not estimated).

This machine's kernel exposes no hardware cache counters to ``perf`` (every
hardware event is "not supported"), so the traffic is counted by valgrind's
cachegrind, which runs the real compiled XLA code instruction by instruction
and simulates this CPU's caches on every load and store: D1 = 32 KiB 8-way
(the L1d per core) and LL = the level asked for (``--ll``: 1 MiB = the L2 per
core, or 32 MiB = the L3; misses there are lines fetched from the level
below). All threads share one simulated cache (valgrind serialises them).

Method: the chunk runner (lhs variants, per-variant static equilibrium,
LSRT2 h = 1 ms re-linearised every step, output every 10 steps, lax.map
groups of ``--micro-batch``, one device) is compiled for two step counts
under ``valgrind --tool=none`` (so LLVM targets the CPU that valgrind
emulates: AVX2, no AVX-512 or GFNI, which valgrind cannot run) and
serialised (``jax.experimental.serialize_executable``); each executable is
then run once under cachegrind. Everything but the extra steps (imports,
loading the executable, the equilibria, the outputs) is the same in both
runs, so

    bytes per variant-step = 64 B x (misses(N2) - misses(N1)) / (batch x (N2 - N1)).

The code measured is the AVX2 build of the same program (the native one uses
AVX-512): the same fusions and buffers, so the same traffic to within the
vector width's effect on loop tails.

Usage: python benchmarks/memory_traffic.py [--batch 256] [--steps 10 30] [--ll 1 32]
Writes benchmarks/results/memory_traffic.json. Takes ~30-60 min of two
cores (valgrind runs ~10x, cachegrind ~50-100x slower than native).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XLA_ISA = "--xla_cpu_max_isa=AVX2 --xla_force_host_platform_device_count=1"


def _runner(batch, steps, micro_batch, axle):
    import jax
    import yaml
    sys.path.insert(0, ROOT)
    import kernels  # noqa: F401
    from sweep.study.design import make_design
    from sweep.axle.builder import model_from_config
    from sweep.study.loadcase import build_excitation
    from sweep.axle.params import build_parameters
    from sweep.kinds.time_response import Case, make_chunk_runner
    cfg = lambda *p: yaml.safe_load(open(os.path.join(ROOT, "configs", *p)))  # noqa: E731
    model = model_from_config(cfg("model", f"{axle}.yaml"))
    sw = cfg("sweep", "lhs.yaml")
    pset = build_parameters(sw["parameters"], model)
    exc, _, _ = build_excitation(cfg("loadcase", "longitudinal_step.yaml"))
    every = 10
    X = make_design({"design": "lhs", "n_variants": batch, "seed": 0}, pset)
    run = make_chunk_runner(model, pset, Case(exc, 5.0 - 0.05, 1e-3, steps // every + 1, every=every, relin=1, bidx=list(range(len(model.topology.bushing_names)))), micro_batch=micro_batch or None)
    return jax, jax.jit(run), X


def child(args):
    """``--prepare``: compile (the driver runs this under ``valgrind --tool=none``),
    serialise the executable and its input
    to a file; otherwise (under cachegrind) load both and run once - nothing
    else (no model build, no config), so the fixed cost under valgrind stays
    small. (The persistent compilation cache does not do for the second:
    under valgrind every entry was compiled again - its key differs there.)"""
    import pickle
    import jax
    jax.config.update("jax_enable_x64", True)
    from jax.experimental import serialize_executable
    path = os.path.join(args.cache, f"runner.{args.child_steps}.pkl")
    if args.prepare:
        jax, run, X = _runner(args.batch, args.child_steps, args.micro_batch, args.axle)
        compiled = run.lower(X).compile()
        with open(path, "wb") as fh:
            pickle.dump((serialize_executable.serialize(compiled), jax.device_get(X)), fh)
        out = compiled(X)
    else:
        with open(path, "rb") as fh:
            (payload, in_tree, out_tree), X = pickle.load(fh)
        compiled = serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
        # LAPACK's function pointers are bound when a program with a LAPACK
        # call is lowered; a deserialised executable skips that
        from jax._src.lax.linalg import initialize_lapack
        initialize_lapack()
        tic = time.perf_counter()
        out = jax.block_until_ready(compiled(X))
        print(f"child steps={args.child_steps} run {time.perf_counter() - tic:.1f} s", flush=True)
    leaves = jax.tree_util.tree_leaves(out)
    print(f"child steps={args.child_steps}: {len(leaves)} outputs", flush=True)


_SUMMARY = re.compile(r"==\d+== (D1|LLd|LL|D)\s+(refs|misses):\s+([\d,]+)\s+\(\s*([\d,]+) rd\s+\+\s+([\d,]+) wr\)")


def _child_cmd(args, steps):
    """This script as the child for ``steps`` steps (see :func:`child`)."""
    return [sys.executable, os.path.abspath(__file__), "--child-steps", str(steps), "--cache", args.cache,
            "--batch", str(args.batch), "--micro-batch", str(args.micro_batch), "--axle", args.axle]


def cachegrind(args, steps, ll_mib):
    env = dict(os.environ, XLA_FLAGS=XLA_ISA, OPENBLAS_NUM_THREADS="1", OPENBLAS_CORETYPE="Haswell")
    out_file = os.path.join(args.cache, f"cg.{steps}.{ll_mib}.out")
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--smc-check=all-non-file",
           f"--cachegrind-out-file={out_file}", "--I1=32768,8,64", "--D1=32768,8,64",
           f"--LL={ll_mib * 1024 * 1024},16,64",
           *_child_cmd(args, steps)]
    tic = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - tic
    if p.returncode:
        with open(out_file + ".stderr", "w") as fh:
            fh.write(p.stderr)
        raise RuntimeError(f"cachegrind run failed ({p.returncode}); its output: {out_file}.stderr")
    counts = {}
    for line in p.stderr.splitlines():
        m = _SUMMARY.search(line)
        if m:
            key = f"{m.group(1)}_{m.group(2)}"
            counts[key] = [int(m.group(i).replace(",", "")) for i in (3, 4, 5)]
    print(f"  steps {steps}, LL {ll_mib} MiB: {wall:.0f} s under cachegrind; {counts}", flush=True)
    return counts, wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--axle", default="double_wishbone")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=32)
    ap.add_argument("--steps", type=int, nargs=2, default=[10, 30])
    ap.add_argument("--ll", type=int, nargs="+", default=[1, 32], help="simulated last-level cache sizes [MiB]")
    ap.add_argument("--cache", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--child-steps", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--json", default=os.path.join(ROOT, "benchmarks", "results", "memory_traffic.json"))
    args = ap.parse_args()
    if args.child_steps:
        return child(args)
    args.cache = args.cache or tempfile.mkdtemp(prefix="memtraffic-")
    n1, n2 = args.steps
    # OpenBLAS picks its kernels from CPUID: Haswell's (AVX2) run under valgrind
    env = dict(os.environ, XLA_FLAGS=XLA_ISA, OPENBLAS_NUM_THREADS="1", OPENBLAS_CORETYPE="Haswell")
    from concurrent.futures import ThreadPoolExecutor

    def prepare(steps):
        # compiled under valgrind (no instrumentation): LLVM then targets the
        # CPU that valgrind emulates (natively XLA also emits GFNI etc., which
        # valgrind cannot run even with --xla_cpu_max_isa=AVX2)
        cmd = ["valgrind", "--tool=none", "--smc-check=all-non-file", *_child_cmd(args, steps), "--prepare"]
        tic = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode:
            with open(os.path.join(args.cache, f"prepare.{steps}.stderr"), "w") as fh:
                fh.write(p.stderr)
            raise RuntimeError(f"prepare {steps} failed ({p.returncode}); see {args.cache}")
        print(f"  compiled {steps} steps under valgrind in {time.perf_counter() - tic:.0f} s", flush=True)

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(prepare, (n1, n2)))
        jobs = [(ll, n, pool.submit(cachegrind, args, n, ll)) for ll in args.ll for n in (n1, n2)]
        res = {(ll, n): f.result() for ll, n, f in jobs}
    rows = []
    for ll in args.ll:
        (c1, w1), (c2, w2) = res[(ll, n1)], res[(ll, n2)]
        vs = args.batch * (n2 - n1)
        row = {"axle": args.axle, "batch": args.batch, "micro_batch": args.micro_batch, "steps": [n1, n2],
               "ll_mib": ll, "cachegrind_wall_s": [w1, w2]}
        for key in ("D_refs", "D1_misses", "LLd_misses"):
            if key in c1 and key in c2:
                d = [b - a for a, b in zip(c1[key], c2[key])]
                row[key + "_per_variant_step"] = {"total": d[0] / vs, "read": d[1] / vs, "write": d[2] / vs}
        for key, name in (("D1_misses", "l1_miss_bytes_per_variant_step"),
                          ("LLd_misses", "ll_miss_bytes_per_variant_step")):
            if key + "_per_variant_step" in row:
                row[name] = 64 * row[key + "_per_variant_step"]["total"]
        rows.append(row)
        print(row, flush=True)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from single_variant import machine
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump({"rows": rows, "machine": machine(), "xla_flags": XLA_ISA,
                   "command": "python benchmarks/memory_traffic.py " + " ".join(sys.argv[1:])}, fh, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
