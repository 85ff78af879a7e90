//! Error reports. One format for every kind of misuse:
//!
//! ```text
//! ==PID== nevermore: ERROR: <kind> on address 0x<addr> (thread <tid>)
//! ==PID==   <operation> of 0x<addr>: <what is wrong>
//! ==PID==   object 0x<start> of <size> bytes, address is at offset <off>   (when known)
//! ==PID== nevermore: aborting                      (or: exiting with status N)
//! ```
//!
//! Reports are formatted into a stack buffer and written with one `write(2)`, so they never
//! allocate and lines of concurrent reports never interleave.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicI32, Ordering};

use crate::{config, sys};

/// What went wrong. The names are part of the documented report format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    HeapBufferOverflow,
    DoubleFree,
    InvalidFree,
    InvalidPointer,
    HeapUseAfterFree,
    WildAccess,
    OutOfMemory,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::HeapBufferOverflow => "heap-buffer-overflow",
            Kind::DoubleFree => "double-free",
            Kind::InvalidFree => "invalid-free",
            Kind::InvalidPointer => "invalid-pointer",
            Kind::HeapUseAfterFree => "heap-use-after-free",
            Kind::WildAccess => "wild-access",
            Kind::OutOfMemory => "out-of-memory",
        }
    }
}

/// The heap object a report is about, when one is known.
#[derive(Clone, Copy, Debug)]
pub struct Object {
    pub start: usize,
    pub size: usize,
}

#[derive(Clone, Copy, Debug)]
pub struct Report {
    pub kind: Kind,
    /// The address the misuse is about (the freed pointer, the corrupted canary, ...).
    pub addr: usize,
    /// The API call that detected it (`free`, `realloc`, `operator delete`, ...).
    pub op: &'static str,
    /// One phrase saying what is wrong.
    pub what: &'static str,
    pub object: Option<Object>,
}

/// A fixed-capacity text buffer; output past its end is dropped.
pub struct Buf<const N: usize> {
    pub bytes: [u8; N],
    pub len: usize,
}

impl<const N: usize> Buf<N> {
    pub const fn new() -> Self {
        Buf { bytes: [0; N], len: 0 }
    }
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
    pub fn push_bytes(&mut self, b: &[u8]) {
        let n = b.len().min(N - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&b[..n]);
        self.len += n;
    }
}

impl<const N: usize> Write for Buf<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_bytes(s.as_bytes());
        Ok(())
    }
}

/// The report destination: -1 until first used; then stderr or the opened `report_path`.
static OUT_FD: AtomicI32 = AtomicI32::new(-1);

/// The descriptor reports and stats go to.
pub fn out_fd() -> i32 {
    let fd = OUT_FD.load(Ordering::Acquire);
    if fd >= 0 {
        return fd;
    }
    let mut fd = 2;
    if let Some(path) = crate::options().report_path {
        let mut p = Buf::<4096>::new();
        p.push_bytes(path);
        if p.len < 4096 {
            p.bytes[p.len] = 0;
            // SAFETY: `p` holds a NUL-terminated path.
            let f = unsafe {
                libc::open(
                    p.bytes.as_ptr() as *const libc::c_char,
                    libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC,
                    0o644,
                )
            };
            if f >= 0 {
                fd = sys::move_fd_high(f);
            } else {
                let mut m = Buf::<256>::new();
                let _ = write!(m, "nevermore: cannot open report_path (errno {}); reporting to stderr\n", sys::errno());
                sys::write_all(2, m.as_bytes());
            }
        }
    }
    match OUT_FD.compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => fd,
        Err(other) => {
            if fd != 2 {
                sys::close(fd);
            }
            other
        }
    }
}

/// Formats a report into `b` (the exact text the process prints).
pub fn format(b: &mut impl Write, r: &Report, pid: u32, tid: u32, action: Option<u8>) {
    let _ = writeln!(b, "=={pid}== nevermore: ERROR: {} on address {:#x} (thread {tid})", r.kind.name(), r.addr);
    let _ = writeln!(b, "=={pid}==   {} of {:#x}: {}", r.op, r.addr, r.what);
    if let Some(o) = r.object {
        let _ = writeln!(
            b,
            "=={pid}==   object {:#x} of {} bytes; the address is at offset {} from its start",
            o.start,
            o.size,
            r.addr.wrapping_sub(o.start) as isize
        );
    }
    match action {
        None => {
            let _ = writeln!(b, "=={pid}== nevermore: aborting");
        }
        Some(code) => {
            let _ = writeln!(b, "=={pid}== nevermore: exiting with status {code}");
        }
    }
}

/// Prints the report and ends the process with the configured action (SIGABRT by default).
#[cold]
#[inline(never)]
pub fn fatal(r: Report) -> ! {
    let action = crate::options().exitcode;
    let mut b = Buf::<2048>::new();
    format(&mut b, &r, sys::getpid(), sys::gettid(), action);
    sys::write_all(out_fd(), b.as_bytes());
    match action {
        // SAFETY: `_exit` ends the process without running anything else.
        Some(code) => unsafe { libc::_exit(code as i32) },
        None => sys::die(),
    }
}

/// Prints a one-line message prefixed with `nevermore: ` to stderr.
pub fn say(args: fmt::Arguments<'_>) {
    let mut b = Buf::<512>::new();
    b.push_bytes(b"nevermore: ");
    let _ = b.write_fmt(args);
    b.push_bytes(b"\n");
    sys::write_all(2, b.as_bytes());
}

/// Reports an unusable `NEVERMORE_OPTIONS` and exits with status 1.
pub fn bad_options(e: &config::ParseError<'_>) -> ! {
    let mut b = Buf::<512>::new();
    b.push_bytes(b"nevermore: NEVERMORE_OPTIONS: ");
    match e {
        config::ParseError::UnknownKey(k) => {
            b.push_bytes(b"unknown option '");
            b.push_bytes(k);
            let _ = write!(b, "' (known: {})", config::KNOWN);
        }
        config::ParseError::BadValue { key, value, expected } => {
            b.push_bytes(b"bad value '");
            b.push_bytes(value);
            b.push_bytes(b"' for '");
            b.push_bytes(key);
            let _ = write!(b, "' (expected {expected})");
        }
        config::ParseError::MissingValue(item) => {
            b.push_bytes(b"'");
            b.push_bytes(item);
            b.push_bytes(b"' has no value (expected key=value)");
        }
    }
    b.push_bytes(b"\n");
    sys::write_all(2, b.as_bytes());
    // SAFETY: ending the process at once; nothing has been set up that needs tearing down.
    unsafe { libc::_exit(1) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_is_stable() {
        let mut b = Buf::<1024>::new();
        let r = Report {
            kind: Kind::HeapBufferOverflow,
            addr: 0x1018,
            op: "free",
            what: "the canary after the object was overwritten",
            object: Some(Object { start: 0x1000, size: 24 }),
        };
        format(&mut b, &r, 42, 43, None);
        let s = core::str::from_utf8(b.as_bytes()).unwrap();
        assert_eq!(
            s,
            "==42== nevermore: ERROR: heap-buffer-overflow on address 0x1018 (thread 43)\n\
             ==42==   free of 0x1018: the canary after the object was overwritten\n\
             ==42==   object 0x1000 of 24 bytes; the address is at offset 24 from its start\n\
             ==42== nevermore: aborting\n"
        );
    }

    #[test]
    fn buffer_truncates() {
        let mut b = Buf::<4>::new();
        let _ = write!(b, "abcdef");
        assert_eq!(b.as_bytes(), b"abcd");
    }
}
