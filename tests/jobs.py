"""Helpers of the tests that compose or run jobs: a command line's job
config as ``python -m sweep`` composes it, and the CLI as a subprocess."""
import os
import subprocess
import sys

from hydra import compose, initialize_config_dir
from omegaconf import open_dict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cli(*args):
    return subprocess.run([sys.executable, "-m", "sweep", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def cfg_of(*overrides):
    """The job config of a command line, as ``python -m sweep`` composes it
    (the default ``output.path`` resolved with its override dirname)."""
    from hydra.core.hydra_config import HydraConfig
    with initialize_config_dir(config_dir=os.path.join(ROOT, "configs"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        cfg.output.path = str(cfg.output.path)
        del cfg["hydra"]
    return cfg
