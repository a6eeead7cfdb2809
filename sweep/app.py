"""The main job behind ``python -m sweep``: run the design into its cube, summarise, plot."""
from __future__ import annotations

import copy
import logging
import os

import xarray as xr
from omegaconf import DictConfig, OmegaConf, open_dict

from kernels.model import ModelError
from sweep import jobs
from sweep.jobs import run_job
from sweep.entry import ensure_console_logging
from sweep.job import JobError
from sweep.schema import ConfigError, check_config

log = logging.getLogger(__name__)


def job_config(cfg: DictConfig) -> DictConfig:
    """The config a job runs and records: ``output.path`` resolved and
    normalised (the default path holds the override dirname, empty in a plain
    run), the entry-point settings (``cache``) left out."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        cfg.output.path = os.path.normpath(str(cfg.output.path))
        cfg.pop("cache", None)
    return cfg


def main(cfg: DictConfig, progress=None) -> int:
    """Run the job of ``cfg``; 0, or 2 after a one-line error (bad config or
    model: nothing is built, compiled or written)."""
    ensure_console_logging()
    try:
        check_config(cfg)
        cfg = job_config(cfg)
        config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
        summary = run_job(cfg, config_yaml, progress=progress if progress is not None
                          else bool(cfg.sweep.get("progress", True)))
    except (ConfigError, ModelError, JobError) as err:
        log.error("error: " + " ".join(str(err).split()))
        return 2
    path = summary["path"]
    ds = xr.open_zarr(path)
    jobs.kind_of(cfg).report(ds, cfg, summary)   # summary, checks and pictures of the job kind
    return 0
