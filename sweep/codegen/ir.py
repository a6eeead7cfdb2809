"""The scalar program's building blocks shared by the generator
(:mod:`sweep.codegen.emit`) and the C writer (:mod:`sweep.codegen.csource`):
element references and the loop statement."""
from __future__ import annotations

from dataclasses import dataclass, field

BUF = 1 << 40          # references >= BUF are arena elements (BUF + index)
CONST = -1             # reference of a generation-time constant


@dataclass
class Loop:
    """``for it in range(length)``: ``phis`` (carried slots) start as ``init``
    (refs) and take ``nxt`` after every ``body``; ``kind`` 'scan' or
    'while' (``cond_ref``: the per-variant continue flag, computed at the
    end of the body and before the first iteration in ``pre``)."""
    kind: str
    length: int
    depth: int
    phis: list
    init: list
    body: list = field(default_factory=list)
    nxt: list = field(default_factory=list)
    pre: list = field(default_factory=list)
    cond_ref: int = None
    cond_pre: int = None
    active: int = None        # while: the slot of the per-variant 'still running' mask


