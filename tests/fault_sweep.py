"""``python -m tests.fault_sweep <the sweep's arguments>``: ``python -m sweep``
with fault injection for the tests - the process sends itself a signal once
it has written a given number of chunks (deterministic fault tests without
clocks, whatever compilation takes):

- ``AXLE_TEST_KILL_AFTER_CHUNKS=N``: after the N-th written chunk;
- ``AXLE_TEST_KILL_SIGNAL``: KILL (default), TERM or INT.

Without ``AXLE_TEST_KILL_AFTER_CHUNKS`` it is ``python -m sweep``. The hook
is the engine's observer of written chunks
(``sweep.engine.stops.RunContext.on_chunk_written``); nothing of it is in
the production modules."""
import os
import signal
import time


def kill_after(n, sig):
    def observer(written):
        if written == n:
            os.kill(os.getpid(), sig)
            if sig == signal.SIGKILL:  # pragma: no cover - not reached
                time.sleep(60)
    return observer


def main():
    from sweep.core.runtime import xla_flags_from_env
    xla_flags_from_env()                   # before JAX is imported (the engine's modules import it)
    n = os.environ.get("AXLE_TEST_KILL_AFTER_CHUNKS")
    if n:
        from sweep.engine.stops import RunContext
        sig = getattr(signal, "SIG" + os.environ.get("AXLE_TEST_KILL_SIGNAL", "KILL").upper())
        RunContext.on_chunk_written = staticmethod(kill_after(int(n), sig))
    from sweep.entry import sweep_cli
    sweep_cli()


if __name__ == "__main__":
    main()
