//! EACCES end to end: the server enforces the exported tree's permissions with its own
//! credentials. Tests usually run as root, for whom every permission check passes, so
//! this test runs dafsd as `nobody` (via setpriv) when it is root, and as itself
//! otherwise.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Command, Stdio};

use dafs_client::dafs_proto::types::access_mask;
use dafs_client::dafs_proto::Status;
use dafs_client::{Client, ClientConfig, OpenOptions};

struct Server(std::process::Child, #[allow(dead_code)] BufReader<std::process::ChildStdout>);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn permission_denied_is_eacces() {
    let base = tempfile::tempdir().unwrap();
    std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let export = base.path().join("export");
    std::fs::create_dir(&export).unwrap();
    std::fs::set_permissions(&export, std::fs::Permissions::from_mode(0o777)).unwrap();
    // Owned by the test user, unreadable and unwritable for anyone else.
    std::fs::write(export.join("secret"), b"no").unwrap();
    std::fs::set_permissions(export.join("secret"), std::fs::Permissions::from_mode(0o600))
        .unwrap();
    std::fs::create_dir(export.join("locked")).unwrap();
    std::fs::set_permissions(export.join("locked"), std::fs::Permissions::from_mode(0o700))
        .unwrap();
    std::fs::write(export.join("open"), b"yes").unwrap();
    std::fs::set_permissions(export.join("open"), std::fs::Permissions::from_mode(0o644)).unwrap();

    let dafsd = env!("CARGO_BIN_EXE_dafsd");
    // SAFETY: geteuid has no preconditions.
    let is_root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if is_root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(dafsd);
        c
    } else {
        Command::new(dafsd)
    };
    cmd.arg(&export)
        .args(["--listen", "127.0.0.1:0", "--no-shm"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("start dafsd");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("dafsd listening on ")
        .unwrap_or_else(|| panic!("dafsd did not start: {line:?}"))
        .to_string();
    let _srv = Server(child, out);
    let mut c = Client::connect(&addr, ClientConfig::default()).unwrap();

    let st = |r: dafs_client::Result<dafs_client::File>| r.unwrap_err().status();
    if is_root {
        assert_eq!(
            st(c.open("secret", OpenOptions::read())),
            Some(Status::Access),
            "read of a 0600 file of another user"
        );
        assert_eq!(st(c.open("secret", OpenOptions::write_only())), Some(Status::Access));
        assert_eq!(
            c.access("secret", access_mask::READ | access_mask::WRITE).unwrap(),
            0,
            "ACCESS grants nothing"
        );
        assert_eq!(
            c.readdir("locked").unwrap_err().errno(),
            libc::EACCES,
            "listing a 0700 directory of another user"
        );
        assert_eq!(c.mkdir("locked/sub", 0o755).unwrap_err().status(), Some(Status::Access));
        assert_eq!(
            c.open("open", OpenOptions::write_only()).unwrap_err().errno(),
            libc::EACCES,
            "0644 is read-only for others"
        );
    }
    // What the server may do still works.
    let f = c.open("open", OpenOptions::read()).unwrap();
    let mut b = [0u8; 3];
    assert_eq!(c.pread(&f, &mut b, 0).unwrap(), 3);
    assert_eq!(&b, b"yes");
    assert_eq!(c.access("open", access_mask::READ).unwrap(), access_mask::READ);
    c.create_and_write("mine", b"ok", 0o600).unwrap();
}
