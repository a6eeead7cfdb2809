"""The job kinds and the one lookup: which kind runs a config's job.

A kind is a module of this package that defines ``KIND``, a
:class:`sweep.kinds.base.JobKind`; the load case's ``kind`` (default
``time_response``) names it. The kinds are discovered from the package
(once per process, then kept), so a new analysis is one module here plus
one load-case config; nothing else adds to them.
"""
from __future__ import annotations

import importlib
import pkgutil

from sweep.kinds.base import JobKind, Plan, Runner  # noqa: F401  (the protocol, re-exported)
from sweep.core.config import ConfigError

DEFAULT = "time_response"
_DISCOVERED: dict = {}       # the package's kinds, found on first use


def _discover():
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_") or info.name in _DISCOVERED:
            continue
        kind = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if isinstance(kind, JobKind):
            _DISCOVERED.setdefault(kind.name, kind)


def kinds() -> dict:
    """{name: kind} of every known job kind."""
    if not _DISCOVERED.get(DEFAULT):
        _discover()
    return dict(_DISCOVERED)


def kind_of(cfg) -> JobKind:
    """The job kind of a config (``loadcase.kind``, default ``time_response``);
    a one-line :class:`ConfigError` naming ``loadcase.kind`` for an unknown one."""
    lc = cfg.get("loadcase") or {}
    name = lc.get("kind", DEFAULT) or DEFAULT
    known = kinds()
    if name not in known:
        raise ConfigError(f"loadcase.kind = {name!r}: must be one of {', '.join(sorted(known))}")
    return known[name]
