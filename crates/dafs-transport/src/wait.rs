//! Bounded spin, then sleep. On this class of machine waking a sleeping thread on the
//! other vCPU costs ~20 us, a busy-polled round trip well under that; pure busy polling
//! collapses when both vCPUs are contended. So a waiter first polls for at most
//! `spin` (cheap, catches fast replies), then sleeps in poll(2).

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};

/// Default spin budget before sleeping; overridable with `DAFS_SPIN_US`.
pub const SPIN_DEFAULT: Duration = Duration::from_micros(50);

pub fn spin_budget_from_env() -> Duration {
    std::env::var("DAFS_SPIN_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_micros)
        .unwrap_or(SPIN_DEFAULT)
}

/// Sleep until `fd` is readable (or writable, if `want_write`), or until `deadline`.
pub fn sleep_on_fd(fd: BorrowedFd<'_>, want_write: bool, deadline: Option<Instant>) -> std::io::Result<()> {
    let mut flags = PollFlags::IN;
    if want_write {
        flags |= PollFlags::OUT;
    }
    let timeout_ms: i32 = match deadline {
        None => -1,
        Some(d) => {
            let now = Instant::now();
            if d <= now {
                return Ok(());
            }
            // round up so we never spin on a sub-millisecond remainder
            ((d - now).as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32
        }
    };
    let mut fds = [PollFd::from_borrowed_fd(fd, flags)];
    match poll(&mut fds, timeout_ms) {
        Ok(_) => Ok(()),
        Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}
