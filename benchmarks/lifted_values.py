"""What values read at run time cost the XLA chunk runner, and where the cost
comes from.

The time-response chunk runner of the double wishbone (lhs variants of the
shipped sweep, the longitudinal step from 4.95 to 5.05 s: 100 LSRT2 steps of
1 ms, static equilibrium included, XLA, one CPU device) compiled three ways:

- *folded*: the model's and the load case's values compiled in as constants
  (``make_chunk_runner(..., lifted=False)``; not what a job runs);
- *lifted*: the values as run-time inputs, the tail of every variant's row,
  batched with the parameters (what a hardpoint design runs: each variant
  its own values);
- *lifted, shared*: the values as run-time inputs, unbatched - passed once
  per chunk beside the parameter rows (``shared`` of
  ``sweep.engine.mapping.map_variants``: what every other job runs; a
  changed value reuses the program).

Prints compile time and the min and median of ``--rounds`` interleaved runs
of each. Usage:
``python benchmarks/lifted_values.py [--variants 64]`` (~2.5 min on two
cores, mostly the three compilations).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("AXLE_CPU_DEVICES", "1")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variants", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    from sweep.core.runtime import xla_flags_from_env
    xla_flags_from_env()
    import jax
    import numpy as np

    import kernels  # noqa: F401  (float64)
    from single_variant import machine
    from sweep.engine.values import Lifted
    from sweep.kinds import time_response as tr
    from tests.jobs import cfg_of

    cfg = cfg_of("sweep=lhs", f"sweep.n_variants={args.variants}", "sweep.start=4.95", "loadcase.t_end=5.05",
                 "integrator.backend=xla")
    plan = tr.KIND.plan(cfg)
    c = plan.case
    X = np.asarray(plan.X)
    lift = Lifted(tr.run_inputs(plan.model, c.exc))
    rows = np.concatenate([X, np.tile(lift.vector, (len(X), 1))], axis=1)

    print(f"{machine()}; double wishbone, {args.variants} variants x 100 steps, XLA, one CPU device")
    runners = {}
    for label, fn, arg in (("folded", tr.make_chunk_runner(plan.model, plan.pset, c, lifted=False), X),
                           ("lifted", tr.make_chunk_runner(plan.model, plan.pset, c, lifted=True), rows),
                           ("lifted, shared", tr.make_chunk_runner(plan.model, plan.pset, c, lifted=True,
                                                                   shared=True), (X, lift.vector))):
        tic = time.perf_counter()
        comp = fn.lower(arg).compile()
        runners[label] = (comp, arg, time.perf_counter() - tic)
        jax.block_until_ready(comp(arg))
    runs = {label: [] for label in runners}
    for _ in range(args.rounds):                        # interleaved: a slow spell of the machine hits all three
        for label, (comp, arg, _) in runners.items():
            tic = time.perf_counter()
            jax.block_until_ready(comp(arg))
            runs[label].append(time.perf_counter() - tic)
    for label, (_, _, tc) in runners.items():
        best, med = min(runs[label]), float(np.median(runs[label]))
        print(f"  {label:15s} compile {tc:5.1f} s   run min {best:.3f} s / median {med:.3f} s over "
              f"{args.rounds}   ({args.variants * 100 / best:,.0f} variant-steps/s at the min)", flush=True)

if __name__ == "__main__":
    main()
