//! Bounded spin, then sleep. On this class of machine waking a sleeping thread on the
//! other vCPU costs ~20 us, a busy-polled round trip well under that; pure busy polling
//! collapses when both vCPUs are contended. So a waiter first polls for at most
//! `spin` (cheap, catches fast replies), then sleeps in poll(2).

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags};

/// Default spin budget before sleeping; overridable with `DAFS_SPIN_US`.
pub const SPIN_DEFAULT: Duration = Duration::from_micros(50);
/// A budget growing back from zero starts here (doubling from zero would stay zero).
const SPIN_REGROW_FROM: Duration = Duration::from_micros(2);
/// A budget halved below this is turned off (zero) at once, instead of being halved on
/// through sub-microsecond spins.
const SPIN_BUDGET_MIN: Duration = Duration::from_micros(1);
/// Spin iterations between [`WaitSteps::spin_check`]s: the check may cost a syscall, an
/// iteration (a look at a ring) far less, so it runs on every 1024th only.
const SPIN_CHECK_EVERY: u32 = 1024;

pub fn spin_budget_from_env() -> Duration {
    std::env::var("DAFS_SPIN_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_micros)
        .unwrap_or(SPIN_DEFAULT)
}

/// [`sleep_on_fd`] over several descriptors (each with whether to wait for writability
/// too): returns when any is ready, or at the deadline.
pub fn sleep_on_fds(
    fds: &[(BorrowedFd<'_>, bool)],
    deadline: Option<Instant>,
) -> std::io::Result<()> {
    let timeout_ms: i32 = match deadline {
        None => -1,
        Some(d) => {
            let now = Instant::now();
            if d <= now {
                return Ok(());
            }
            ((d - now).as_micros().div_ceil(1000)).min(i32::MAX as u128) as i32
        }
    };
    let mut pfds: Vec<PollFd<'_>> = fds
        .iter()
        .map(|(fd, w)| {
            let flags = if *w { PollFlags::IN | PollFlags::OUT } else { PollFlags::IN };
            PollFd::from_borrowed_fd(*fd, flags)
        })
        .collect();
    match poll(&mut pfds, timeout_ms) {
        Ok(_) => Ok(()),
        Err(rustix::io::Errno::INTR) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Sleep until `fd` is readable (or writable, if `want_write`), or until `deadline`.
pub fn sleep_on_fd(
    fd: BorrowedFd<'_>,
    want_write: bool,
    deadline: Option<Instant>,
) -> std::io::Result<()> {
    sleep_on_fds(&[(fd, want_write)], deadline)
}

/// Adaptive spin budget. Spinning pays only when the awaited event comes within the
/// budget; when the machine is contended (the peer is not running), a spin burns the
/// CPU the peer needs and the wait ends in a sleep anyway. So the budget follows recent
/// waits: a wait that ended within the maximum budget (spinning would have caught it)
/// grows it back toward the maximum; a longer one halves it, down to zero (pure sleep,
/// like a blocking client). One long wait does not disable spinning for long: it takes a
/// few in a row.
#[derive(Debug, Clone, Copy)]
pub struct AdaptiveSpin {
    max: Duration,
    cur: Duration,
}

impl AdaptiveSpin {
    pub fn new(max: Duration) -> Self {
        AdaptiveSpin { max, cur: max }
    }
    /// The budget for the next wait.
    pub fn budget(&self) -> Duration {
        self.cur
    }
    pub fn max(&self) -> Duration {
        self.max
    }
    pub fn set_max(&mut self, max: Duration) {
        self.max = max;
        self.cur = self.cur.min(max);
        if self.cur.is_zero() {
            self.cur = max;
        }
    }
    /// Record how long a wait took in total (spin plus sleep).
    pub fn record(&mut self, waited: Duration) {
        if waited <= self.max {
            self.cur = (self.cur * 2).max(SPIN_REGROW_FROM).min(self.max);
        } else {
            self.cur /= 2;
            if self.cur < SPIN_BUDGET_MIN {
                self.cur = Duration::ZERO;
            }
        }
    }
}

/// One spin iteration. Deliberately not sched_yield: on a machine loaded with unrelated
/// CPU-bound work, a yield hands the CPU to them for a whole timeslice (milliseconds,
/// measured), while a thread that sleeps gets wakeup preemption. Contention is handled
/// by [`AdaptiveSpin`] turning spinning off instead.
#[inline]
pub fn spin_pause() {
    std::hint::spin_loop();
}

/// The provider-specific steps of a client's wait for its next message.
pub trait WaitSteps {
    /// Make progress without blocking (flush output, read input); the next complete
    /// message, if there is one.
    fn poll_once(&mut self) -> Result<Option<Vec<u8>>, crate::TransportError>;
    /// Called during the spin phase every so often, for checks too costly for every
    /// iteration (a dead peer seen on a side channel).
    fn spin_check(&mut self) -> Result<(), crate::TransportError> {
        Ok(())
    }
    /// About to sleep: arrange to be woken. False if input arrived meanwhile (poll again).
    fn prepare_sleep(&mut self) -> bool {
        true
    }
    /// Sleep until woken or `deadline`.
    fn sleep(&mut self, deadline: Option<Instant>) -> Result<(), crate::TransportError>;
    fn spin_and_stats(&mut self) -> (&mut AdaptiveSpin, &mut crate::TransportStats);
}

/// Bounded adaptive spin, then sleep, until a message arrives or `wait` runs out: the
/// one receive loop of every client provider.
pub fn wait_for_message<W: WaitSteps>(
    w: &mut W,
    wait: crate::Wait,
) -> Result<Option<Vec<u8>>, crate::TransportError> {
    let start = Instant::now();
    let deadline = match wait {
        crate::Wait::NoWait => Some(start),
        crate::Wait::Timeout(d) => Some(start + d),
        crate::Wait::Forever => None,
    };
    let spin_end = start + w.spin_and_stats().0.budget();
    let mut slept = false;
    let mut spins: u32 = 0;
    loop {
        if let Some(m) = w.poll_once()? {
            if wait != crate::Wait::NoWait {
                let (spin, stats) = w.spin_and_stats();
                spin.record(start.elapsed());
                if !slept {
                    stats.waits_spun += 1;
                }
            }
            return Ok(Some(m));
        }
        let now = Instant::now();
        if deadline.is_some_and(|d| now >= d) {
            return Ok(None);
        }
        if now < spin_end {
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(SPIN_CHECK_EVERY) {
                w.spin_check()?;
            }
            spin_pause();
            continue;
        }
        if !w.prepare_sleep() {
            continue;
        }
        w.spin_and_stats().1.waits_slept += 1;
        slept = true;
        w.sleep(deadline)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adaptive_spin_follows_waits() {
        let mut s = AdaptiveSpin::new(Duration::from_micros(50));
        assert_eq!(s.budget(), Duration::from_micros(50));
        for _ in 0..10 {
            s.record(Duration::from_micros(500));
        }
        assert_eq!(s.budget(), Duration::ZERO, "long waits turn spinning off");
        s.record(Duration::from_micros(5));
        assert!(s.budget() >= Duration::from_micros(2), "a short wait turns it back on");
        for _ in 0..10 {
            s.record(Duration::from_micros(5));
        }
        assert_eq!(s.budget(), Duration::from_micros(50));
        s.set_max(Duration::ZERO);
        assert_eq!(s.budget(), Duration::ZERO);
    }
}
