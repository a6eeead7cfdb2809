"""``python -m sweep`` (console script ``axle-sweep``): the Hydra app (config in ../configs).

Entry-point set-up (compilation cache, logging, exit codes in single runs and
multiruns) is shared with ``python -m sweep.tune`` and ``python -m sweep.kc``:
:mod:`sweep.entry`.

Devices: a chunk of variants is split across every JAX device
(``sweep.engine.map_variants``), e.g. several GPUs. On a CPU, XLA runs one
computation on one core, so the entry points expose every usable core as a
JAX CPU device, at most ``sweep.entry.MAX_DEFAULT_CPU_DEVICES`` = 2 (the
default; ``--xla_force_host_platform_device_count``, set by
``sweep.entry.xla_flags_from_env`` before JAX starts; it only concerns XLA's
host platform, so GPU jobs are unaffected). ``AXLE_CPU_DEVICES=n`` chooses n
(``AXLE_CPU_DEVICES=1``: one device, the default until 2026-11-25); a count in
``XLA_FLAGS`` wins over both. A time-response job then solves the chunk's
static equilibria on one device and shards only the integration
(``sweep.engine.StagedRunner``: the Newton loop inside a multi-device
computation stalled XLA's CPU client). By default a chunk is split only from
``sweep.engine.MIN_VARIANTS_PER_CPU_DEVICE`` variants per device: smaller
jobs (the single-variant default) run on one device as before, bitwise the
same. A split chunk equals the one-device results to round-off (~1e-11
relative; the equilibrium is compiled separately), not bitwise; measured
1.5x on the 2-core development machine (BENCHMARKS.md, "Two CPU devices").
K&C, modes and Radau jobs use one device. The job's log says how many
devices it uses and why ("compiling ... on 2 CPU devices (default;
AXLE_CPU_DEVICES=1 for one)").
"""
from sweep.entry import sweep_cli

if __name__ == "__main__":
    sweep_cli()
