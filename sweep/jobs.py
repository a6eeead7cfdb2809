"""Job kinds and the one dispatch: which module runs a config's job.

A job kind is a module with ``KIND`` (its name), ``run(cfg, cfg_yaml,
progress) -> summary`` (validate, build the per-variant function and its
channel table, hand them to :mod:`sweep.engine`) and ``report(ds, cfg,
summary)`` (log the summary, write its pictures). The load case's ``kind``
selects it (default ``time_response``). A new analysis is one module and
one entry in :data:`KINDS`.
"""
from __future__ import annotations

import importlib


from sweep import engine
from sweep.schema import ConfigError

# loadcase.kind -> module
KINDS = {
    "time_response": "sweep.time_response",   # LSRT2 / ROS34PW2 / linear-implicit Euler / Radau
    "kc": "sweep.kc",                         # quasi-static K&C rig analyses
    "modes": "sweep.modes",                   # eigenfrequencies, damping, participation per variant
}


def kind_name(cfg) -> str:
    kind = cfg.loadcase.get("kind", "time_response")
    if kind not in KINDS:
        raise ConfigError(f"loadcase.kind = {kind!r} is not one of {', '.join(KINDS)}")
    return kind


def kind_of(cfg):
    """The job-kind module of ``cfg`` (:data:`KINDS`); one-line error naming
    ``loadcase.kind`` for an unknown kind."""
    return importlib.import_module(KINDS[kind_name(cfg)])


def run_job(cfg, cfg_yaml, progress=None):
    """Run (or resume) the job of ``cfg`` into its cube; returns the summary
    dict. SIGINT / SIGTERM stop it cleanly, the store locks are released
    whatever happens (:func:`sweep.engine.run_guarded`)."""
    return engine.run_guarded(kind_of(cfg).run, cfg, cfg_yaml, progress)
