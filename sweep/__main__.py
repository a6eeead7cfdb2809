"""``python -m sweep``: the Hydra app (config in ../configs).

Devices: a chunk of variants is split across every JAX device
(``sweep.engine.map_variants``), e.g. several GPUs. On a CPU, XLA can expose
every core as a device (``AXLE_CPU_DEVICES=n`` sets
``--xla_force_host_platform_device_count=n``), but this is opt-in: on the
2-core development machine a 2-device job with chunks of 128 variants and
more never finished (the XLA CPU client's concurrent executions stalled,
with or without cross-device communication), while small chunks work and
are tested. One device is the default.
"""
import logging
import os
import sys

if os.environ.get("AXLE_CPU_DEVICES") and \
        "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count="
                               f"{int(os.environ['AXLE_CPU_DEVICES'])}").strip()

import hydra
from omegaconf import DictConfig

import kernels  # noqa: F401  (float64)
from sweep.app import main

logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)


@hydra.main(version_base="1.3", config_path="../configs", config_name="config")
def _entry(cfg: DictConfig) -> None:
    code = main(cfg)
    if code:
        sys.exit(code)


if __name__ == "__main__":
    _entry()
