"""Sessions that survive failure, seen from Python: a lost session is reported clearly
and can be re-established with the open files re-opened by path."""

import errno
import json
import socket

import pytest

import dafs
from conftest import Server


def admin(sock_path, line):
    """One admin-socket command (what `dafs admin` does), answered in JSON."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock_path))
        s.sendall(line.encode() + b"\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data)


@pytest.mark.parametrize("provider", ["tcp", "auto"])
def test_lost_session_then_reestablish(tmp_path, provider):
    sock = tmp_path / "admin.sock"
    srv = Server(tmp_path / "srv", "--admin-socket", str(sock))
    try:
        c = dafs.Client(srv.addr, provider=provider)
        with c.open("/notes.txt", "w+b") as f:
            f.write(b"hello, world")
            f.seek(7)
            # The administrator ends the session (as a lease expiry would).
            r = admin(sock, f"kill {c.session_id:016x}")
            assert r == {"ok": True}
            with pytest.raises(OSError) as ei:
                f.read()
            assert ei.value.errno == errno.ENOTCONN
            assert c.session_lost == "BadSession"
            old = c.session_id
            c.reestablish()
            assert c.session_lost is None and c.session_id != old
            # The same file object works again, at the same position.
            assert f.read() == b"world"
        assert c.stats()["reconnects"] >= 1
        sessions = admin(sock, "sessions")
        assert [s["client"] for s in sessions].count(sessions[0]["client"]) == 1
        c.close()
    finally:
        srv.stop()


def test_fenced_client_is_told_so(tmp_path):
    sock = tmp_path / "admin.sock"
    srv = Server(tmp_path / "srv", "--admin-socket", str(sock))
    try:
        c = dafs.Client(srv.addr, client_id="py-fenced:1")
        c.null()
        assert admin(sock, "fence py-fenced:*")["sessions"] == 1
        with pytest.raises(OSError) as ei:
            c.null()
        assert ei.value.errno == errno.EPERM
        assert c.session_lost == "Fenced"
        with pytest.raises(OSError):
            dafs.Client(srv.addr, client_id="py-fenced:2")
        admin(sock, "unfence py-fenced:*")
        c.reestablish()
        c.null()
        c.close()
    finally:
        srv.stop()


def test_reconnect_arguments_are_checked(server):
    with pytest.raises(ValueError):
        dafs.Client(server.addr, reconnect_timeout=-1)
    c = dafs.Client(server.addr, reconnect=False)
    c.null()
    c.close()
