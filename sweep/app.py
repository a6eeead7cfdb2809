"""The main job behind ``python -m sweep``: check the config, run the job of
its kind through the one pipeline, report."""
from __future__ import annotations

import copy
import logging
import os

from omegaconf import DictConfig, OmegaConf, open_dict

from kernels.model import ModelError
from sweep import engine
from sweep.kinds import kind_of
from sweep.core.runtime import ensure_console_logging
from sweep.core.config import check_config

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


def _preload(names):
    import importlib
    try:
        for name in names:
            importlib.import_module(name)
        from xarray.namedarray.pycompat import array_type
        array_type("dask")          # xarray imports dask on its first duck-array check
    except Exception:  # noqa: BLE001 - the report imports them itself
        pass


def _preload_report_modules():
    """Import what the report needs (xarray and the dask it checks for,
    matplotlib's figure and Agg canvas: about 1 s) in a thread while the job
    compiles and runs, which is native code that leaves the interpreter
    free: a rerun's report then starts at once."""
    import threading
    threading.Thread(target=_preload, args=(("xarray", "matplotlib.figure", "matplotlib.backends.backend_agg"),),
                     name="preload-report", daemon=True).start()


def main(cfg: DictConfig, progress=None, programs=None, interactive=False) -> int:
    """Run the job of ``cfg``; 0, 2 after a one-line error (bad config or
    model: nothing is built, compiled or written), or 1 when every variant
    the cube holds failed (no status whose values are kept, sweep.results.status:
    the cube is written with their status, no picture is drawn).
    ``programs``: compiled runners kept between the jobs of a workbench
    (:class:`sweep.engine.stream.Programs`); ``interactive`` (a workbench):
    a bad config or model raises its :class:`kernels.model.ModelError`
    instead of being logged as code 2, and a stop (SIGINT / SIGTERM) raises
    KeyboardInterrupt instead of ending the process."""
    ensure_console_logging()
    try:
        kind = kind_of(cfg)
        check_config(cfg, kind)
        cfg = kind.prepare(job_config(cfg))
        config_yaml = OmegaConf.to_yaml(cfg, resolve=True)
        summary = engine.run(kind, cfg, config_yaml, progress=progress if progress is not None
                             else bool(cfg.sweep.get("progress", True)), programs=programs,
                             before_compile=_preload_report_modules, interactive=interactive)
    except ModelError as err:        # ConfigError and StoreError are ModelErrors
        if interactive:
            raise
        log.error("error: " + " ".join(str(err).split()))
        return 2
    import numpy as np
    import xarray as xr             # here, not at the top: 0.3-0.5 s of start-up before the first step
    from sweep.results import status
    # chunks=None: lazily indexed numpy, without dask (0.45 s of start-up that a report does not need)
    ds = xr.open_zarr(summary["path"], chunks=None)
    codes = ds.status.values
    all_failed = bool(np.any(codes != status.NOT_RUN)) and not np.isin(codes, status.VALUES_KEPT).any()
    summary = {**summary, "all_failed": all_failed}
    kind.report(ds, cfg, summary)   # summary, checks and pictures of the job kind
    if np.any(codes == status.EQUILIBRIUM_FAILED):
        kind.diagnose(ds, cfg, log)  # why, where the model can tell
    if np.any(codes == status.IMPLAUSIBLE):
        from sweep.kinds.base import explain_implausible
        explain_implausible(kind, ds, cfg, log)
    if summary.get("prebuild") and not all_failed:
        from sweep import prebuild
        prebuild.spawn(config_yaml, summary["prebuild"])
    if all_failed:
        log.error(f"error: every variant failed ({status.counts(codes, kind.status or None)}): "
                  f"no usable result in {os.path.abspath(summary['path'])} (its status says why per variant)")
        return 1
    return 0
