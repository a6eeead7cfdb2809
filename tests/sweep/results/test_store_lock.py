"""The store lock: one process per store, stale locks and creation folders of dead processes cleaned up."""
import json
import os
import socket
import subprocess
import pytest
from tests.e2e.test_faults import _dead_pid  # noqa: F401


def test_lock_semantics(tmp_path):
    """Shards with disjoint chunks share a store; overlapping runs refuse;
    entries of dead processes are taken over; the file goes with the last."""
    from sweep.results.store import StoreError, StoreLock
    path = str(tmp_path / "s.zarr")
    other = subprocess.Popen(["sleep", "60"])              # a live process of this host
    host = socket.gethostname().replace(".", "_")
    try:
        def holder(pid, shard, n):
            with open(path + ".lock", "w") as f:
                f.write(json.dumps({"pid": pid, "host": host, "start": None, "shard": shard,
                                    "num_shards": n, "since": "now"}) + "\n")
        holder(other.pid, 0, 2)
        StoreLock(path, 1, 2).acquire().release()            # disjoint shard: fine
        StoreLock(path, 1, 4).acquire().release()            # k % 4 == 1 never has k % 2 == 0
        for shard, n in ((0, 1), (0, 2), (2, 4)):
            with pytest.raises(StoreError, match=f"in use by process {other.pid}"):
                StoreLock(path, shard, n).acquire()
        assert os.path.exists(path + ".lock")                 # the other's entry stays
        holder(_dead_pid(), 0, 1)                             # stale: taken over
        lock = StoreLock(path).acquire()
        assert [json.loads(ln)["pid"] for ln in open(path + ".lock")] == [os.getpid()]
        lock.release()
        assert not os.path.exists(path + ".lock")
    finally:
        other.kill()
        other.wait()
