"""Exceptions, authentication, connections and context managers."""

import errno
import socket

import pytest

import dafs
from conftest import SECRET, connect


def test_enoent(client, wd):
    with pytest.raises(FileNotFoundError) as ei:
        client.stat(f"{wd}/missing")
    assert ei.value.errno == errno.ENOENT and ei.value.filename == f"{wd}/missing"
    with pytest.raises(FileNotFoundError):
        client.open(f"{wd}/missing")
    with pytest.raises(FileNotFoundError):
        client.open(f"{wd}/nodir/file", "w")
    with pytest.raises(FileNotFoundError):
        client.remove(f"{wd}/missing")
    with pytest.raises(FileNotFoundError) as ei:
        client.rename(f"{wd}/missing", f"{wd}/x")
    assert ei.value.filename2 == f"{wd}/x"
    assert not client.exists(f"{wd}/missing")


def test_eexist(client, wd):
    client.mkdir(f"{wd}/d")
    with pytest.raises(FileExistsError) as ei:
        client.mkdir(f"{wd}/d")
    assert ei.value.errno == errno.EEXIST
    client.open(f"{wd}/f", "wb").close()
    with pytest.raises(FileExistsError):
        client.open(f"{wd}/f", "x")
    with pytest.raises(FileExistsError):
        client.symlink("f", f"{wd}/f")


def test_eisdir(client, wd):
    client.mkdir(f"{wd}/d")
    for mode in ("w", "wb", "r+b", "a"):
        with pytest.raises(IsADirectoryError) as ei:
            client.open(f"{wd}/d", mode)
        assert ei.value.errno == errno.EISDIR
    with pytest.raises(IsADirectoryError):
        client.open(f"{wd}/d", "rb")
    with pytest.raises(IsADirectoryError):
        client.remove(f"{wd}/d")


def test_enotdir(client, wd):
    client.open(f"{wd}/f", "wb").close()
    with pytest.raises(NotADirectoryError) as ei:
        client.listdir(f"{wd}/f")
    assert ei.value.errno == errno.ENOTDIR
    with pytest.raises(NotADirectoryError):
        client.stat(f"{wd}/f/x")
    with pytest.raises(NotADirectoryError):
        client.rmdir(f"{wd}/f")
    with pytest.raises(NotADirectoryError):
        client.open(f"{wd}/f/x", "w")


def test_enotempty(client, wd):
    client.makedirs(f"{wd}/d/e")
    with pytest.raises(OSError) as ei:
        client.rmdir(f"{wd}/d")
    assert ei.value.errno == errno.ENOTEMPTY


@pytest.mark.parametrize("path", ["../etc", "../etc/passwd", "/../etc", "a/../../etc"])
def test_escape_attempts_are_refused(client, path):
    with pytest.raises(OSError) as ei:
        client.stat(path)
    assert not isinstance(ei.value, ConnectionError)
    assert ei.value.errno in (errno.EXDEV, errno.EACCES, errno.EPERM, errno.ENOENT, errno.EINVAL)
    with pytest.raises(OSError):
        client.open(path)
    with pytest.raises(OSError):
        client.listdir(path)
    client.null()  # the session is fine


def test_unsupported_and_invalid(client, wd):
    client.mkdir(f"{wd}/d")
    with pytest.raises(OSError) as ei:
        client.readlink(f"{wd}/d")
    assert ei.value.errno == errno.EINVAL
    with pytest.raises(OSError):
        client.remove("/")  # names no entry


def test_connection_refused():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with pytest.raises(ConnectionRefusedError) as ei:
        dafs.Client(f"127.0.0.1:{port}", connect_timeout=2)
    assert isinstance(ei.value, ConnectionError) and ei.value.errno == errno.ECONNREFUSED


def test_bad_arguments():
    with pytest.raises(ValueError):
        dafs.Client("127.0.0.1:1", provider="carrier-pigeon")
    with pytest.raises(ValueError):
        dafs.Client("127.0.0.1:1", secret=b"12345678", secret_file="/x")


@pytest.mark.parametrize("provider", ["tcp", "shm"])
def test_disconnect_raises_connection_error(fresh_server, provider):
    c = connect(fresh_server, provider)
    with c.open("f", "wb") as f:
        f.write(b"hello")
    f = c.open("f")
    region = c.alloc_registered(4096)
    fresh_server.kill()
    with pytest.raises(ConnectionError):
        for _ in range(3):  # the first call may still find a reply buffered
            c.stat("f")
            f.read()
    with pytest.raises(ConnectionError):
        c.null()
    f.close()  # closing a file of a lost session is fine
    region.close()
    c.close()
    assert c.closed


def test_shm_target_url(server):
    assert server.shm_url.startswith("dafs+shm://")
    with dafs.Client(server.shm_url) as c:
        assert c.provider == "shm"
        c.null()
    with dafs.Client(server.addr, provider="shm") as c:
        assert c.provider == "shm"


def test_shm_required_but_not_offered(fresh_server, tmp_path):
    from conftest import Server

    s = Server(tmp_path / "noshm", shm=False)
    try:
        with pytest.raises(ConnectionError):
            dafs.Client(s.addr, provider="shm")
        with dafs.Client(s.addr) as c:  # auto falls back to tcp
            assert c.provider == "tcp"
    finally:
        s.stop()


# ------------------------------------------------------------------ authentication


@pytest.mark.parametrize("provider", ["tcp", "shm"])
def test_secret_auth(secret_server, secret_file, provider):
    with pytest.raises(PermissionError) as ei:
        connect(secret_server, provider)
    assert ei.value.errno == errno.EACCES
    with pytest.raises(PermissionError):
        connect(secret_server, provider, secret=b"wrong secret!")
    with connect(secret_server, provider, secret=SECRET) as c:
        with c.open("auth.txt", "w") as f:
            f.write("authenticated")
    with connect(secret_server, provider, secret_file=secret_file) as c:
        with c.open("auth.txt") as f:
            assert f.read() == b"authenticated"
    with connect(secret_server, provider, secret=SECRET.decode()) as c:
        c.null()


def test_secret_refused_by_server_without_auth(server):
    with pytest.raises(PermissionError):
        dafs.Client(server.addr, secret=SECRET)


# ------------------------------------------------------------------ context managers


def test_client_context_manager(server, provider):
    with connect(server, provider) as c:
        assert not c.closed
        f = c.open("ctx", "wb")
        region = c.alloc_registered(4096)
        cg = c.completion_group()
    assert c.closed and "closed" in repr(c)
    c.close()  # idempotent
    for op in (lambda: c.stat("ctx"), lambda: c.open("ctx"), c.null, c.stats, c.completion_group):
        with pytest.raises(ValueError):
            op()
    with pytest.raises(ValueError):
        f.write(b"x")  # its session is closed
    f.close()
    assert region.closed and cg.closed
    with pytest.raises(ValueError):
        memoryview(region)


def test_file_and_region_context_managers(client, wd):
    with client.open(f"{wd}/f", "wb") as f:
        f.write(b"x")
    assert f.closed
    with client.alloc_registered(100) as r:
        pass
    assert r.closed
    with client.completion_group() as cg:
        pass
    assert cg.closed


def test_completion_groups_are_bounded(server, provider):
    with connect(server, provider) as c:
        groups = [c.completion_group() for _ in range(1024)]
        with pytest.raises(OSError) as e:
            c.completion_group()
        assert e.value.errno == errno.EMFILE
        groups.pop().close()
        groups.append(c.completion_group())
        for cg in groups:
            cg.close()


def test_close_waits_for_in_flight_io(server, provider):
    c = connect(server, provider)
    with c.open("big", "wb") as f:
        f.write(bytes(4 << 20))
    f = c.open("big")
    region = c.alloc_registered(4 << 20)
    cg = c.completion_group()
    c.submit_read(f, 0, region, cg=cg)
    c.close()  # waits, unregisters, closes files
    assert c.closed and f.closed is False  # the Python object is not told...
    f.close()  # ...but closing it is harmless
