//! Starting a program, sampling its memory every ~20 ms, bounding it in time, and collecting
//! its exit status and `rusage` with `wait4`.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::procmem;

/// Process groups of the programs running now, for [`install_interrupt_handler`].
static ACTIVE: [AtomicI32; 32] = [const { AtomicI32::new(0) }; 32];

fn register(pgid: i32) {
    for slot in &ACTIVE {
        if slot.compare_exchange(0, pgid, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            return;
        }
    }
}

fn unregister(pgid: i32) {
    for slot in &ACTIVE {
        let _ = slot.compare_exchange(pgid, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

extern "C" fn on_interrupt(sig: libc::c_int) {
    for slot in &ACTIVE {
        let pgid = slot.load(Ordering::Acquire);
        if pgid > 0 {
            // SAFETY: kill is async-signal-safe.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
    }
    // SAFETY: _exit is async-signal-safe.
    unsafe { libc::_exit(128 + sig) };
}

/// Programs run in their own process groups (so that a timeout can kill a whole server), so a
/// Ctrl-C on the terminal does not reach them: on SIGINT, SIGTERM or SIGHUP, kill them all and
/// exit.
pub fn install_interrupt_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only calls async-signal-safe functions.
        unsafe { libc::signal(sig, on_interrupt as *const () as libc::sighandler_t) };
    }
}

/// Sampling period of the memory of a process (see [`procmem`]).
pub const SAMPLE_PERIOD: Duration = Duration::from_millis(20);
/// A sample takes the sampler at most this share of its time (one sample, then at least
/// `SAMPLE_PAUSE` times as long asleep). Reading `/proc/PID/smaps` walks the page tables of
/// every mapping: for a nevermore heap with hundreds of mirrors that took ~30 ms (the soak at
/// 10^8), so that a sampler sleeping only what was left of 20 ms kept a processor busy all
/// the time, one that the program's own threads (or its sweep's helper task) then lacked on
/// a machine with two.
const SAMPLE_PAUSE: u32 = 4;

/// How long the sampler sleeps after a sample that took `spent`.
fn sample_pause(spent: Duration) -> Duration {
    SAMPLE_PERIOD.saturating_sub(spent).max(spent * SAMPLE_PAUSE).max(Duration::from_millis(1))
}

struct Shared {
    stop: AtomicBool,
    /// Milliseconds after the start at which the process group is killed.
    deadline_ms: AtomicU64,
    timed_out: AtomicBool,
    peak_rss_kib: AtomicU64,
    peak_phys_kib: AtomicU64,
}

/// A running program in its own process group.
pub struct Monitored {
    pid: i32,
    start: Instant,
    shared: Arc<Shared>,
    sampler: Option<JoinHandle<()>>,
}

/// How a program ended and what it used.
#[derive(Clone, Debug)]
pub struct Finished {
    /// Raw wait status.
    pub status: i32,
    pub wall: Duration,
    /// Peak RSS: the largest of the sampled Rss summed over the process tree, the sampled
    /// `VmHWM` of the process, and `ru_maxrss` of `wait4` when it exceeds this harness's own
    /// peak RSS (after a `vfork`-style spawn the child's `ru_maxrss` starts at the parent's RSS,
    /// so a smaller value may be the harness's, not the program's).
    pub peak_rss_kib: u64,
    /// Peak of the sampled physical memory (Pss with nevermore's pool counted whole, plus page
    /// tables; see [`procmem`]) summed over the process tree.
    pub peak_phys_kib: u64,
    pub timed_out: bool,
}

impl Finished {
    pub fn success(&self) -> bool {
        !self.timed_out && libc::WIFEXITED(self.status) && libc::WEXITSTATUS(self.status) == 0
    }

    /// Whether the program exited with 0 or died of `sig` (a server that was told to stop).
    pub fn ended_by(&self, sig: i32) -> bool {
        self.success() || (!self.timed_out && libc::WIFSIGNALED(self.status) && libc::WTERMSIG(self.status) == sig)
    }

    pub fn describe(&self) -> String {
        if self.timed_out {
            format!("timed out after {:.0} s", self.wall.as_secs_f64())
        } else if libc::WIFEXITED(self.status) {
            format!("exit status {}", libc::WEXITSTATUS(self.status))
        } else if libc::WIFSIGNALED(self.status) {
            let sig = libc::WTERMSIG(self.status);
            // SAFETY: strsignal returns a pointer to a static or thread-local string.
            let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) };
            format!("killed by signal {sig} ({})", name.to_string_lossy())
        } else {
            format!("wait status {:#x}", self.status)
        }
    }
}

/// Starts `cmd` in a new process group. With `sample`, a thread samples the memory of the
/// process (with `tree`, of all its descendants too) every [`SAMPLE_PERIOD`]. The whole group is
/// killed `timeout` after the start.
pub fn spawn(cmd: &mut Command, timeout: Duration, sample: bool, tree: bool) -> io::Result<Monitored> {
    cmd.process_group(0);
    let start = Instant::now();
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    register(pid);
    // The child is reaped below with wait4 (to get its rusage), never through `Child`.
    drop(child);
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        deadline_ms: AtomicU64::new(timeout.as_millis() as u64),
        timed_out: AtomicBool::new(false),
        peak_rss_kib: AtomicU64::new(0),
        peak_phys_kib: AtomicU64::new(0),
    });
    let s = Arc::clone(&shared);
    let sampler = std::thread::spawn(move || {
        while !s.stop.load(Ordering::Acquire) {
            let t = Instant::now();
            if sample {
                let u = procmem::sample(pid, tree);
                let hwm = procmem::vm_hwm(pid).unwrap_or(0);
                s.peak_rss_kib.fetch_max(u.rss_kib.max(hwm), Ordering::Relaxed);
                s.peak_phys_kib.fetch_max(u.phys_kib, Ordering::Relaxed);
            }
            if start.elapsed().as_millis() as u64 >= s.deadline_ms.load(Ordering::Acquire)
                && !s.timed_out.swap(true, Ordering::AcqRel)
            {
                // SAFETY: plain syscall. The process is not reaped before this thread is
                // joined, so the group id cannot have been reused.
                unsafe { libc::kill(-pid, libc::SIGKILL) };
            }
            std::thread::sleep(sample_pause(t.elapsed()));
        }
    });
    Ok(Monitored { pid, start, shared, sampler: Some(sampler) })
}

impl Monitored {
    /// True while the process has not exited (it is not reaped by this check).
    pub fn running(&self) -> bool {
        // SAFETY: waitid writes only into `info`.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let r = libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            r == 0 && info.si_pid() == 0
        }
    }

    /// Sends `sig` to the process and waits at most `grace` for it to end.
    pub fn stop(self, sig: i32, grace: Duration) -> Finished {
        let at = self.start.elapsed() + grace;
        self.shared.deadline_ms.fetch_min(at.as_millis() as u64, Ordering::AcqRel);
        // SAFETY: plain syscall; the process is not reaped yet.
        unsafe { libc::kill(self.pid, sig) };
        self.wait()
    }

    /// Waits for the process to end, kills what is left of its group, and reaps it.
    pub fn wait(mut self) -> Finished {
        // SAFETY: waitid/wait4 write only into the local structures.
        unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            while libc::waitid(libc::P_PID, self.pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT) != 0 {
                if io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
        }
        let wall = self.start.elapsed();
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = self.sampler.take() {
            let _ = h.join();
        }
        // SAFETY: the leader is a zombie, so the group id is still ours: this only ends
        // descendants left behind (workers of a crashed server).
        unsafe { libc::kill(-self.pid, libc::SIGKILL) };
        let mut status = 0;
        // SAFETY: as above.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: wait4 writes only into `status` and `ru`.
            let r = unsafe { libc::wait4(self.pid, &mut status, 0, &mut ru) };
            if r >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break;
            }
        }
        unregister(self.pid);
        let maxrss_kib = ru.ru_maxrss.max(0) as u64;
        // SAFETY: getrusage writes only into the local structure.
        let own_kib = unsafe {
            let mut me: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_SELF, &mut me);
            me.ru_maxrss.max(0) as u64
        };
        let maxrss_kib = if maxrss_kib > own_kib { maxrss_kib } else { 0 };
        Finished {
            status,
            wall,
            peak_rss_kib: self.shared.peak_rss_kib.load(Ordering::Relaxed).max(maxrss_kib),
            peak_phys_kib: self.shared.peak_phys_kib.load(Ordering::Relaxed),
            timed_out: self.shared.timed_out.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Monitored {
    fn drop(&mut self) {
        if let Some(h) = self.sampler.take() {
            // Dropped without wait(): kill and reap so that nothing is left running.
            self.shared.deadline_ms.store(0, Ordering::Release);
            self.shared.stop.store(true, Ordering::Release);
            let _ = h.join();
            // SAFETY: plain syscalls on our own child.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
                let mut status = 0;
                libc::waitpid(self.pid, &mut status, 0);
            }
            unregister(self.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sampler_sleeps_four_times_as_long_as_a_slow_sample_took() {
        let ms = Duration::from_millis;
        assert_eq!(sample_pause(ms(2)), ms(18));
        assert_eq!(sample_pause(ms(4)), ms(16));
        assert_eq!(sample_pause(ms(5)), ms(20));
        assert_eq!(sample_pause(ms(30)), ms(120));
        assert_eq!(sample_pause(Duration::ZERO), ms(20));
    }

    #[test]
    fn runs_and_times_out() {
        let f = spawn(Command::new("sh").args(["-c", "exit 3"]), Duration::from_secs(10), true, false).unwrap().wait();
        assert!(!f.success());
        assert_eq!(f.describe(), "exit status 3");
        let f = spawn(Command::new("sleep").arg("5"), Duration::from_millis(100), false, false).unwrap().wait();
        assert!(f.timed_out, "{f:?}");
        assert!(f.wall < Duration::from_secs(3));
    }

    #[test]
    fn stops_a_server() {
        let m = spawn(Command::new("sleep").arg("30"), Duration::from_secs(30), true, true).unwrap();
        assert!(m.running());
        std::thread::sleep(Duration::from_millis(100));
        let f = m.stop(libc::SIGTERM, Duration::from_secs(5));
        assert!(f.ended_by(libc::SIGTERM), "{}", f.describe());
        assert!(f.peak_rss_kib > 0 && f.peak_phys_kib > 0, "{f:?}");
    }
}
