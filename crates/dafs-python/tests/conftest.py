"""Fixtures: real dafsd processes on 127.0.0.1 with temporary exports.

The dafsd binary: $DAFSD, else $CARGO_TARGET_DIR/{release,debug}/dafsd, else
target/{release,debug}/dafsd in the repository.
"""

from __future__ import annotations

import os
import pathlib
import queue
import subprocess
import threading
import uuid

import pytest

import dafs

REPO = pathlib.Path(__file__).resolve().parents[3]
STARTUP_TIMEOUT = 30.0


def dafsd_binary() -> str:
    env = os.environ.get("DAFSD")
    if env:
        return env
    candidates = []
    target = os.environ.get("CARGO_TARGET_DIR")
    for base in ([pathlib.Path(target)] if target else []) + [REPO / "target"]:
        candidates += [base / "release" / "dafsd", base / "debug" / "dafsd"]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    raise RuntimeError(
        "dafsd not found: build it with `cargo build --release -p dafs-cli` or set DAFSD=/path/to/dafsd "
        f"(looked in: {', '.join(map(str, candidates))})"
    )


class Server:
    """A dafsd process. `addr` is host:port; `shm_url` the dafs+shm:// target (or None)."""

    def __init__(self, root: pathlib.Path, *extra: str, shm: bool = True):
        self.root = root
        self.export = root / "export"
        self.export.mkdir(parents=True, exist_ok=True)
        args = [dafsd_binary(), str(self.export), "--listen", "127.0.0.1:0"]
        if shm:
            args += ["--shm-socket", str(root / "dafsd.sock")]
        else:
            args += ["--no-shm"]
        args += list(extra)
        self.log = root / "dafsd.log"
        self._log = open(self.log, "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._log, text=True)
        lines: queue.Queue = queue.Queue()

        def pump():
            for line in self.proc.stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        self.addr = None
        self.shm_url = None
        try:
            while self.addr is None or (shm and self.shm_url is None):
                try:
                    line = lines.get(timeout=STARTUP_TIMEOUT)
                except queue.Empty:
                    raise RuntimeError(f"dafsd did not start within {STARTUP_TIMEOUT}s") from None
                if line is None:
                    raise RuntimeError(f"dafsd exited ({self.proc.wait()}): {self.log.read_text()}")
                if line.startswith("dafsd listening on "):
                    self.addr = line.split()[-1]
                elif line.startswith("shared memory: "):
                    self.shm_url = line.split()[-1]
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._pump.join(10)  # stdout reaches EOF when the process is gone
        self.proc.stdout.close()
        self._log.close()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp("dafsd"))
    yield s
    s.stop()


SECRET = b"correct horse battery staple"


@pytest.fixture(scope="session")
def secret_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("secret") / "dafs.secret"
    p.write_bytes(SECRET + b"\n")
    return p


@pytest.fixture(scope="session")
def secret_server(tmp_path_factory, secret_file):
    s = Server(tmp_path_factory.mktemp("dafsd-auth"), "--secret-file", str(secret_file))
    yield s
    s.stop()


@pytest.fixture
def fresh_server(tmp_path):
    """A server of the test's own (it may be killed)."""
    s = Server(tmp_path / "srv")
    yield s
    s.stop()


@pytest.fixture(params=["tcp", "shm"])
def provider(request):
    return request.param


def connect(server: Server, provider: str, **kw) -> dafs.Client:
    """provider "tcp": forced TCP; "shm": the default (auto), which must switch to
    shared memory for a server on this host."""
    c = dafs.Client(server.addr, provider="tcp" if provider == "tcp" else "auto", **kw)
    assert c.provider == provider, f"expected provider {provider}, got {c.provider}"
    return c


@pytest.fixture
def client(server, provider):
    c = connect(server, provider)
    yield c
    c.close()


@pytest.fixture
def wd(client):
    """A fresh directory (path inside the export) for one test."""
    d = f"/t-{uuid.uuid4().hex[:12]}"
    client.mkdir(d)
    return d
