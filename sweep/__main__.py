"""``python -m sweep`` (console script ``axle-sweep``): the Hydra app (config in ../configs).

Entry-point set-up (compilation cache, logging, exit codes in single runs and
multiruns) is shared with ``python -m sweep.tune`` and ``python -m sweep.kc``:
:mod:`sweep.entry`.

Devices: a chunk of variants is split across every JAX device
(``sweep.engine.map_variants``), e.g. several GPUs. On a CPU, XLA can expose
every core as a device (``AXLE_CPU_DEVICES=n`` sets
``--xla_force_host_platform_device_count=n``), but this is opt-in: on the
2-core development machine a 2-device job with chunks of 128 variants and
more never finished (the XLA CPU client's concurrent executions stalled,
with or without cross-device communication), while small chunks work and
are tested. One device is the default.
"""
from sweep.entry import sweep_cli

if __name__ == "__main__":
    sweep_cli()
