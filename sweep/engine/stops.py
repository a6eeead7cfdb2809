"""Clean stops and the run context of one job.

:class:`RunContext` holds what a running job owns - the store it writes, the
store locks, the progress bar - and turns SIGINT / SIGTERM into a clean
stop: the handler only records the signal; compilation and the computation
of a chunk run in a worker thread that the main thread waits on
(:meth:`RunContext.wait`); a signal during that wait abandons the chunk in
flight (nothing of it is written), a signal while a chunk is being written
(by the writer thread, possibly while the next one is computed) stops
right after the write (its flag set). Either way :meth:`RunContext.exit`
prints one line (what is saved, how to resume), releases the store locks and
ends the process with 128 + signal (130 SIGINT, 143 SIGTERM) without
unwinding through JAX - or, in an interactive process that must outlive
the job (a workbench: ``interactive=True``), raises KeyboardInterrupt in the
main thread after the same line (the abandoned chunk's computation ends in
its worker thread, unwritten). Outside the main thread (no signal handlers
possible) nothing is installed.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading

log = logging.getLogger("sweep")


class RunContext:
    """The state of one running job; a context manager (signal handlers
    installed on entry, restored and the store locks released on exit,
    whatever happens).

    ``on_chunk_written``: called with the number of chunks written so far,
    each time a chunk is safely in the store (before a stop request is
    honoured); None by default. An observer set on the class by a launcher
    (the tests' fault injection, ``tests/fault_sweep.py``)."""
    on_chunk_written = None

    def __init__(self, interactive=False):
        self.interactive = bool(interactive)
        self.signum = None
        self._old = {}
        self.path = None        # the store being written, for the stop message
        self.store = None
        self.locks = []
        self.bar = None
        self.pending_write = None   # a chunk's write in flight (a Future): finished before a stop

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for s in (signal.SIGINT, signal.SIGTERM):
                self._old[s] = signal.signal(s, self._handler)
        return self

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old = {}
        self.release_locks()
        return False

    def _handler(self, signum, frame):
        self.signum = signum

    def release_locks(self):
        while self.locks:
            self.locks.pop().release()

    def checkpoint(self, abandoned=None):
        """Stop now if a signal arrived."""
        if self.signum is not None:
            self.exit(abandoned)

    def wait(self, fn, *args, doing="the chunk in flight"):
        """fn(*args) in a worker thread; returns its result, re-raises its
        exception, or exits (abandoning ``doing``) when a signal arrives meanwhile."""
        box = {}

        def work():
            try:
                box["result"] = fn(*args)
            except BaseException as err:  # noqa: BLE001 - handed to the main thread
                box["error"] = err
        t = threading.Thread(target=work, daemon=True, name="sweep-worker")
        t.start()
        while t.is_alive():
            t.join(0.1)
            if self.signum is not None:
                self.exit(abandoned=doing)
        if "error" in box:
            raise box["error"]
        return box["result"]

    def exit(self, abandoned=None):
        name = signal.Signals(self.signum).name
        if self.pending_write is not None:      # a finished chunk being written lands first
            try:
                self.pending_write.result()
            except Exception:  # noqa: BLE001 - not flagged then; the store stays consistent
                pass
        if self.store is None:
            msg = f"interrupted by {name} before any result was written; nothing to resume"
        else:
            try:
                done = self.store.done()
                saved = f"{int(done.sum())} of {len(done)} chunk(s) are saved in {self.path}"
            except Exception:  # noqa: BLE001
                saved = f"the finished chunks are saved in {self.path}"
            msg = (f"interrupted by {name}: {saved}"
                   + (f" ({abandoned} was abandoned)" if abandoned else "")
                   + "; run the same command again to resume")
        if self.bar is not None:
            try:
                self.bar.close()
            except Exception:  # noqa: BLE001
                pass
        self.release_locks()
        try:
            sys.stdout.flush()
        except Exception:  # noqa: BLE001
            pass
        log.warning(msg)             # the console handler writes warnings to stderr
        for h in logging.getLogger().handlers + log.handlers:
            try:
                h.flush()
            except Exception:  # noqa: BLE001
                pass
        if self.interactive:
            signum, self.signum = self.signum, None
            raise KeyboardInterrupt(f"{msg} (signal {signum})")
        os._exit(128 + self.signum)
