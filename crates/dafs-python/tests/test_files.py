"""File objects: round trips, io wrappers, modes, positions."""

import io
import os
import random
import shutil

import pytest

import dafs

KiB = 1024
MiB = 1024 * KiB


def payload(n: int, seed: int = 0) -> bytes:
    return random.Random(seed ^ n).randbytes(n)


@pytest.mark.parametrize("size", [0, 1, 16 * KiB - 1, 16 * KiB, 16 * KiB + 1, 5 * MiB])
def test_round_trip(client, wd, size):
    data = payload(size)
    path = f"{wd}/f-{size}"
    with client.open(path, "wb") as f:
        assert isinstance(f, dafs.File) and isinstance(f, io.RawIOBase)
        assert f.write(data) == size
        assert f.tell() == size
    assert client.stat(path).st_size == size
    with client.open(path, "rb") as f:
        assert f.read() == data  # readall
        assert f.read() == b""
    with client.open(path, "rb") as f:
        buf = bytearray(size + 7)
        assert f.readinto(buf) == size
        assert bytes(buf[:size]) == data
        assert f.readinto(buf) == 0
    with client.open(path, "rb", buffering=-1) as f:
        assert isinstance(f, io.BufferedReader)
        assert f.read() == data


def test_inline_and_direct_paths_are_counted(client, wd):
    # File reads land in unregistered memory: its threshold decides inline vs direct.
    t = client.inline_threshold_unregistered
    assert t >= client.inline_threshold > 0 and client.max_io_size >= t
    small, big = payload(t), payload(4 * t + 3)
    with client.open(f"{wd}/s", "wb") as f:
        f.write(small)
    with client.open(f"{wd}/b", "wb") as f:
        f.write(big)
    before = client.stats()
    with client.open(f"{wd}/s") as f:
        assert f.read(t) == small
    mid = client.stats()
    assert mid["inline_reads"] == before["inline_reads"] + 1
    with client.open(f"{wd}/b") as f:
        assert f.readinto(bytearray(len(big))) == len(big)
    after = client.stats()
    assert after["direct_reads"] > mid["direct_reads"]
    assert after["direct_bytes"] - mid["direct_bytes"] == len(big)


def test_buffered_reader_and_text(client, wd):
    path = f"{wd}/text.txt"
    lines = [f"line {i}: {'é' * (i % 7)} ✓\n" for i in range(2000)]
    with client.open(path, "w", encoding="utf-8") as f:
        assert isinstance(f, io.TextIOWrapper)
        assert f.mode == "w"
        f.writelines(lines)
    with client.open(path, "r", encoding="utf-8") as f:
        assert f.readline() == lines[0]
        assert list(f) == lines[1:]
    # explicit wrappers around a raw file
    raw = client.open(path, "rb")
    with io.TextIOWrapper(io.BufferedReader(raw, 4096), encoding="utf-8") as t:
        assert t.read() == "".join(lines)
    assert raw.closed
    with client.open(path, "rb", buffering=8192) as f:
        assert f.readline() == lines[0].encode()
        assert f.peek(1)[:1] == lines[1].encode()[:1]


def test_copyfileobj_both_ways(client, wd, tmp_path):
    data = payload(3 * MiB + 123)
    local = tmp_path / "src.bin"
    local.write_bytes(data)
    with open(local, "rb") as src, client.open(f"{wd}/copy", "wb", buffering=-1) as dst:
        shutil.copyfileobj(src, dst)
    back = tmp_path / "back.bin"
    with client.open(f"{wd}/copy", "rb") as src, open(back, "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert back.read_bytes() == data
    # dafs -> dafs, raw to raw
    with client.open(f"{wd}/copy", "rb") as src, client.open(f"{wd}/copy2", "wb") as dst:
        shutil.copyfileobj(src, dst, 1 * MiB)
    assert client.stat(f"{wd}/copy2").st_size == len(data)
    with client.open(f"{wd}/copy2") as f:
        assert f.read() == data


def test_seek_tell_truncate(client, wd):
    path = f"{wd}/s"
    data = bytes(range(100))
    with client.open(path, "w+b", buffering=0) as f:
        assert f.mode == "rb+"
        assert f.readable() and f.writable() and f.seekable()
        f.write(data)
        assert f.seek(10) == 10
        assert f.read(5) == data[10:15]
        assert f.tell() == 15
        assert f.seek(-5, os.SEEK_END) == 95
        assert f.read() == data[95:]
        assert f.seek(-10, os.SEEK_CUR) == 90
        assert f.truncate(50) == 50
        assert f.tell() == 90  # truncate does not move the position
        assert f.seek(0, os.SEEK_END) == 50
        assert f.stat().st_size == 50
        f.seek(0)
        assert f.truncate() == 0
        with pytest.raises(OSError):
            f.seek(-1)
        with pytest.raises(ValueError):
            f.seek(0, 7)
    assert client.stat(path).st_size == 0


def test_r_plus_buffered_random(client, wd):
    path = f"{wd}/rp"
    with client.open(path, "wb") as f:
        f.write(b"0123456789")
    with client.open(path, "r+b", buffering=-1) as f:
        assert isinstance(f, io.BufferedRandom)
        f.seek(3)
        f.write(b"abc")
        f.seek(0)
        assert f.read() == b"012abc6789"
    with client.open(path, "rb") as f:
        assert f.read() == b"012abc6789"


def test_append_is_atomic_across_clients(server, client, wd):
    import dafs
    path = f"{wd}/shared.log"
    other = dafs.Client(server.addr, provider="tcp")
    try:
        a = client.open(path, "ab")
        b = other.open(path, "ab")
        for i in range(50):
            (a if i % 2 else b).write(bytes([65 + i % 26]) * (10 + i))
        a.close()
        b.close()
    finally:
        other.close()
    data = client.open(path, "rb").read()
    assert len(data) == sum(10 + i for i in range(50))
    # Every record is intact and contiguous: runs of one letter of the expected lengths.
    runs, prev, count = [], None, 0
    for ch in data:
        if ch == prev:
            count += 1
        else:
            if prev is not None:
                runs.append(count)
            prev, count = ch, 1
    runs.append(count)
    assert sorted(runs) == sorted(10 + i for i in range(50))


def test_append_mode(client, wd):
    path = f"{wd}/log"
    with client.open(path, "w", encoding="ascii") as f:
        f.write("abc")
    with client.open(path, "a", encoding="ascii") as f:
        f.write("def")
    with client.open(path, "ab") as f:
        assert f.mode == "ab" and f.tell() == 6
        f.seek(0)
        f.write(b"g")  # always at the end
        assert f.tell() == 7
    with client.open(path, "a+b") as f:
        f.seek(0)
        assert f.read() == b"abcdefg"
        f.seek(1)
        f.write(b"h")
        f.seek(0)
        assert f.read() == b"abcdefgh"
    # a new file
    with client.open(f"{wd}/new", "a") as f:
        f.write("x")
    assert client.stat(f"{wd}/new").st_size == 1


def test_exclusive_create(client, wd):
    path = f"{wd}/x"
    with client.open(path, "x") as f:
        f.write("once")
    with pytest.raises(FileExistsError):
        client.open(path, "x")
    with pytest.raises(FileExistsError):
        client.open(path, "xb")
    with client.open(path) as f:
        assert f.read() == b"once"


def test_w_truncates(client, wd):
    path = f"{wd}/w"
    with client.open(path, "wb") as f:
        f.write(b"long content")
    with client.open(path, "wb") as f:
        f.write(b"short")
    with client.open(path) as f:
        assert f.read() == b"short"


def test_mode_validation_and_unsupported_operations(client, wd):
    path = f"{wd}/m"
    for bad in ("rw", "rr", "bt", "z", "", "+"):
        with pytest.raises(ValueError):
            client.open(path, bad)
    with pytest.raises(ValueError):
        client.open(path, "w", buffering=0)  # unbuffered text
    with pytest.raises(ValueError):
        client.open(path, "wb", encoding="utf-8")
    with client.open(path, "wb") as f:
        with pytest.raises(io.UnsupportedOperation):
            f.fileno()
        with pytest.raises(io.UnsupportedOperation):
            f.read(1)
        assert not f.readable()
        assert not f.isatty()
    with client.open(path, "rb") as f:
        with pytest.raises(io.UnsupportedOperation):
            f.write(b"x")
        with pytest.raises(io.UnsupportedOperation):
            f.truncate(0)
        with pytest.raises(OSError):  # UnsupportedOperation is an OSError too
            f.fileno()


def test_closed_file(client, wd):
    f = client.open(f"{wd}/c", "wb")
    f.write(b"x")
    f.close()
    assert f.closed
    f.close()  # idempotent
    for op in (lambda: f.write(b"y"), lambda: f.read(), lambda: f.tell(), lambda: f.seek(0), f.readable, f.flush):
        with pytest.raises(ValueError):
            op()


def test_pread_pwrite_and_fsync(client, wd):
    path = f"{wd}/p"
    with client.open(path, "w+b") as f:
        f.pwrite(b"hello world", 100)
        assert f.tell() == 0
        assert f.pread(5, 106) == b"world"
        buf = bytearray(5)
        assert f.preadinto(buf, 100) == 5 and buf == b"hello"
        f.fsync()
        assert f.stat().st_size == 111
        assert f.pread(10, 0) == bytes(10)  # the hole reads as zeros


def test_write_accepts_any_buffer(client, wd):
    import array

    path = f"{wd}/buf"
    a = array.array("I", range(1000))
    with client.open(path, "wb") as f:
        assert f.write(memoryview(b"abcdef")[2:4]) == 2
        assert f.write(a) == 4000
        assert f.write(bytearray(b"z")) == 1
    with client.open(path) as f:
        assert f.read() == b"cd" + a.tobytes() + b"z"


def test_threads_share_a_client(client, wd):
    import threading

    data = payload(1 * MiB + 17)
    with client.open(f"{wd}/shared", "wb") as f:
        f.write(data)
    errors = []

    def reader(k):
        try:
            for _ in range(4):
                with client.open(f"{wd}/shared") as f:
                    buf = bytearray(len(data))
                    assert f.readinto(buf) == len(data)
                    assert buf == data
                client.stat(f"{wd}/shared")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
