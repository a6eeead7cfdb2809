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
cache record holds the builder's process id; a lock whose process is gone
is taken over). A structure whose whole variant the generator cannot
translate, or whose build fails, is recorded (``<record>.failed``, with the
reason) and not tried again by later jobs. A build killed half-way leaves what any killed build
leaves (:mod:`sweep.codegen.build` cleans it on the next build).
``AXLE_AUTO_BACKEND=xla`` (auto means XLA) or ``integrator.backend=xla``
run no such build; neither does a job with the cache switched off.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile

log = logging.getLogger("sweep")

LOG_NAME = "prebuild.log"       # beside the generated code's cache entries


def _alive(lock):
    """Whether the process whose id the lock file holds still runs."""
    try:
        with open(lock) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if pid <= 0:
        return False
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
    build will write, :func:`sweep.codegen.build.is_built`), unless a build
    of it runs already. Logs one line; returns the process, or None."""
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
    with open(logfile, "a") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sweep.prebuild", path, record], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=os.getcwd())
    log.info(f"integrator.backend=auto: building the generated C of this structure in the background, at low "
             f"priority (log: {logfile}); the next run of it - whatever its loads, rates, masses or hardpoints - "
             "runs on that code")
    return proc


def _claim(lock):
    """Create the lock with this process's id; False when a live builder holds it."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _alive(lock):
                return False
            try:
                os.remove(lock)        # its builder is gone
            except FileNotFoundError:
                pass
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


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
        from sweep.runtime import setup, xla_flags_from_env
        xla_flags_from_env()
        from omegaconf import OmegaConf
        cfg = OmegaConf.load(cfg_path)
        os.remove(cfg_path)             # read: a build killed from here on leaves no config behind
        setup(cfg)
        try:
            info = build(cfg)
        except Exception as err:    # noqa: BLE001 - recorded, so that later jobs do not try again
            _failed(record, f"{type(err).__name__}: {err}")
            raise
        from sweep.codegen.build import record_built
        if not record_built(record):
            # the whole variant could not be generated (equilibria on XLA, or no C
            # at all): a short job keeps running on XLA, and no later job retries
            _failed(record, f"the whole variant was not generated ({info.get('backend')}, "
                            f"{info.get('why', 'equilibria on XLA')})")
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
                mine = f.read().strip() == str(os.getpid())
            if mine:
                os.remove(lock)
        except OSError:
            pass


if __name__ == "__main__":
    sys.exit(main())
