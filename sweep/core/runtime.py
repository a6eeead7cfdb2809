"""Process set-up shared by every entry point and the engine: the runtime layer.

What must happen before JAX starts (the CPU device count in ``XLA_FLAGS``,
single-threaded OpenBLAS), the console logging of the ``sweep`` logger, and
the JAX persistent compilation cache. Nothing here imports JAX at module
level, and nothing here imports another ``sweep`` module: the engine and
the entry points both build on it.

Devices: a job maps a chunk of variants over every JAX device, e.g. several
GPUs. On a CPU, XLA runs one computation on one core, so
:func:`xla_flags_from_env` exposes every usable core as a JAX CPU device, at
most :data:`MAX_DEFAULT_CPU_DEVICES` (``--xla_force_host_platform_device_count``;
it only concerns XLA's host platform, so GPU jobs are unaffected).
``AXLE_CPU_DEVICES=n`` chooses n; a count in ``XLA_FLAGS`` wins over both.

Logging: the apps log to the ``sweep`` logger. :class:`ConsoleHandler` writes
plain lines (INFO to stdout, warnings and errors to stderr); the Hydra job
log (``configs/hydra/job_logging/axle.yaml``) gets the same lines with time
stamps.
"""
from __future__ import annotations

import logging
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
CONFIG_DIR = os.path.join(ROOT, "configs")
CACHE_ENV = "AXLE_JAX_CACHE_DIR"
LOG = logging.getLogger("sweep")


DEVICES_ENV = "AXLE_CPU_DEVICES"
# set by xla_flags_from_env when it chose the device count itself (inherited
# by child processes, e.g. joblib workers, with the XLA_FLAGS it set)
DEFAULT_DEVICES_ENV = "AXLE_CPU_DEVICES_DEFAULT"
_COUNT_FLAG = "xla_force_host_platform_device_count"
# Most CPU devices a default job uses (one per usable core up to this). Two
# are measured on the 2-core development machine (BENCHMARKS.md, "Two CPU
# devices"); more than two are unmeasured.
MAX_DEFAULT_CPU_DEVICES = 2


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS tells,
    else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def default_cpu_devices() -> int:
    """The default number of JAX CPU devices: one per usable core, at most
    :data:`MAX_DEFAULT_CPU_DEVICES`."""
    return min(usable_cores(), MAX_DEFAULT_CPU_DEVICES)


def xla_flags_from_env():
    """Set the number of JAX CPU devices (``--xla_force_host_platform_device_count``
    in ``XLA_FLAGS``); call before JAX is imported.

    * ``XLA_FLAGS`` that already set the count: left alone (they win; a
      count that a parent process set by default does not count);
    * else ``AXLE_CPU_DEVICES=n``: n devices (``AXLE_CPU_DEVICES=1``: one);
    * else the default, :func:`default_cpu_devices` (one per usable core, at
      most :data:`MAX_DEFAULT_CPU_DEVICES`), recorded in
      ``AXLE_CPU_DEVICES_DEFAULT``: a job then splits a chunk over the devices
      only when it is large enough to profit (:func:`sweep.engine.mapping.chunking`).

    The flag only affects XLA's host (CPU) platform: on a GPU machine the
    jobs run on the GPUs as before.

    Also: single-threaded LAPACK (:func:`single_threaded_lapack`)."""
    single_threaded_lapack()
    flags = os.environ.get("XLA_FLAGS", "")
    if cpu_devices_are_default():      # inherited from a parent's default: decide afresh
        flags = " ".join(f for f in flags.split() if _COUNT_FLAG not in f)
    elif _count_in(flags) is not None:  # set by the user
        os.environ.pop(DEFAULT_DEVICES_ENV, None)
        return
    n = os.environ.get(DEVICES_ENV)
    if n:
        try:
            n = int(n)
        except ValueError:
            n = 0
        if n < 1:
            raise SystemExit(f"error: {DEVICES_ENV}={os.environ[DEVICES_ENV]!r} must be an integer >= 1")
        os.environ.pop(DEFAULT_DEVICES_ENV, None)
    else:
        n = default_cpu_devices()
        os.environ[DEFAULT_DEVICES_ENV] = str(n)
    os.environ["XLA_FLAGS"] = (flags + f" --{_COUNT_FLAG}={n}").strip()


BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def single_threaded_lapack():
    """``OPENBLAS_NUM_THREADS=1`` unless the user set it; call before JAX
    (and SciPy) are imported.

    XLA's CPU eigen solver and dense LU (``jnp.linalg.eig`` / ``solve``: the
    modes job, the Newton iterations of every static equilibrium) call
    LAPACK through SciPy's OpenBLAS, which by default starts a thread per
    core for each call. On matrices of a few hundred rows those threads
    cost more than they give and fight with XLA's own threads and the other
    CPU devices for the cores (BENCHMARKS.md, "Modes job")."""
    os.environ.setdefault(BLAS_THREADS_ENV, "1")


def _count_in(flags):
    """The device count that ``XLA_FLAGS`` text sets (the last one), or None."""
    counts = [f.split("=", 1)[1] for f in flags.split() if f.lstrip("-").startswith(_COUNT_FLAG + "=")]
    return counts[-1] if counts else None


def cpu_devices_are_default() -> bool:
    """Whether the CPU device count is the default of :func:`xla_flags_from_env`
    (not chosen with ``AXLE_CPU_DEVICES`` or ``XLA_FLAGS``)."""
    n = os.environ.get(DEFAULT_DEVICES_ENV)
    return bool(n) and _count_in(os.environ.get("XLA_FLAGS", "")) == n


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
    return _cache_location(c.get("dir")) if c.get("enabled", True) else None


def _cache_location(setting):
    """``setting`` (a ``cache.dir``), else ``$AXLE_JAX_CACHE_DIR``, else the default, absolute."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.abspath(os.path.expanduser(
        setting or os.environ.get(CACHE_ENV) or os.path.join(base, "axle-sweep", "jax")))


# the ``cache.dir`` this process was set up with (:func:`setup`), the switch
# aside: where the generated C's libraries live (``generated/`` beside it,
# sweep.codegen.build.cache_dir) and what a background build of this
# process is told (sweep.prebuild)
_CONFIGURED = {"dir": None}


def configured_cache_dir():
    """The cache directory of :func:`setup`'s config whether or not
    ``cache.enabled`` switched the cache on: its ``cache.dir``, else
    ``$AXLE_JAX_CACHE_DIR``, else the default (both read now)."""
    return _cache_location(_CONFIGURED["dir"])


def cache_in_use():
    """Whether this process keeps compiled programs on disk (:func:`setup`
    switched JAX's persistent compilation cache on; ``cache.enabled=false``
    leaves it off)."""
    import jax
    return bool(jax.config.jax_compilation_cache_dir)


def setup(cfg=None):
    """Once per process, before anything compiles: float64 (``kernels``), the
    persistent compilation cache, console logging, quiet JAX platform notes."""
    import jax

    import kernels  # noqa: F401  (float64)
    logging.getLogger("jax._src.xla_bridge").setLevel(logging.WARNING)
    ensure_console_logging()
    c = (cfg.get("cache") if cfg is not None else None) or {}
    _CONFIGURED["dir"] = c.get("dir") or None
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


def searchpath_dirs(argv):
    """The directories of the ``file://`` entries of a command-line
    ``hydra.searchpath=[...]`` (in list order, relative ones to the working
    directory, as Hydra resolves them); ``pkg://`` entries are left out."""
    dirs = []
    for a in argv:
        key, sep, value = a.partition("=")
        if sep and key.lstrip("+") == "hydra.searchpath":
            for entry in value.strip().strip("[]").split(","):
                entry = entry.strip().strip("'\"")
                if entry.startswith("file://"):
                    dirs.append(os.path.abspath(entry[len("file://"):]))
    return dirs
