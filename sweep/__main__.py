"""``python -m sweep``: the Hydra app (config in ../configs)."""
import logging
import sys

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
