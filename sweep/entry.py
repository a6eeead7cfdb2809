"""The command-line entry points: ``python -m sweep`` (console script
``axle-sweep``) and ``python -m sweep.tune`` - the top layer.

:func:`hydra_app` wraps an app's ``main(cfg) -> exit code`` into a Hydra
entry point that

* sets the process up before anything is built (:mod:`sweep.core.runtime`: CPU
  devices and LAPACK threads before JAX starts, float64, the compilation
  cache, console logging);
* exits with the app's code in a single run, but *returns* it inside a
  ``--multirun`` so that one failing job does not abort its siblings; the
  job leaves a marker file ``FAILED_MARKER`` (its exit code) in its Hydra
  output directory, and :class:`MultirunFailures` (a Hydra callback run in
  the launching process, configured as ``hydra.callbacks.axle_failures``)
  collects them at the end, so the multirun exits non-zero when a job failed
  with any launcher, the joblib launcher's worker processes included.
"""
from __future__ import annotations

import os
import sys

from sweep.core.runtime import CONFIG_DIR, LOG, searchpath_dirs, setup, xla_flags_from_env

_FAILED: list = []
FAILED_MARKER = ".axle-job-failed"



def in_multirun() -> bool:
    try:
        from hydra.core.hydra_config import HydraConfig
        from hydra.types import RunMode
        return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN
    except Exception:  # noqa: BLE001
        return False


def _mark_failed(code):
    """In a multirun job: leave ``FAILED_MARKER`` (holding the exit code) in
    the job's Hydra output directory for :class:`MultirunFailures`."""
    try:
        from hydra.core.hydra_config import HydraConfig
        out = HydraConfig.get().runtime.output_dir
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, FAILED_MARKER), "w") as f:
            f.write(str(int(code)))
    except Exception as err:  # noqa: BLE001 - the in-process record below still holds
        LOG.warning(f"warning: could not record the failed job ({err})")


def _clear_failed_marker():
    try:
        from hydra.core.hydra_config import HydraConfig
        os.remove(os.path.join(HydraConfig.get().runtime.output_dir, FAILED_MARKER))
    except Exception:  # noqa: BLE001 - no marker (the usual case)
        pass


def failed_jobs(sweep_dir):
    """Exit codes of the failed jobs of a multirun under ``sweep_dir``."""
    codes = []
    for root, _dirs, files in os.walk(sweep_dir):
        if FAILED_MARKER in files:
            try:
                with open(os.path.join(root, FAILED_MARKER)) as f:
                    codes.append(int(f.read().strip() or 1))
            except (OSError, ValueError):
                codes.append(1)
    return codes


try:
    from hydra.experimental.callback import Callback as _Callback
except Exception:  # noqa: BLE001
    _Callback = object


class MultirunFailures(_Callback):
    """Hydra callback (``hydra.callbacks.axle_failures``): at the end of a
    multirun, in the launching process, collect the failed jobs' markers."""

    def on_multirun_end(self, config, **kwargs):
        codes = failed_jobs(str(config.hydra.sweep.dir))
        if codes:        # else keep the in-process record (a marker that could not be written)
            _FAILED[:] = codes


def hydra_app(main, config_name="config"):
    """A Hydra entry point (a function of no arguments) for ``main(cfg) -> code``."""
    xla_flags_from_env()
    import hydra

    entered = []

    @hydra.main(version_base="1.3", config_path=CONFIG_DIR, config_name=config_name)
    def task(cfg):
        entered.append(True)
        setup(cfg)
        if in_multirun():               # a rerun into the same sweep dir starts clean
            _clear_failed_marker()
        code = main(cfg)
        if code:
            if not in_multirun():
                sys.exit(code)
            _FAILED.append(code)        # the other jobs of the multirun go on
            _mark_failed(code)          # seen by MultirunFailures in the parent
        return code

    def run():
        sys.argv[1:] = model_file_args(sys.argv[1:])
        precheck_config_files(sys.argv[1:], config_name)
        entered.append(False)
        try:
            with _mode_from_command_line(sys.argv[1:]):
                task()
        except SystemExit as stop:
            # Hydra's own configuration errors (an unknown key or group option
            # on the command line, a config file it cannot load) exit 1
            # before the app starts: the project's code for a bad
            # configuration is 2, whoever finds it
            if stop.code == 1 and not any(entered):
                sys.exit(2)
            raise
        if _FAILED:
            LOG.error(f"error: {len(_FAILED)} job(s) of the multirun failed (see above)")
            sys.exit(max(_FAILED))
    return run


def _may_set_mode(argv):
    """Whether a command line may choose Hydra's run mode other than by
    ``-m`` / ``--multirun``: a ``hydra.mode`` override, a ``hydra/`` group
    choice (whose file could set it) or another primary config. The
    project's primary configs never set it (tests/sweep/test_workbench.py)."""
    for a in argv:
        key = a.partition("=")[0].lstrip("+~")
        if key.startswith(("hydra.mode", "hydra/")):
            return True
        if key in ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd"):
            return True                          # another primary config: it may set the mode
    return False


class _mode_from_command_line:
    """Hydra composes the whole configuration once only to read
    ``hydra.mode`` (``Hydra.get_mode``) and then again to run the job: 0.45 s
    of every start on a full axle. Where the command line cannot set the
    mode (:func:`_may_set_mode`) and the configs do not, that first
    composition can only answer "not set", so it is skipped: the mode is
    then RUN, or MULTIRUN with ``-m``, exactly as Hydra decides it."""

    def __init__(self, argv):
        self.skip = not _may_set_mode(argv)
        self.saved = None

    def __enter__(self):
        try:
            from hydra._internal.hydra import Hydra
        except ImportError:                      # another Hydra layout: compose twice
            return self
        if self.skip and hasattr(Hydra, "get_mode"):
            self.saved = Hydra.get_mode
            Hydra.get_mode = lambda hydra, config_name, overrides: None
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            from hydra._internal.hydra import Hydra
            Hydra.get_mode = self.saved
        return False


def model_file_args(argv):
    """``model=PATH.yaml`` (a model file anywhere) as the model group option
    Hydra understands: the file's folder is put on ``hydra.searchpath`` when
    it is a ``model/`` folder, else a private folder holding a link to the
    file is; ``model=NAME`` with ``hydra.searchpath`` works as it is. So
    ``python -m sweep`` and ``python -m sweep.align`` take a model the same
    two ways. Other arguments pass unchanged."""
    out, extra = [], []
    for a in argv:
        key, sep, value = a.partition("=")
        if sep and key == "model" and value.endswith((".yaml", ".yml")) and os.path.isfile(value):
            path = os.path.abspath(value)
            name = os.path.splitext(os.path.basename(path))[0]
            folder = os.path.dirname(path)
            shipped = os.path.isfile(os.path.join(CONFIG_DIR, "model", os.path.basename(path)))
            if os.path.basename(folder) == "model" and not shipped:
                root = os.path.dirname(folder)
            else:                       # a private root/model/<name>.yaml -> the file
                import atexit
                import shutil
                import tempfile
                root = tempfile.mkdtemp(prefix="axle-model-")
                atexit.register(shutil.rmtree, root, True)      # the link only: removed when the process ends
                os.makedirs(os.path.join(root, "model"))
                name = ("file_" + name) if shipped else name       # never shadowed by a shipped model
                os.symlink(path, os.path.join(root, "model", f"{name}.yaml"))
            out.append(f"model={name}")
            extra.append(f"file://{root}")
            at = len(out)               # the search path goes beside it (before any --option)
        else:
            out.append(a)
    if not extra:
        return list(argv)
    for i, a in enumerate(out):
        key, sep, value = a.partition("=")
        if sep and key.lstrip("+") == "hydra.searchpath":
            items = [e for e in value.strip().strip("[]").split(",") if e.strip()]
            out[i] = f"{key}=[{','.join(items + extra)}]"
            return out
    return out[:at] + [f"hydra.searchpath=[{','.join(extra)}]"] + out[at:]


def precheck_config_files(argv, config_name="config"):
    """:func:`check_config_files`, its error one line and exit code 2."""
    from kernels.model import ModelError
    try:
        check_config_files(argv, config_name)
    except ModelError as err:
        LOG.error("error: " + " ".join(str(err).split()))
        sys.exit(2)


def check_config_files(argv, config_name="config"):
    """The config files a command line chooses (the primary
    ``config_name``.yaml and every ``group=NAME`` whose file exists, e.g.
    ``model=``, ``loadcase=``) read strictly before Hydra composes them: a
    duplicate key or a YAML syntax error is one line with file:line:column
    and exit code 2, instead of Hydra's traceback (which also silently keeps
    the last of two equal keys). A chosen model file is checked for unknown
    keys, too. A group file is looked up where Hydra looks for it: the
    project's configs first, then the ``file://`` directories of
    ``hydra.searchpath`` in order (a user's own axle files); files of
    ``pkg://`` entries are left to Hydra (its message, exit code 2). Raises
    :class:`kernels.model.ModelError`."""
    from sweep.axle.builder import load_model_file, load_yaml_strict
    roots = [CONFIG_DIR] + searchpath_dirs(argv)
    files = [("", os.path.join(CONFIG_DIR, f"{config_name}.yaml"))]
    for a in argv:
        group, sep, names = a.partition("=")
        if not sep or group.startswith(("+", "~", "hydra")) or "." in group:
            continue
        for n in names.split(","):
            if group == "model" and n.endswith((".yaml", ".yml")) and not os.path.isfile(n):
                from kernels.model import ModelError
                raise ModelError(f"model={n}: no such model file (a path is read relative to "
                                 f"{os.getcwd()}; a shipped axle is named without .yaml)")
            found = [p for p in (os.path.join(r, group, f"{n}.yaml") for r in roots) if os.path.isfile(p)]
            if found:
                files.append((group, found[0]))
    for group, path in files:
        if os.path.isfile(path):
            (load_model_file if group == "model" else load_yaml_strict)(path)


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


def verify_cli():
    """``axle-verify`` (console script of ``python -m sweep.verify``): the
    same command line, except that ``--help`` / ``-h`` prints the usage and
    the description on stdout and exits 0, as the other console scripts do
    (``python -m sweep.verify --help`` keeps its usage exit code 2)."""
    from sweep import verify
    argv = sys.argv[1:]
    if any(a in ("-h", "--help") for a in argv):
        print("usage: axle-verify PATH.zarr [PATH.zarr ...]   (python -m sweep.verify)\n")
        print(verify.__doc__.strip())
        return 0
    return verify.main(argv)
