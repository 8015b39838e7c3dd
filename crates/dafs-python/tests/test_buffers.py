"""readinto into caller memory, registered regions, asynchronous I/O."""

import ctypes
import random

import pytest

KiB = 1024
MiB = 1024 * KiB


def payload(n: int, seed: int = 1) -> bytes:
    return random.Random(seed ^ n).randbytes(n)


def address(obj) -> int:
    """Address of a writable buffer's first byte."""
    return ctypes.addressof(ctypes.c_char.from_buffer(obj))


@pytest.fixture
def data_file(client, wd):
    data = payload(2 * MiB + 5)
    path = f"{wd}/data"
    with client.open(path, "wb") as f:
        f.write(data)
    return path, data


@pytest.mark.parametrize("n", [100, 16 * KiB + 1, 2 * MiB + 5])
def test_readinto_bytearray_in_place(client, data_file, n):
    path, data = data_file
    buf = bytearray(b"\xee" * n)
    addr = address(buf)
    with client.open(path) as f:
        assert f.readinto(buf) == n
    assert address(buf) == addr  # the same object, the same memory: filled in place
    assert buf == data[:n]


def test_large_readinto_is_placed_into_the_callers_memory(client, data_file):
    """Above the inline threshold the caller's buffer is registered for the call and the
    server places the data straight into it (no bounce buffer in the client)."""
    path, data = data_file
    n = 1 * MiB
    buf = bytearray(n)
    before = client.stats()
    with client.open(path) as f:
        assert f.readinto(buf) == n
    after = client.stats()
    assert buf == data[:n]
    assert after["off_direct_path"] == before["off_direct_path"] + 1  # registered just for the call
    assert after["direct_bytes"] - before["direct_bytes"] == n
    assert after["inline_bytes"] == before["inline_bytes"]
    if client.provider == "tcp":
        assert after["transport"]["placed_bytes"] - before["transport"]["placed_bytes"] == n
    else:
        assert after["transport"]["vm_registrations"] > before["transport"]["vm_registrations"]


@pytest.mark.parametrize("n", [1000, 64 * KiB])
def test_readinto_memoryview_slice(client, data_file, n):
    path, data = data_file
    big = bytearray(b"\xee" * (n + 300))
    mv = memoryview(big)[100 : 100 + n]
    with client.open(path) as f:
        f.seek(7)
        assert f.readinto(mv) == n
    assert big[:100] == b"\xee" * 100
    assert big[100 : 100 + n] == data[7 : 7 + n]
    assert big[100 + n :] == b"\xee" * 200


def test_readinto_short_at_eof(client, data_file):
    path, data = data_file
    buf = bytearray(4 * MiB)
    with client.open(path) as f:
        f.seek(len(data) - 10)
        assert f.readinto(buf) == 10
    assert buf[:10] == data[-10:]
    assert buf[10:20] == bytes(10)


def test_readinto_rejects_unsuitable_buffers(client, data_file):
    path, _ = data_file
    with client.open(path) as f:
        with pytest.raises(TypeError):
            f.readinto(b"read-only bytes")
        with pytest.raises(TypeError):
            f.readinto(memoryview(bytearray(10)).toreadonly())
        with pytest.raises(TypeError):
            f.readinto("a str")
        with pytest.raises((TypeError, BufferError, ValueError)):
            f.readinto(memoryview(bytearray(10))[::2])  # not contiguous
        assert f.readinto(bytearray()) == 0


def test_readinto_numpy(client, data_file):
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    path, data = data_file
    with client.open(path) as f:
        a = np.zeros(1 * MiB, dtype=np.uint8)
        ptr = a.ctypes.data
        assert f.readinto(a) == a.nbytes
        assert a.ctypes.data == ptr
        assert a.tobytes() == data[: a.nbytes]
        # other dtypes: the array's bytes
        d = np.empty(1000, dtype=np.float64)
        f.seek(0)
        assert f.readinto(d) == 8000
        assert d.view(np.uint8).tobytes() == data[:8000]
        # a slice of a bigger array (contiguous) lands inside it
        big = np.full(5000, 0xEE, dtype=np.uint8)
        f.seek(0)
        assert f.readinto(big[1000:3000]) == 2000
        assert big[1000:3000].tobytes() == data[:2000]
        assert (big[:1000] == 0xEE).all() and (big[3000:] == 0xEE).all()
        # 2-D C-contiguous works; non-contiguous and read-only are refused
        m = np.zeros((64, 64), dtype=np.uint8)
        f.seek(0)
        assert f.readinto(m) == 4096
        assert m.tobytes() == data[:4096]
        with pytest.raises((TypeError, BufferError, ValueError)):
            f.readinto(big[::2])
        ro = np.zeros(10, dtype=np.uint8)
        ro.flags.writeable = False
        with pytest.raises((TypeError, BufferError, ValueError)):
            f.readinto(ro)


# ------------------------------------------------------------------ registered memory


def test_alloc_registered_region_buffer_protocol(client):
    with client.alloc_registered(64 * KiB) as r:
        assert len(r) == 64 * KiB
        with memoryview(r) as mv:
            assert mv.nbytes == 64 * KiB and not mv.readonly and mv.format == "B"
            assert mv[:4] == b"\0\0\0\0"  # zeroed
            mv[:5] = b"hello"
            assert r.exports == 1
        assert r.exports == 0
        assert r.read(0, 5) == b"hello"
        r.write(b"abc", 10)
        assert r.read(10, 3) == b"abc"
        with memoryview(r) as mv:
            r.write(mv[0:5], 2)  # overlapping copy within the region
        assert r.read(0, 7) == b"hehello"
        with pytest.raises(ValueError):
            r.write(b"x", 64 * KiB)
    assert r.closed
    with pytest.raises(ValueError):
        memoryview(r)


def test_async_write_then_read_with_region(client, wd):
    data = payload(3 * MiB)
    n = len(data)
    region = client.alloc_registered(n + 4096)
    region.write(data)
    with client.open(f"{wd}/async", "w+b") as f, client.completion_group() as cg:
        rid = client.submit_write(f, 0, region, 0, n, user_data=11, cg=cg)
        assert isinstance(rid, int)
        (done,) = cg.wait()
        assert done.user_data == 11 and done.id == rid and done.ok
        assert done.result == n and done.error is None
        with memoryview(region) as mv:
            mv[:] = bytes(len(mv))
        # read back into the region at an offset, in 4 pieces
        piece = n // 4
        for k in range(4):
            client.submit_read(f, k * piece, region, 4096 + k * piece, piece, user_data=k, cg=cg)
        got = cg.wait(4, timeout=30)
        assert sorted(c.user_data for c in got) == [0, 1, 2, 3]
        assert all(c.result == piece for c in got)
        assert region.read(4096, n) == data
        assert region.read(0, 4096) == bytes(4096)
    region.close()


def test_region_refuses_buffer_while_io_in_flight(client, data_file):
    path, data = data_file
    region = client.alloc_registered(2 * MiB)
    with client.open(path) as f, client.completion_group() as cg:
        client.submit_read(f, 0, region, cg=cg)  # length: the whole region
        with pytest.raises(BufferError):
            memoryview(region)
        with pytest.raises(BufferError):
            region.read()
        with pytest.raises(BufferError):
            region.write(b"x")
        assert cg.outstanding in (0, 1)
        (done,) = cg.wait(timeout=30)
        assert done.result == 2 * MiB and not done.eof
        with memoryview(region) as mv:
            assert mv.tobytes() == data[: 2 * MiB]


def test_submit_refused_while_region_buffer_exported(client, data_file):
    path, data = data_file
    region = client.alloc_registered(1 * MiB)
    with client.open(path) as f, client.completion_group() as cg:
        mv = memoryview(region)
        with pytest.raises(BufferError):
            client.submit_read(f, 0, region, cg=cg)
        with pytest.raises(BufferError):
            client.submit_write(f, 0, region, cg=cg)
        with pytest.raises(BufferError):
            region.close()
        with pytest.raises(BufferError):
            client.close()
        assert not client.closed
        mv.release()
        client.submit_read(f, 0, region, 0, 1000, user_data=3, cg=cg)
        (done,) = cg.wait()
        assert done.result == 1000
        assert region.read(0, 1000) == data[:1000]


def test_register_bytearray_data_lands_in_it(client, data_file):
    path, data = data_file
    buf = bytearray(1 * MiB)
    addr = address(buf)
    region = client.register(buf)
    assert len(region) == len(buf)
    with pytest.raises(BufferError):
        buf.extend(b"x")  # exported: cannot be resized while registered
    with client.open(path) as f, client.completion_group() as cg:
        client.submit_read(f, 0, region, 0, len(buf), user_data=9, cg=cg)
        client.submit_read(f, 0, region, 0, 100, user_data=10, cg=cg)  # small: inline
        got = cg.wait(2)
        assert {c.user_data: c.result for c in got} == {9: len(buf), 10: 100}
    assert address(buf) == addr
    assert buf == data[: len(buf)]
    region.close()
    buf.extend(b"x")  # released


def test_register_numpy_and_write_from_it(client, wd):
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    a = np.arange(256 * KiB, dtype=np.uint32)
    with client.register(a) as region, client.open(f"{wd}/np", "w+b") as f, client.completion_group() as cg:
        assert len(region) == a.nbytes
        client.submit_write(f, 0, region, cg=cg)
        assert cg.wait()[0].result == a.nbytes
        a[:] = 0
        client.submit_read(f, 0, region, cg=cg)
        assert cg.wait()[0].result == a.nbytes
    assert (a == np.arange(256 * KiB, dtype=np.uint32)).all()


def test_completion_errors_and_eof(client, data_file, wd):
    path, data = data_file
    region = client.alloc_registered(1 * MiB)
    with client.completion_group() as cg:
        with client.open(path) as f:
            client.submit_read(f, len(data) - 10, region, 0, 1000, user_data=1, cg=cg)
            (c,) = cg.wait()
            assert c.result == 10 and c.eof
            client.submit_read(f, len(data) + 10, region, 0, 1000, user_data=2, cg=cg)
            (c,) = cg.wait()
            assert c.result == 0 and c.eof
        with client.open(f"{wd}/wo", "wb") as w:  # write-only: reads fail
            client.submit_read(w, 0, region, 0, 100 * KiB, user_data=3, cg=cg)
            (c,) = cg.wait()
            assert not c.ok and c.nbytes is None
            assert isinstance(c.error, OSError) and c.error.errno != 0
            with pytest.raises(OSError) as ei:
                c.result
            assert ei.value.errno == c.error.errno
        assert "user_data=3" in repr(c)


def test_poll_and_wait_timeouts(client, data_file):
    path, _ = data_file
    region = client.alloc_registered(2 * MiB)
    with client.open(path) as f, client.completion_group() as cg:
        assert cg.wait(timeout=0.01) == []  # nothing in flight
        assert cg.poll() == []
        client.submit_read(f, 0, region, user_data=5, cg=cg)
        got = []
        for _ in range(100000):
            got += cg.poll()
            if got:
                break
        got += cg.wait(timeout=30) if not got else []
        assert [c.user_data for c in got] == [5]
        assert cg.outstanding == 0


def test_slots_exhausted_raises_blocking_io_error(server, provider, data_file):
    from conftest import connect

    path, _ = data_file
    with connect(server, provider, slots=1) as c:
        assert c.slots == 1
        region = c.alloc_registered(2 * MiB)
        with c.open(path) as f, c.completion_group() as cg:
            blocked = 0
            submitted = 0
            for _ in range(50):
                try:
                    c.submit_read(f, 0, region, cg=cg)
                    submitted += 1
                except BlockingIOError as e:
                    assert e.errno == 11  # EAGAIN
                    blocked += 1
                    break
            assert blocked == 1
            got = cg.wait_all()
            assert len(got) == submitted and all(x.result == 2 * MiB for x in got)


def test_completion_group_context_manager_waits(client, data_file):
    path, _ = data_file
    region = client.alloc_registered(2 * MiB)
    with client.open(path) as f:
        with client.completion_group() as cg:
            client.submit_read(f, 0, region, cg=cg)
        assert cg.closed
        with pytest.raises(ValueError):
            cg.wait()
        with memoryview(region):  # the read was waited for
            pass


def test_objects_must_belong_to_the_client(server, client, data_file):
    from conftest import connect

    path, _ = data_file
    with connect(server, "tcp") as other:
        foreign = other.alloc_registered(4096)
        with client.open(path) as f, client.completion_group() as cg:
            with pytest.raises(ValueError):
                client.submit_read(f, 0, foreign, cg=cg)
            with pytest.raises(TypeError):
                client.submit_read(f, 0, client.alloc_registered(10))  # no cg
        foreign.close()


def test_dropping_objects_cleans_up(client, data_file):
    import gc

    path, _ = data_file
    f = client.open(path)
    for _ in range(20):
        r = client.alloc_registered(256 * KiB)
        cg = client.completion_group()
        client.submit_read(f, 0, r, cg=cg)
        del r, cg  # in flight: kept alive by the client until reaped
        gc.collect()
    client.null()  # runs deferred clean-up
    f.close()
    client.close()


def test_submit_on_buffered_file_flushes_it_first(client, wd):
    region = client.alloc_registered(4096)
    with client.open(f"{wd}/buffered", "w+b", buffering=-1) as bf, client.completion_group() as cg:
        bf.write(b"still in the buffer")
        client.submit_read(bf, 0, region, 0, 19, cg=cg)
        assert cg.wait()[0].result == 19
        assert region.read(0, 19) == b"still in the buffer"
