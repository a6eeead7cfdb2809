"""Shared set-up of the command-line entry points: ``python -m sweep`` (and
its console script ``axle-sweep``), ``python -m sweep.tune`` and
``python -m sweep.kc``.

:func:`hydra_app` wraps an app's ``main(cfg) -> exit code`` into a Hydra
entry point that

* runs :func:`setup` before anything is built: float64, the JAX persistent
  compilation cache (:func:`cache_dir`), console logging;
* exits with the app's code in a single run, but *returns* it inside a
  ``--multirun`` so that one failing job does not abort its siblings (the
  multirun exits non-zero at the end when a job failed).

Logging: the apps log to the ``sweep`` logger. :class:`ConsoleHandler` writes
plain lines (INFO to stdout, warnings and errors to stderr), the Hydra job
log (``configs/hydra/job_logging/axle.yaml``) gets the same lines with time
stamps. Nothing here imports JAX at module level: ``AXLE_CPU_DEVICES`` must
reach ``XLA_FLAGS`` before JAX is imported (:func:`xla_flags_from_env`).
"""
from __future__ import annotations

import logging
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(ROOT, "configs")
CACHE_ENV = "AXLE_JAX_CACHE_DIR"
LOG = logging.getLogger("sweep")
_FAILED: list = []


def xla_flags_from_env():
    """``AXLE_CPU_DEVICES=n`` -> ``--xla_force_host_platform_device_count=n``
    (opt-in, see ``sweep/__main__.py``); call before JAX is imported."""
    n = os.environ.get("AXLE_CPU_DEVICES")
    if n and "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={int(n)}").strip()


class ConsoleHandler(logging.Handler):
    """Plain lines: INFO to stdout, WARNING and above to stderr. The stream is
    looked up at every message, so redirected or captured streams work."""

    def __init__(self, level=logging.NOTSET):
        super().__init__(level)
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record):
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 - logging must never raise
            self.handleError(record)


def ensure_console_logging():
    """Outside Hydra (an app's ``main`` called from Python, a test): make the
    ``sweep`` logger print its INFO lines like the command line does, unless
    a :class:`ConsoleHandler` is configured already (Hydra's job logging)."""
    root = logging.getLogger()
    if not any(isinstance(h, ConsoleHandler) for h in LOG.handlers + root.handlers):
        LOG.addHandler(ConsoleHandler())
    if LOG.getEffectiveLevel() > logging.INFO:
        LOG.setLevel(logging.INFO)


def cache_dir(cfg=None):
    """Directory of the JAX persistent compilation cache, or None when off.

    ``cache.enabled=false`` switches it off; the directory is ``cache.dir``,
    else ``$AXLE_JAX_CACHE_DIR``, else ``$XDG_CACHE_HOME/axle-sweep/jax``
    (``~/.cache/axle-sweep/jax``)."""
    c = (cfg.get("cache") if cfg is not None else None) or {}
    if not c.get("enabled", True):
        return None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.expanduser(
        c.get("dir") or os.environ.get(CACHE_ENV) or os.path.join(base, "axle-sweep", "jax")))


def setup(cfg=None):
    """Once per process, before anything compiles: float64 (``kernels``), the
    persistent compilation cache, console logging, quiet JAX platform notes."""
    import jax

    import kernels  # noqa: F401  (float64)
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    ensure_console_logging()
    path = cache_dir(cfg)
    if path:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError as err:
            LOG.warning(f"warning: compilation cache off, cannot create {path} ({err.strerror})")
            return
        jax.config.update("jax_compilation_cache_dir", path)
        # cache every compilation that took a second or more (the default)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001
        return False


def hydra_app(main, config_name="config"):
    """A Hydra entry point (a function of no arguments) for ``main(cfg) -> code``."""
    xla_flags_from_env()
    import hydra

    @hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name=config_name)
    def task(cfg):
        setup(cfg)
        code = main(cfg)
        if code:
            if not in_multirun():
                sys.exit(code)
            _FAILED.append(code)        # the other jobs of the multirun go on
        return code

    def run():
        task()
        if _FAILED:
            LOG.error(f"error: {len(_FAILED)} job(s) of the multirun failed (see above)")
            sys.exit(max(_FAILED))
    return run


def sweep_cli():
    """``python -m sweep`` / ``axle-sweep``."""
    xla_flags_from_env()
    from sweep.app import main
    hydra_app(main, "config")()


def tune_cli():
    """``python -m sweep.tune``."""
    xla_flags_from_env()
    from sweep.tune import main
    hydra_app(lambda cfg: main(cfg, progress=bool(cfg.get("progress", True))), "tune")()
