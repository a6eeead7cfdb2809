"""The generated code of a short job, built in the background for the next run.

``integrator.backend=auto`` runs a short job (one variant of a load case,
a few variants) on XLA: a first build of the generated C would cost more
than the job (tens of seconds of gcc). The generated C reads the model's
and the load case's values at run time, so once built it serves every
later run of the same structure - a changed wheel load, rate, mass or
hardpoint - and runs such a job several times faster than XLA, start-up
included. So after a short job on XLA, :func:`spawn` starts one detached
process at low priority (``python -m sweep.prebuild``) that plans the same
job on the generated backend and builds its code into the cache; the next
run of the structure finds it (:func:`sweep.codegen.runner.choose`: "runs
on the generated code that an earlier run built"). The job's own results
never depend on it: the build runs after the job has written them.

At most one build per job structure runs at a time (a lock file beside the
cache record holds the builder's host and process id; a lock whose process
is gone, or older than half an hour, is taken over). A structure whose
whole variant the generator cannot translate, or whose planning or
generation fails, is recorded (``<record>.failed``, with the reason) and
not tried again by later jobs. A build killed half-way leaves what any
killed build leaves (:mod:`sweep.codegen.build` cleans it on the next
build).
``AXLE_AUTO_BACKEND=xla`` (auto means XLA) or ``integrator.backend=xla``
run no such build; neither does a job with the cache switched off
(``cache.enabled=false``: :func:`sweep.core.runtime.cache_in_use`). A build
the machine stopped (a compiler that failed, a full disk) is tried again
by a later job; the file ``<record>.failed`` beside the cache record says
why a structure is not tried again (removing it retries).
"""
from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import tempfile
import time

log = logging.getLogger("sweep")

LOG_NAME = "prebuild.log"       # beside the generated code's cache entries


STALE_LOCK_S = 1800             # a lock older than this is stale whatever its id says (a build takes minutes)
LOG_MAX_BYTES = 1 << 20         # prebuild.log is started afresh (the old one kept as .old) beyond this


def _alive(lock):
    """Whether the build that holds the lock file (``host pid``) still runs:
    on this host its process exists; on another host (a shared cache) the
    lock is believed; either way not once the lock is older than
    :data:`STALE_LOCK_S` (a process id reused after a reboot)."""
    try:
        with open(lock) as f:
            host, _, pid = f.read().strip().rpartition(" ")
        age = time.time() - os.path.getmtime(lock)
        pid = int(pid)
    except (OSError, ValueError):
        return False
    if pid <= 0 or age > STALE_LOCK_S:
        return False
    if host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:        # another user's process: alive
        return True
    return True


def spawn(config_yaml, record):
    """Start the background build of a job's generated code (``config_yaml``:
    the job's resolved configuration; ``record``: the cache record the
    build will write, :func:`sweep.codegen.build.record_built`), unless a
    build of it runs already or an earlier one could not make it. Logs one
    line; returns the process, or None. Never raises: the job's results are
    written, and a build that cannot start only costs the next run its
    speed (a warning says why)."""
    try:
        return _spawn(config_yaml, record)
    except Exception as err:  # noqa: BLE001 - never fail a finished job for the background build
        log.warning(f"warning: the background build of the generated C could not start ({type(err).__name__}: "
                    f"{err}); the next run of this job runs on XLA again")
        return None


def _spawn(config_yaml, record):
    folder = os.path.dirname(record)
    if os.path.exists(record + ".failed"):      # an earlier build could not make this structure's code
        return None
    if _alive(record + ".building"):
        log.info("integrator.backend=auto: the generated C of this structure is being built in the background "
                 "(an earlier run started it); a run after that build uses it")
        return None
    fd, path = tempfile.mkstemp(prefix="prebuild-", suffix=".yaml", dir=folder)
    with os.fdopen(fd, "w") as f:
        f.write(config_yaml)
    logfile = os.path.join(folder, LOG_NAME)
    try:
        if os.path.getsize(logfile) > LOG_MAX_BYTES:
            os.replace(logfile, logfile + ".old")
    except OSError:
        pass
    # the job's environment: the generated code's cache is where the job looks for it
    # (and the job's cache directory: its config holds no cache section)
    from sweep.core.runtime import CACHE_ENV, configured_cache_dir
    env = dict(os.environ, **{CACHE_ENV: configured_cache_dir()})
    with open(logfile, "a") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sweep.prebuild", path, record], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd(),
                                env=env)
    log.info(f"integrator.backend=auto: building the generated C of this structure in the background, at low "
             f"priority (log: {logfile}); the next run of it - with changed loads, rates, masses or hardpoints "
             "too - runs on that code")
    return proc


def _claim(lock):
    """Create the lock with this host and process id, atomically (a linked
    complete file: never seen empty); False when a live builder holds it."""
    tmp = f"{lock}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(f"{socket.gethostname()} {os.getpid()}")
    try:
        for _ in range(2):
            try:
                os.link(tmp, lock)
                return True
            except FileExistsError:
                if _alive(lock):
                    return False
                try:
                    os.remove(lock)    # its builder is gone
                except FileNotFoundError:
                    pass
        return False
    finally:
        os.remove(tmp)


def _failed(record, why):
    """Record that the background build of a structure failed (``<record>.failed``,
    the reason inside): :func:`spawn` starts none for it again."""
    with open(record + ".failed", "w") as f:
        f.write(why + "\n")
    log.info(f"prebuild {record}: not built - {why}")


def build(cfg):
    """Plan the job of ``cfg`` (a resolved job configuration) on the generated
    backend and build its code into the cache; returns the runner's info."""
    from sweep.kinds import kind_of
    cfg.integrator.backend = "generated"
    kind = kind_of(cfg)
    plan = kind.plan(cfg)
    runner = kind.runner(plan)
    example = runner.example
    example = tuple(example) if isinstance(example, tuple) else example
    runner.fn.lower(example, key=runner.key).compile()
    return getattr(runner.fn, "info", {})


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        raise SystemExit("usage: python -m sweep.prebuild CONFIG.yaml RECORD (started by a job, not by hand)")
    cfg_path, record = argv
    lock = record + ".building"
    try:
        if not _claim(lock):
            return 0
        try:
            os.nice(10)
        except OSError:
            pass
        from sweep.core.runtime import setup, xla_flags_from_env
        xla_flags_from_env()
        from omegaconf import OmegaConf
        cfg = OmegaConf.load(cfg_path)
        os.remove(cfg_path)             # read: a build killed from here on leaves no config behind
        setup(cfg)
        try:
            info = build(cfg)
        except (OSError, MemoryError):   # the machine's state (disk, memory): a later job tries again
            raise
        except Exception as err:    # noqa: BLE001 - recorded, so that later jobs do not try again
            _failed(record, f"{type(err).__name__}: {err}")
            raise
        from sweep.codegen.build import record_built
        if info.get("backend") != "generated":
            # the C could not be built (the compiler failed: perhaps the machine's
            # state, a full disk, memory): not recorded, a later job tries again
            log.info(f"prebuild {record}: not built - {info.get('why')}")
            return 1
        if not record_built(record):
            # the whole variant could not be generated (its equilibria stay on XLA):
            # a short job keeps running on XLA, and no later job retries
            _failed(record, "the generator cannot translate the whole variant (its equilibria run on XLA)")
            return 0
        log.info(f"prebuild {record}: {info.get('backend')} ({info.get('statements')} statements, "
                 f"built in {info.get('build_s', 0.0):.1f} s)")
        return 0
    finally:
        for p in (cfg_path,):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
        try:
            with open(lock) as f:
                mine = f.read().strip() == f"{socket.gethostname()} {os.getpid()}"
            if mine:
                os.remove(lock)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
