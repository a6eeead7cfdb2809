"""``python -m sweep`` (console script ``axle-sweep``): the Hydra app (config in ../configs).

Entry-point set-up (compilation cache, logging, exit codes in single runs and
multiruns) is shared with ``python -m sweep.tune`` and ``python -m sweep.kc``:
:mod:`sweep.entry`.

Devices: a chunk of variants is split across every JAX device
(``sweep.engine.map_variants``), e.g. several GPUs. On a CPU, XLA can expose
every core as a device (``AXLE_CPU_DEVICES=n`` sets
``--xla_force_host_platform_device_count=n``); a time-response job then
solves the chunk's static equilibria on one device and shards only the
integration (``sweep.engine.StagedRunner``: the Newton loop inside a
multi-device computation stalled XLA's CPU client). Measured 1.5x on the
2-core development machine (BENCHMARKS.md, "Two CPU devices"); opt-in, one
device is the default; K&C and modes jobs use one device.
"""
from sweep.entry import sweep_cli

if __name__ == "__main__":
    sweep_cli()
