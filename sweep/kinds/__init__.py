"""The job kinds and the one lookup: which kind runs a config's job.

A kind is a module of this package that defines ``KIND``, a
:class:`sweep.kinds.base.JobKind`; the load case's ``kind`` (default
``time_response``) names it. The registry is discovered from the package,
so a new analysis is one module here plus one load-case config -
:func:`register` adds a kind defined elsewhere (a plug-in, a test).
"""
from __future__ import annotations

import importlib
import pkgutil

from sweep.kinds.base import JobKind, Plan, Runner  # noqa: F401  (the protocol, re-exported)
from sweep.core.config import ConfigError

DEFAULT = "time_response"
_REGISTRY: dict = {}


def _discover():
    for info in pkgutil.iter_modules(__path__):
        if info.name == "base" or info.name.startswith("_") or info.name in _REGISTRY:
            continue
        kind = getattr(importlib.import_module(f"{__name__}.{info.name}"), "KIND", None)
        if isinstance(kind, JobKind):
            _REGISTRY.setdefault(kind.name, kind)


def register(kind: JobKind) -> JobKind:
    """Add (or replace) a job kind under ``kind.name``."""
    if not isinstance(kind, JobKind) or not kind.name:
        raise TypeError(f"{kind!r} is not a named JobKind")
    kinds()
    _REGISTRY[kind.name] = kind
    return kind


def kinds() -> dict:
    """{name: kind} of every known job kind."""
    if not _REGISTRY.get(DEFAULT):
        _discover()
    return dict(_REGISTRY)


def kind_of(cfg) -> JobKind:
    """The job kind of a config (``loadcase.kind``, default ``time_response``);
    a one-line :class:`ConfigError` naming ``loadcase.kind`` for an unknown one."""
    lc = cfg.get("loadcase") or {}
    name = lc.get("kind", DEFAULT) or DEFAULT
    known = kinds()
    if name not in known:
        raise ConfigError(f"loadcase.kind = {name!r}: must be one of {', '.join(sorted(known))}")
    return known[name]
