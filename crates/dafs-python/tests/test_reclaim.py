"""Reclaim after a server restart (docs/protocol.md §9.5) through the Python binding: a
file opened before dafsd is killed with SIGKILL and started again (same port, export
and state directory, a grace period) keeps working; the client library reclaims its
open by itself."""

from __future__ import annotations

import subprocess
import time

import dafs
from conftest import dafsd_binary


def start(export, state, listen):
    """dafsd on `listen` with a state directory and a 5 s grace period; retried while
    the killed predecessor's port lingers. Returns (process, address)."""
    deadline = time.monotonic() + 10
    while True:
        p = subprocess.Popen(
            [dafsd_binary(), str(export), "--listen", listen, "--no-shm", "--no-admin",
             "--state-dir", str(state), "--grace-secs", "5"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        line = p.stdout.readline()
        if line.startswith("dafsd listening on "):
            return p, line.split()[-1]
        p.kill()
        p.wait()
        assert time.monotonic() < deadline, "dafsd did not start"
        time.sleep(0.02)


def test_a_file_open_across_a_restart_keeps_working(tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    state = tmp_path / "state"
    p, addr = start(export, state, "127.0.0.1:0")
    try:
        c = dafs.Client(addr, provider="tcp", client_id="py-reclaim")
        f = c.open("data", "w+b", buffering=0)
        f.pwrite(b"before", 0)
        p.kill()
        p.wait()
        p, _ = start(export, state, addr)
        t = time.monotonic()
        f.pwrite(b"+after", 6)  # no ESTALE: the open was reclaimed
        f.fsync()
        assert time.monotonic() - t < 4, "reclaimed, not waited out"
        assert (export / "data").read_bytes() == b"before+after"
        f.close()
        c.close()
    finally:
        p.kill()
        p.wait()
