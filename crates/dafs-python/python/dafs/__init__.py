"""dafs — Python client for the Direct Access File System (DAFS).

A thin layer over the Rust client library (``dafs._dafs``)::

    import dafs
    with dafs.Client("127.0.0.1:7420") as c:
        with c.open("notes.txt", "w", encoding="utf-8") as f:
            f.write("hello\\n")
        print(c.open("notes.txt", "r", encoding="utf-8").read())

* :class:`Client` — one session with a ``dafsd`` server (``"host:port"`` over TCP; a
  same-host server is reached over shared memory automatically unless
  ``provider="tcp"``; or ``"dafs+shm:///path/to/dafsd.sock"``).
* :meth:`Client.open` — :class:`File` objects are :class:`io.RawIOBase` (raw, unbuffered:
  every call is a round trip); ``buffering=`` / text modes give the same
  ``BufferedReader``/``BufferedWriter``/``BufferedRandom``/``TextIOWrapper`` wrappers the
  builtin :func:`open` does.
* :meth:`File.readinto` reads straight into the caller's buffer (bytearray, memoryview
  slice, numpy array, mmap...): no intermediate copy on the client.
* Registered memory (:meth:`Client.alloc_registered`, :meth:`Client.register`) and
  asynchronous I/O (:meth:`Client.completion_group`, :meth:`Client.submit_read`,
  :meth:`Client.submit_write`, :meth:`CompletionGroup.wait`).
* Errors are :class:`OSError` subclasses with ``errno`` set (FileNotFoundError,
  FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError, ...);
  a lost connection raises :class:`ConnectionError`; no free request slot (or no room
  in the completion group's queue) for an asynchronous submit raises
  :class:`BlockingIOError`.

Thread safety: a :class:`Client` may be shared by threads (calls are serialised on the
session; blocking calls release the GIL). A :class:`File` object's position is not
protected against concurrent use, as with the builtin file objects.
"""

from __future__ import annotations

import builtins
import errno as _errno
import io
import os
import stat as _stat
import warnings

from ._dafs import (
    RENAME_EXCHANGE,
    RENAME_NOREPLACE,
    Completion,
    CompletionGroup,
    Region,
    _Client,
    __version__,
)

__all__ = [
    "Client",
    "File",
    "Region",
    "CompletionGroup",
    "Completion",
    "DEFAULT_BUFFER_SIZE",
    "RENAME_NOREPLACE",
    "RENAME_EXCHANGE",
    "__version__",
]

#: Buffer size of the Buffered*/TextIOWrapper objects :meth:`Client.open` makes
#: (larger than :data:`io.DEFAULT_BUFFER_SIZE`: every raw call is a network round trip).
DEFAULT_BUFFER_SIZE = 256 * 1024

_FTYPE_BITS = {
    1: _stat.S_IFREG,
    2: _stat.S_IFDIR,
    3: _stat.S_IFLNK,
    4: _stat.S_IFCHR,
    5: _stat.S_IFBLK,
    6: _stat.S_IFIFO,
    7: _stat.S_IFSOCK,
}


def _attr_to_stat(a) -> os.stat_result:
    ftype, mode, nlink, uid, gid, size, used, fileid, fsid, rdev, atime_ns, mtime_ns, ctime_ns = a
    st_mode = _FTYPE_BITS.get(ftype, 0) | mode
    return os.stat_result(
        (st_mode, fileid, fsid, nlink, uid, gid, size, atime_ns // 10**9, mtime_ns // 10**9, ctime_ns // 10**9),
        {
            "st_atime": atime_ns / 1e9,
            "st_mtime": mtime_ns / 1e9,
            "st_ctime": ctime_ns / 1e9,
            "st_atime_ns": atime_ns,
            "st_mtime_ns": mtime_ns,
            "st_ctime_ns": ctime_ns,
            "st_blocks": (used + 511) // 512,
            "st_blksize": 4096,
            "st_rdev": rdev,
        },
    )


def _path(p) -> str:
    p = os.fspath(p)
    if isinstance(p, bytes):
        p = os.fsdecode(p)
    if not isinstance(p, str):
        raise TypeError(f"expected str, bytes or os.PathLike, not {type(p).__name__}")
    return p


class Client:
    """One session with a dafsd server.

    ``target`` is ``"host:port"`` or ``"dafs+shm:///path/to/socket"``.

    Keyword arguments:
      secret / secret_file: shared secret (bytes/str, or a file whose trailing newline is
        stripped, like ``dafsd --secret-file``) for HMAC authentication.
      provider: ``"auto"`` (shared memory when the server runs on this host, else TCP),
        ``"tcp"``, or ``"shm"`` (like auto, but fail unless shared memory is used).
      slots: outstanding requests to ask for (the server may grant fewer).
      export: export name ("" = the server's default export).
      client_id, connect_timeout (seconds).
      reconnect: when the connection breaks, reconnect, re-bind the session and resend
        what was in flight (exactly once, through the server's reply cache); default True.
      reconnect_timeout: seconds to keep trying (default 30).
    """

    def __init__(
        self,
        target,
        *,
        secret=None,
        secret_file=None,
        provider="auto",
        slots=None,
        export="",
        client_id=None,
        connect_timeout=None,
        reconnect=True,
        reconnect_timeout=None,
    ):
        if secret is not None and secret_file is not None:
            raise ValueError("give secret or secret_file, not both")
        if secret_file is not None:
            with builtins.open(secret_file, "rb") as fh:
                secret = fh.read()
            if secret.endswith(b"\n"):
                secret = secret[:-1]
        elif isinstance(secret, str):
            secret = secret.encode()
        elif secret is not None:
            secret = bytes(secret)
        self.target = str(target)
        self._c = _Client(self.target, secret, provider, slots, export, client_id, connect_timeout, reconnect, reconnect_timeout)

    # ------------------------------------------------------------------ session

    def close(self) -> None:
        """End the session: waits for in-flight asynchronous I/O, unregisters regions and
        closes open files. Raises BufferError while a memoryview/array of a registered
        region is alive. Idempotent."""
        self._c.close()

    @property
    def closed(self) -> bool:
        return self._c.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        state = "closed" if self.closed else f"provider={self.provider}"
        return f"<dafs.Client {self.target} {state}>"

    @property
    def inline_threshold(self) -> int:
        """I/O of registered memory (regions) up to this many bytes travels inline in
        messages; larger I/O is placed directly into (or pulled from) the region."""
        return self._c.inline_threshold

    @property
    def inline_threshold_unregistered(self) -> int:
        """The same for other memory (bytes, bytearray, file reads and writes): at least
        16 KiB, since a direct transfer of such memory registers it first."""
        return self._c.inline_threshold_unregistered

    @property
    def max_io_size(self) -> int:
        """Largest single asynchronous I/O (blocking calls split larger ones)."""
        return self._c.max_io_size

    @property
    def slots(self) -> int:
        """Requests the server lets this session have in flight at once."""
        return self._c.slots

    @property
    def max_msg_size(self) -> int:
        return self._c.max_msg_size

    @property
    def provider(self) -> str:
        """"tcp" or "shm"."""
        return self._c.provider

    @property
    def session_id(self) -> int:
        return self._c.session_id

    @property
    def session_lost(self):
        """None while the session works; else why it was lost: ``"BadSession"`` (its
        lease expired, the server restarted, an administrator ended it) or ``"Fenced"``.
        Every call then raises OSError (ENOTCONN / EPERM) until :meth:`reestablish`."""
        return self._c.session_lost

    def reestablish(self) -> None:
        """Start a new session after the old one was lost and re-open every open file
        by its path (positions kept; creation/truncation not repeated). Registered regions
        stay registered; locks of the old session are gone."""
        self._c.reestablish()

    def stats(self) -> dict:
        """Counters: requests, inline/direct reads and writes and bytes, off_direct_path
        (large I/O into unregistered memory), slot_waits, errors, reconnects,
        retransmits, stale_replies, and ``transport``."""
        return self._c.stats()

    def statfs(self) -> dict:
        return self._c.statfs()

    def null(self) -> None:
        """A NULL round trip (latency probe)."""
        self._c.null()

    # ------------------------------------------------------------------ files

    def open(
        self,
        path,
        mode="rb",
        buffering=None,
        encoding=None,
        errors=None,
        newline=None,
        *,
        perms=0o644,
    ):
        """Open a file, like the builtin :func:`open`.

        Modes: ``r``, ``w`` (create, truncate), ``a`` (create, append), ``x`` (create,
        must not exist), each optionally with ``+`` (read and write) and ``b``/``t``.

        ``buffering``: ``None`` (the default) gives a raw, unbuffered :class:`File` in
        binary mode and a buffered ``TextIOWrapper`` in text mode; ``0`` a raw
        :class:`File` (binary only); ``1`` line buffering (text only); ``-1`` or ``> 1``
        an ``io.BufferedReader``/``BufferedWriter``/``BufferedRandom`` of
        :data:`DEFAULT_BUFFER_SIZE` (or that many) bytes, wrapped in an
        ``io.TextIOWrapper`` in text mode. ``perms``: permission bits of a created file.

        Append mode writes atomically at the end of the file: the server picks the
        offset at the moment of each write, so appends from several clients (or objects)
        at once never overwrite each other (each write of up to ``max_io_size`` bytes
        stays contiguous).
        """
        if not isinstance(mode, str):
            raise TypeError(f"open() argument 'mode' must be str, not {type(mode).__name__}")
        modes = set(mode)
        if modes - set("axrwb+t") or len(mode) > len(modes):
            raise ValueError(f"invalid mode: {mode!r}")
        creating, reading, writing, appending = ("x" in modes), ("r" in modes), ("w" in modes), ("a" in modes)
        updating, text, binary = ("+" in modes), ("t" in modes), ("b" in modes)
        if text and binary:
            raise ValueError("can't have text and binary mode at once")
        if creating + reading + writing + appending != 1:
            raise ValueError("must have exactly one of create/read/write/append mode")
        if binary and encoding is not None:
            raise ValueError("binary mode doesn't take an encoding argument")
        if binary and errors is not None:
            raise ValueError("binary mode doesn't take an errors argument")
        if binary and newline is not None:
            raise ValueError("binary mode doesn't take a newline argument")
        if buffering is None:
            buffering = 0 if binary else -1
        if not isinstance(buffering, int):
            raise TypeError("buffering must be an int or None")
        if binary and buffering == 1:
            warnings.warn(
                "line buffering (buffering=1) isn't supported in binary mode, the default buffer size will be used",
                RuntimeWarning,
                2,
            )
            buffering = -1
        if buffering == 0 and not binary:
            raise ValueError("can't have unbuffered text I/O")
        kind = "x" if creating else "r" if reading else "w" if writing else "a"
        raw = File(self, path, kind + ("+" if updating else ""), perms=perms)
        try:
            if buffering == 0:
                return raw
            line_buffering = buffering == 1
            size = DEFAULT_BUFFER_SIZE if buffering < 0 or buffering == 1 else buffering
            if updating:
                buffer = io.BufferedRandom(raw, size)
            elif reading:
                buffer = io.BufferedReader(raw, size)
            else:
                buffer = io.BufferedWriter(raw, size)
            if binary:
                return buffer
            encoding = io.text_encoding(encoding)
            wrapper = io.TextIOWrapper(buffer, encoding, errors, newline, line_buffering)
            wrapper.mode = mode
            return wrapper
        except BaseException:
            raw.close()
            raise

    # ------------------------------------------------------------------ namespace

    def stat(self, path, *, follow_symlinks=True) -> os.stat_result:
        """``os.stat_result`` of a path (``st_mode`` includes the file type bits)."""
        return _attr_to_stat(self._c.stat(_path(path), follow_symlinks))

    def lstat(self, path) -> os.stat_result:
        return self.stat(path, follow_symlinks=False)

    def exists(self, path) -> bool:
        """Whether the path exists (following symlinks). Connection errors propagate."""
        try:
            self._c.stat(_path(path), True)
        except ConnectionError:
            raise
        except OSError:
            return False
        return True

    def isdir(self, path) -> bool:
        try:
            return _stat.S_ISDIR(self.stat(path).st_mode)
        except ConnectionError:
            raise
        except OSError:
            return False

    def isfile(self, path) -> bool:
        try:
            return _stat.S_ISREG(self.stat(path).st_mode)
        except ConnectionError:
            raise
        except OSError:
            return False

    def listdir(self, path="/") -> list[str]:
        """Names in a directory (without "." and ".."), in server order."""
        return [os.fsdecode(name) for name, _fileid, _ftype in self._c.readdir(_path(path)) if name not in (b".", b"..")]

    def mkdir(self, path, mode=0o755) -> None:
        self._c.mkdir(_path(path), mode)

    def makedirs(self, path, mode=0o755, exist_ok=False) -> None:
        """Create a directory and any missing parents, like :func:`os.makedirs`."""
        parts = [p for p in _path(path).split("/") if p and p != "."]
        if not parts:
            if exist_ok:
                return
            raise FileExistsError(_errno.EEXIST, os.strerror(_errno.EEXIST), _path(path))
        cur = ""
        for i, part in enumerate(parts):
            cur = f"{cur}/{part}"
            last = i == len(parts) - 1
            try:
                self._c.mkdir(cur, mode)
            except FileExistsError:
                # An existing parent that is not a directory makes the next mkdir fail
                # with NotADirectoryError, as with os.makedirs.
                if last and (not exist_ok or not self.isdir(cur)):
                    raise

    def remove(self, path) -> None:
        """Remove a file (not a directory)."""
        self._c.remove(_path(path))

    unlink = remove

    def rmdir(self, path) -> None:
        self._c.rmdir(_path(path))

    def rename(self, src, dst, *, flags=0) -> None:
        """Rename ``src`` to ``dst``, replacing ``dst`` as :func:`os.rename` does on Linux.
        ``flags`` are those of Linux ``renameat2``: :data:`RENAME_NOREPLACE` (raise
        FileExistsError if ``dst`` exists) or :data:`RENAME_EXCHANGE` (swap the two names;
        FileNotFoundError if either is missing). Other values raise OSError(EINVAL)."""
        self._c.rename(_path(src), _path(dst), flags)

    def replace(self, src, dst) -> None:
        self._c.rename(_path(src), _path(dst), 0)

    def link(self, src, dst) -> None:
        """Hard link: ``dst`` names the same file as ``src``."""
        self._c.link(_path(src), _path(dst))

    def symlink(self, target, link_path) -> None:
        """Create ``link_path`` pointing to ``target`` (``os.symlink`` argument order)."""
        self._c.symlink(_path(target), _path(link_path))

    def readlink(self, path) -> str:
        return os.fsdecode(self._c.readlink(_path(path)))

    def truncate(self, path, length: int) -> None:
        self._c.truncate(_path(path), length)

    def chmod(self, path, mode: int) -> None:
        self._c.chmod(_path(path), mode)

    def set_times(self, path, atime_ns: int, mtime_ns: int) -> None:
        """Set access and modification times (nanoseconds since the epoch)."""
        self._c.set_times(_path(path), atime_ns, mtime_ns)

    # ------------------------------------------------------------------ registered memory

    def alloc_registered(self, size: int) -> Region:
        """``size`` bytes of zeroed memory registered for direct placement. The Region
        supports the buffer protocol (``memoryview(region)``), ``len()``, ``read()``,
        ``write()``, ``close()`` and ``with``."""
        return self._c.alloc_registered(size)

    def register(self, buffer) -> Region:
        """Register the memory of a writable, C-contiguous buffer (bytearray, numpy
        array, ...). It stays exported (cannot be resized or freed) until the region is
        closed. Do not touch it while asynchronous I/O naming the region is in flight."""
        return self._c.register(buffer)

    # ------------------------------------------------------------------ asynchronous I/O

    def completion_group(self) -> CompletionGroup:
        """A new completion group (a context manager; ``close()`` waits for its
        in-flight requests). Raises OSError (EMFILE) when 1024 groups are open already."""
        return self._c.completion_group()

    def submit_read(self, file, offset, region, region_offset=0, length=None, user_data=0, cg=None) -> int:
        """Start reading ``length`` bytes (default: the rest of the region) at file
        ``offset`` into ``region[region_offset:]``; complete on ``cg``. Returns the request
        id. Raises BlockingIOError when all slots are busy or the group's completion queue
        is full (reap completions, retry) and BufferError while the region's buffer is
        exported."""
        fid, length = self._io_args(file, region, region_offset, length, cg)
        return self._c.submit_read(fid, offset, region, region_offset, length, user_data, cg)

    def submit_write(self, file, offset, region, region_offset=0, length=None, user_data=0, cg=None) -> int:
        """Start writing ``region[region_offset:region_offset+length]`` at file ``offset``;
        see :meth:`submit_read`."""
        fid, length = self._io_args(file, region, region_offset, length, cg)
        return self._c.submit_write(fid, offset, region, region_offset, length, user_data, cg)

    def _io_args(self, file, region, region_offset, length, cg):
        if cg is None:
            raise TypeError("a completion group is required: cg=client.completion_group()")
        if not isinstance(file, File):
            raw = getattr(file, "raw", None)  # a BufferedReader/Writer/Random around one
            if not isinstance(raw, File):
                raise TypeError(f"expected a dafs File, not {type(file).__name__}")
            file.flush()  # asynchronous I/O bypasses the buffer: send buffered writes first
            file = raw
        if file._client is not self:
            raise ValueError("the file belongs to another client")
        file._check_open()
        if length is None:
            length = len(region) - region_offset
        return file._fid, length


class File(io.RawIOBase):
    """An open dafs file: an :class:`io.RawIOBase` (unbuffered; each call is one request,
    large ones split and pipelined by the client library).

    ``readinto(b)`` reads straight into ``b``'s memory. ``fileno()`` raises
    :class:`io.UnsupportedOperation`: there is no kernel file descriptor. Made by
    :meth:`Client.open` (``mode`` here is one of r, r+, w, w+, a, a+, x, x+).
    """

    _MODES = {
        #       read   write  create excl   trunc  append  .mode
        "r": (True, False, False, False, False, False, "rb"),
        "r+": (True, True, False, False, False, False, "rb+"),
        "w": (False, True, True, False, True, False, "wb"),
        "w+": (True, True, True, False, True, False, "rb+"),
        "a": (False, True, True, False, False, True, "ab"),
        "a+": (True, True, True, False, False, True, "ab+"),
        "x": (False, True, True, True, False, False, "xb"),
        "x+": (True, True, True, True, False, False, "xb+"),
    }

    def __init__(self, client: Client, path, mode="r", *, perms=0o644):
        super().__init__()
        self._fid = None
        key = mode.replace("b", "")
        if key not in self._MODES:
            raise ValueError(f"invalid mode: {mode!r}")
        read, write, create, excl, trunc, append, self.mode = self._MODES[key]
        self.name = _path(path)
        self._client = client
        fid, size = client._c.open(self.name, read, write, create, excl, trunc, perms, append)
        self._fid = fid
        self._readable, self._writable, self._append = read, write, append
        self._pos = size if append else 0
        self._end = size  # where the next append goes

    def __repr__(self):
        state = " closed" if self.closed else ""
        return f"<dafs.File name={self.name!r} mode={self.mode!r}{state}>"

    def _check_open(self):
        if self.closed or self._fid is None:
            raise ValueError("I/O operation on closed file.")

    def readable(self) -> bool:
        self._check_open()
        return self._readable

    def writable(self) -> bool:
        self._check_open()
        return self._writable

    def seekable(self) -> bool:
        self._check_open()
        return True

    def fileno(self):
        raise io.UnsupportedOperation("dafs files have no file descriptor")

    def isatty(self) -> bool:
        self._check_open()
        return False

    def _check_readable(self):
        self._check_open()
        if not self._readable:
            raise io.UnsupportedOperation("File not open for reading")

    def _check_writable(self):
        self._check_open()
        if not self._writable:
            raise io.UnsupportedOperation("File not open for writing")

    def readinto(self, b) -> int:
        """Read up to ``len(b)`` bytes at the position straight into ``b`` (any
        writable C-contiguous buffer). Returns the count (0 at end of file)."""
        self._check_readable()
        n = self._client._c.pread_into(self._fid, b, self._pos)
        self._pos += n
        return n

    def read(self, size=-1) -> bytes:
        self._check_readable()
        if size is None or size < 0:
            return self.readall()
        data = self._client._c.pread(self._fid, size, self._pos)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        self._check_readable()
        size = self._client._c.fstat(self._fid)[5]
        chunks = []
        if size > self._pos:
            chunks.append(self.read(size - self._pos))
        while True:  # the file may have grown since the fstat
            more = self.read(DEFAULT_BUFFER_SIZE)
            if not more:
                break
            chunks.append(more)
        return b"".join(chunks)

    def pread(self, size: int, offset: int) -> bytes:
        """Read at ``offset`` without moving the position."""
        self._check_readable()
        return self._client._c.pread(self._fid, size, offset)

    def preadinto(self, b, offset: int) -> int:
        """readinto at ``offset`` without moving the position."""
        self._check_readable()
        return self._client._c.pread_into(self._fid, b, offset)

    def write(self, b) -> int:
        """Write all of ``b`` (any C-contiguous buffer) at the position (in append mode:
        at the end, see :meth:`Client.open`). Returns ``len(b)`` in bytes."""
        self._check_writable()
        if self._append:
            # Atomic append: the server picks the offset (the end of file right now,
            # whoever else is appending) and tells us where the data went.
            n = memoryview(b).nbytes
            off = self._client._c.append(self._fid, b) if n else self._end
            self._end = off + n
            self._pos = self._end
            return n
        off = self._pos
        n = self._client._c.pwrite(self._fid, b, off)
        self._pos = off + n
        self._end = max(self._end, self._pos)
        return n

    def pwrite(self, b, offset: int) -> int:
        """Write at ``offset`` without moving the position."""
        self._check_writable()
        n = self._client._c.pwrite(self._fid, b, offset)
        self._end = max(self._end, offset + n)
        return n

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._check_open()
        if whence == os.SEEK_SET:
            pos = offset
        elif whence == os.SEEK_CUR:
            pos = self._pos + offset
        elif whence == os.SEEK_END:
            pos = self._client._c.fstat(self._fid)[5] + offset
        else:
            raise ValueError(f"invalid whence ({whence}, should be 0, 1 or 2)")
        if pos < 0:
            raise OSError(_errno.EINVAL, os.strerror(_errno.EINVAL))
        self._pos = pos
        return pos

    def tell(self) -> int:
        self._check_open()
        return self._pos

    def truncate(self, size=None) -> int:
        self._check_writable()
        if size is None:
            size = self._pos
        if size < 0:
            raise OSError(_errno.EINVAL, os.strerror(_errno.EINVAL))
        self._client._c.ftruncate(self._fid, size)
        self._end = size
        return size

    def flush(self) -> None:
        """Nothing to flush: every write is sent when it is made (use :meth:`fsync`
        for durability)."""
        super().flush()  # raises ValueError when closed

    def fsync(self) -> None:
        """Make the file's data durable on the server (COMMIT)."""
        self._check_open()
        self._client._c.fsync(self._fid)

    def stat(self) -> os.stat_result:
        """Fresh attributes of the open file."""
        self._check_open()
        return _attr_to_stat(self._client._c.fstat(self._fid))

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        finally:
            fid, self._fid = self._fid, None
            if fid is not None:
                try:
                    self._client._c.close_file(fid)
                except ConnectionError:
                    pass  # the session is gone, and with it the open file
