"""Namespace operations and stat results."""

import errno
import os
import stat

import dafs
import pytest


def test_stat_result(client, wd):
    path = f"{wd}/f"
    with client.open(path, "wb", perms=0o640) as f:
        f.write(b"x" * 1234)
    st = client.stat(path)
    assert isinstance(st, os.stat_result)
    assert stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640
    assert st.st_size == 1234 and st.st_nlink == 1 and st.st_ino != 0
    assert isinstance(st.st_mtime, float) and st.st_mtime > 1e9
    assert st.st_mtime_ns // 10**9 == int(st.st_mtime) == st[stat.ST_MTIME]
    assert st.st_blocks >= 0 and st.st_blksize > 0
    d = client.stat(wd)
    assert stat.S_ISDIR(d.st_mode)
    root = client.stat("/")
    assert stat.S_ISDIR(root.st_mode)


def test_mkdir_makedirs_listdir(client, wd):
    client.mkdir(f"{wd}/a")
    client.makedirs(f"{wd}/a/b/c/d")
    client.makedirs(f"{wd}/a/b/c/d", exist_ok=True)
    with pytest.raises(FileExistsError):
        client.makedirs(f"{wd}/a/b")
    for name in ("z", "y", "x"):
        client.open(f"{wd}/a/{name}", "wb").close()
    assert sorted(client.listdir(f"{wd}/a")) == ["b", "x", "y", "z"]
    assert client.listdir(f"{wd}/a/b/c/d") == []
    assert wd.strip("/") in client.listdir("/")
    client.open(f"{wd}/file", "wb").close()
    with pytest.raises(FileExistsError):
        client.makedirs(f"{wd}/file", exist_ok=True)  # exists, but not a directory
    with pytest.raises(NotADirectoryError):
        client.makedirs(f"{wd}/file/sub")


def test_many_directory_entries(client, wd):
    names = {f"entry-{i:04d}-{'n' * 40}" for i in range(600)}
    for n in names:
        client.mkdir(f"{wd}/{n}")
    assert set(client.listdir(wd)) == names


def test_rename_link_symlink(client, wd):
    with client.open(f"{wd}/a", "wb") as f:
        f.write(b"content")
    client.rename(f"{wd}/a", f"{wd}/b")
    assert not client.exists(f"{wd}/a") and client.exists(f"{wd}/b")
    client.link(f"{wd}/b", f"{wd}/hard")
    sb, sh = client.stat(f"{wd}/b"), client.stat(f"{wd}/hard")
    assert sb.st_ino == sh.st_ino and sb.st_nlink == 2
    client.symlink("b", f"{wd}/sym")
    assert client.readlink(f"{wd}/sym") == "b"
    assert stat.S_ISLNK(client.lstat(f"{wd}/sym").st_mode)
    assert stat.S_ISREG(client.stat(f"{wd}/sym").st_mode)
    with client.open(f"{wd}/sym") as f:
        assert f.read() == b"content"
    with client.open(f"{wd}/other", "wb") as f:
        f.write(b"other")
    client.replace(f"{wd}/other", f"{wd}/b")  # replaces the target
    with client.open(f"{wd}/b") as f:
        assert f.read() == b"other"


def test_rename_flags(client, wd):
    for name, data in (("a", b"aa"), ("b", b"bbb")):
        with client.open(f"{wd}/{name}", "wb") as f:
            f.write(data)
    client.mkdir(f"{wd}/d")
    with pytest.raises(FileExistsError):
        client.rename(f"{wd}/a", f"{wd}/b", flags=dafs.RENAME_NOREPLACE)
    assert client.stat(f"{wd}/b").st_size == 3
    client.rename(f"{wd}/a", f"{wd}/c", flags=dafs.RENAME_NOREPLACE)
    assert not client.exists(f"{wd}/a") and client.stat(f"{wd}/c").st_size == 2
    client.rename(f"{wd}/b", f"{wd}/c", flags=dafs.RENAME_EXCHANGE)
    assert client.stat(f"{wd}/b").st_size == 2 and client.stat(f"{wd}/c").st_size == 3
    client.rename(f"{wd}/b", f"{wd}/d", flags=dafs.RENAME_EXCHANGE)
    assert client.isdir(f"{wd}/b") and client.stat(f"{wd}/d").st_size == 2
    with pytest.raises(FileNotFoundError):
        client.rename(f"{wd}/d", f"{wd}/missing", flags=dafs.RENAME_EXCHANGE)
    for bad in (dafs.RENAME_NOREPLACE | dafs.RENAME_EXCHANGE, 4):
        with pytest.raises(OSError) as e:
            client.rename(f"{wd}/d", f"{wd}/x", flags=bad)
        assert e.value.errno == errno.EINVAL
    assert not client.exists(f"{wd}/x")


def test_truncate_chmod_times_remove(client, wd):
    path = f"{wd}/t"
    with client.open(path, "wb") as f:
        f.write(b"0123456789")
    client.truncate(path, 4)
    assert client.stat(path).st_size == 4
    client.truncate(path, 100)
    assert client.stat(path).st_size == 100
    client.chmod(path, 0o600)
    assert stat.S_IMODE(client.stat(path).st_mode) == 0o600
    client.set_times(path, 1_000_000_000_123_456_789, 1_500_000_000_987_654_321)
    st = client.stat(path)
    assert st.st_mtime_ns == 1_500_000_000_987_654_321
    assert st.st_atime_ns == 1_000_000_000_123_456_789
    assert client.isfile(path) and not client.isdir(path)
    client.remove(path)
    assert not client.exists(path) and not client.isfile(path)
    client.mkdir(f"{wd}/d")
    assert client.isdir(f"{wd}/d")
    client.rmdir(f"{wd}/d")
    assert not client.exists(f"{wd}/d")


def test_statfs_null_and_properties(client):
    s = client.statfs()
    assert s["total_bytes"] > 0 and s["block_size"] > 0 and s["name_max"] > 0
    client.null()
    assert client.inline_threshold > 0
    assert client.max_io_size >= client.inline_threshold
    assert client.slots >= 1 and client.session_id != 0
    st = client.stats()
    for key in ("requests", "inline_reads", "direct_reads", "off_direct_path", "errors", "transport"):
        assert key in st
    assert st["requests"] > 0


def test_path_like_arguments(client, wd, tmp_path):
    import pathlib

    p = pathlib.PurePosixPath(wd) / "pl"
    with client.open(p, "wb") as f:
        f.write(b"1")
    assert client.exists(p) and client.stat(os.fsencode(str(p))).st_size == 1
    with pytest.raises(TypeError):
        client.stat(3)
