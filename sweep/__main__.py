"""``python -m sweep``: the Hydra app (config in ../configs).

On a CPU, XLA runs one computation on one core; the app therefore exposes
every core as a JAX CPU device (``--xla_force_host_platform_device_count``),
so that the engine shards each chunk of variants across the cores like
across GPUs. Harmless where an accelerator is the default device; set
``XLA_FLAGS`` yourself (or ``AXLE_CPU_DEVICES=1``) to choose otherwise.
"""
import logging
import os
import sys

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    _n = os.environ.get("AXLE_CPU_DEVICES") or str(os.cpu_count() or 1)
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={int(_n)}").strip()

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
