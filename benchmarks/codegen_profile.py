"""Where the generated backend's statements come from.

Generates the C of one axle's integration stage (as
``benchmarks/generated_backend.py`` does, without compiling it) and
attributes every statement that survives dead-code removal to the Python
function and line of the JAX code that made it. Prints the top sources
and the share of each kernels/ module: the map for shrinking the code
(BENCHMARKS.md, "Generated backend").

Usage: python benchmarks/codegen_profile.py [--axle double_wishbone] [--top 40]
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)
import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def _where(eqn):
    from jax._src import source_info_util
    frames = [f for f in source_info_util.user_frames(eqn.source_info.traceback)
              if f.file_name.startswith(ROOT) and "/benchmarks/" not in f.file_name]
    if not frames:
        return "(other)"
    f = frames[0]
    here = f"{os.path.relpath(f.file_name, ROOT)}:{f.start_line} {f.function_name}"
    outer = [g for g in frames if not g.file_name.endswith("kernels/rotations.py")]
    if f.file_name.endswith("kernels/rotations.py") and outer:     # the small-product helpers: who called them
        g = outer[0]
        here += f" <- {os.path.relpath(g.file_name, ROOT)}:{g.start_line} {g.function_name}"
    return here


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--axle", default="double_wishbone")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    from generated_backend import integration_case
    from sweep.codegen import emit

    second, thetas, carries = integration_case(args.axle, 4, 10)
    theta0 = thetas[0]
    carry0 = jax.tree_util.tree_map(lambda a: np.asarray(a)[0], carries)

    origin = {}
    calls = {"jit", "pjit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call",
             "custom_vjp_call", "custom_vjp_call_jaxpr", "scan", "while", "cond"}
    plain = emit.Translator.eqn

    def eqn(self, e, ins):
        start = self.p.n_ids
        out = plain(self, e, ins)
        if e.primitive.name not in calls:
            where = _where(e)
            for i in range(start, self.p.n_ids):
                origin.setdefault(i, where)
        return out

    emit.Translator.eqn = eqn
    kept = []
    plain_prune = emit.Program.prune

    def prune(self, out_refs):
        plain_prune(self, out_refs)

        def walk(scope):
            for i, op, a in scope:
                if op == "loop":
                    walk(a.pre)
                    walk(a.body)
                elif i is not None and op not in ("in",):
                    kept.append(int(i))
        walk(self.scopes[0])

    emit.Program.prune = prune
    t = time.perf_counter()
    gen = emit.generate(second, theta0, carry0)
    print(f"{args.axle}: {gen.n_statements} statements, generated in {time.perf_counter() - t:.1f} s")
    by_line = collections.Counter(origin.get(i, "(generator)") for i in kept)
    by_file = collections.Counter(k.split(":")[0] for k in by_line.elements())
    by_caller = collections.Counter(k.split(" <- ")[-1] for k in by_line.elements())
    total = sum(by_line.values())
    print(f"\nstatements kept: {total}\n\nby file:")
    for k, n in by_file.most_common():
        print(f"  {n:8d}  {100 * n / total:5.1f} %  {k}")
    print(f"\ntop {args.top} calling lines (the small-product helpers counted at their caller):")
    for k, n in by_caller.most_common(args.top):
        print(f"  {n:8d}  {100 * n / total:5.1f} %  {k}")
    print(f"\ntop {args.top} lines:")
    for k, n in by_line.most_common(args.top):
        print(f"  {n:8d}  {100 * n / total:5.1f} %  {k}")


if __name__ == "__main__":
    main()
