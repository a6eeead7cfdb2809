"""The one job pipeline: ``run(kind, cfg)`` for every job kind.

A job kind (:mod:`sweep.kinds`) plans the job and supplies the per-variant
function; :func:`run` owns the rest: the store layout
(:mod:`sweep.engine.layout`), opening / verifying / resuming the store,
compiling once and streaming the chunks (:mod:`sweep.engine.stream`), the
mapping over devices (:mod:`sweep.engine.mapping`) and clean stops
(:mod:`sweep.engine.stops`).
"""
from __future__ import annotations

from sweep.results import status as status_table
from sweep.engine import layout, stream
from sweep.engine.stops import RunContext
from sweep.core.runtime import ensure_console_logging


def run(kind, cfg, cfg_yaml, progress=None, programs=None, before_compile=None, interactive=False):
    """Run (or resume) the job of ``cfg`` with ``kind`` into its cube; returns
    the summary dict (path, n_variants, chunk, n_chunks, todo, devices,
    compile_s, run_s, variants_run and the kind's own entries). SIGINT /
    SIGTERM stop it cleanly; the store locks are released whatever happens.
    ``programs``: compiled runners kept from earlier jobs of this process
    (:class:`sweep.engine.stream.Programs`), None outside a workbench;
    ``interactive``: a stop (SIGINT / SIGTERM) raises KeyboardInterrupt
    instead of ending the process (a workbench);
    ``before_compile()``: called when there is something to compile and run
    (the app starts loading its report's modules meanwhile)."""
    ensure_console_logging()
    with RunContext(interactive=interactive) as ctx:
        plan = kind.plan(cfg)
        spec = layout.store_spec(plan)
        from sweep.results.cube import CF_CONVENTIONS      # every kind's cube, a plug-in kind's too
        attrs = {"Conventions": CF_CONVENTIONS, **kind.attrs(plan, cfg_yaml), "cube_kind": kind.cube_kind or kind.name}
        identity = layout.job_identity(cfg, drop=kind.drop, unused=kind.unused)
        path, store, _, todo, plan = stream.open_store(ctx, cfg, plan, spec, attrs, identity)
        n, C = len(plan.X), plan.chunk
        summary = {"kind": kind.name, **kind.summary(plan), "path": path, "n_variants": n, "chunk": C,
                   "n_chunks": -(-n // C), "todo": len(todo), "compile_s": 0.0, "run_s": 0.0,
                   "variants_run": 0, "devices": plan.n_dev}
        if todo:
            if before_compile is not None:
                before_compile()
            runner = kind.runner(plan)
            run_chunk, summary["compile_s"] = stream.compile_runner(ctx, runner, plan.n_dev, programs)
            stream.stream_chunks(ctx, plan, store, todo, run_chunk, [c.name for c in plan.channels],
                                 progress, summary)
            stream.stage_split(runner, summary)
        ctx.checkpoint()
    return summary


def _memory_note():
    """Peak memory of this process (host RSS) and of the first accelerator, where JAX reports it."""
    import resource
    import sys
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    note = f"peak memory: host {rss / 2 ** 30:.2f} GiB"
    try:
        import jax
        dev = jax.devices()[0]
        stats = dev.memory_stats() if dev.platform != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            note += f", {dev.platform} device {stats['peak_bytes_in_use'] / 2 ** 30:.2f} GiB"
    except Exception:  # noqa: BLE001 - a note, never a failure
        pass
    return note


def log_split(log, s):
    """Log where a run's time went (the summary's compute_s, write_s,
    write_wait_s) and the peak memory."""
    if "compute_s" in s:
        stages = (f" (equilibria {s['equilibria_s']:.2f} s, integration {s['integration_s']:.2f} s)"
                  if "equilibria_s" in s else "")
        log.info(f"run split: chunks computing {s['compute_s']:.2f} s{stages}, writing {s['write_s']:.2f} s in "
                 f"the writer thread (the run waited {s['write_wait_s']:.2f} s for it); {_memory_note()}")


def log_run(log, s, status, codes=None):
    """Log what a job run did (wall time, or that nothing was left) and the
    status counts of its cube (``codes``: the kind's status codes)."""
    if s["variants_run"]:
        rate = s["variants_run"] / s["run_s"] if s["run_s"] else float("nan")
        log.info(f"wall time: compile {s['compile_s']:.2f} s, run {s['run_s']:.2f} s for "
                 f"{s['variants_run']} variant(s) ({rate:.2f} variants/s); chunks of {s['chunk']} "
                 f"on {s['devices']} device(s)")
        log_split(log, s)
    else:
        log.info(f"{s['path']}: nothing to run for this shard, every chunk is complete")
    log.info("status: " + status_table.counts(status, codes))
