"""Jobs from Python, for interactive work (a notebook, an IPython shell):
change a load, a rate, a mass or a hardpoint and look again without paying
for start-up, program load or compile each time.

    from sweep.workbench import Workbench
    s = Workbench()
    ds = s.run("loadcase.wheel_loads.left.fz=4600")     # compiles (or loads) once
    ds = s.run("loadcase.wheel_loads.left.fz=4700")     # the same structure: runs at once
    ds = s.run("model=my_axle.yaml", "loadcase=kc_wheel_travel")

:meth:`Workbench.run` takes the arguments of a ``python -m sweep`` command
line (``key=value`` overrides, ``model=PATH.yaml``, group choices) and runs
that job exactly as the command line does - same checks, same cube, same
log lines, pictures and exit rules - then returns the result cube
(:class:`xarray.Dataset`, opened lazily). What it adds: the compiled programs
of its jobs stay in memory (:class:`sweep.engine.stream.Programs`), so a job
whose structure an earlier job of the workbench had (the same model topology,
load-case kind, method, chunk shape; any values) reuses that program. A bad
configuration or model raises :class:`kernels.model.ModelError` with the
one-line message the command line prints; a job whose every variant failed
raises :class:`JobFailed` (its cube is written, with the status of each
variant). An interrupt (Ctrl-C, a notebook's stop button) stops the job as
on the command line - the finished chunks stay in the cube, the line says
so - but raises KeyboardInterrupt instead of ending the process; the same
``run`` resumes. Multiruns (``-m``) and Hydra launchers stay with the
command line.
"""
from __future__ import annotations

import os
import sys

from sweep.core.runtime import CONFIG_DIR, setup, xla_flags_from_env


def _backends_started():
    xb = sys.modules.get("jax._src.xla_bridge")
    return bool(xb is not None and getattr(xb, "_backends", None))


if not _backends_started():   # the command line's CPU devices, before JAX starts its backends
    xla_flags_from_env()

from kernels.model import ModelError  # noqa: E402  (after the device count is set)


class JobFailed(RuntimeError):
    """Every variant of the job failed: no usable result (its cube holds the
    status of each variant; ``path`` names it)."""

    def __init__(self, message, path):
        super().__init__(message)
        self.path = path


class Workbench:
    """Jobs in this process with their compiled programs kept (module doc).

    ``keep``: how many compiled programs to keep (the least recently used is
    dropped first; each holds its executable and, on the generated backend,
    its work arrays); ``progress``: the progress line of the command line
    (off by default: a notebook cell shows the log lines)."""

    def __init__(self, keep=4, progress=False):
        from sweep.engine.stream import Programs
        self.programs = Programs(keep)
        self.progress = bool(progress)
        self._set_up = False

    def config(self, *args):
        """The job config of the command line ``python -m sweep *args``, as
        the command line composes it (the default ``output.path`` resolved,
        with its override dirname)."""
        from hydra import compose, initialize_config_dir
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import open_dict

        from sweep.entry import check_config_files, model_file_args
        args = [str(a) for a in args]
        for a in args:
            if a.startswith("-"):
                raise ModelError(f"{a!r}: a workbench runs one job; multiruns and other command-line "
                                 "options belong to `python -m sweep`")
        args = model_file_args(args)
        check_config_files(args, "config")
        with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
            try:
                cfg = compose(config_name="config", overrides=args, return_hydra_config=True)
            except Exception as err:  # noqa: BLE001 - Hydra's errors: an unknown key or option
                raise ModelError(f"{' '.join(args)}: {err}") from None
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            cfg.output.path = str(cfg.output.path)
            del cfg["hydra"]
        return cfg

    def run(self, *args):
        """Run the job of the command line ``python -m sweep *args`` in this
        process and return its result cube (opened lazily with xarray)."""
        import xarray as xr

        from sweep.app import main
        cfg = self.config(*args)
        if not self._set_up:
            setup(cfg)
            self._set_up = True
        code = main(cfg, progress=self.progress, programs=self.programs, interactive=True)
        path = os.path.abspath(str(cfg.output.path))
        if code:
            raise JobFailed(f"every variant of the job failed: no usable result in {path} "
                            "(its status says why per variant)", path)
        return xr.open_zarr(path, chunks=None)

    def forget(self):
        """Drop the compiled programs kept so far (their memory is freed)."""
        self.programs.clear()
