//! Error reports. One format for every kind of misuse:
//!
//! ```text
//! ==PID== nevermore: ERROR: <kind> on address 0x<addr> (thread <tid>)
//! ==PID==   <operation> of 0x<addr>: <what is wrong>
//! ==PID==   object 0x<start> of <size> bytes, address is at offset <off>   (when known)
//! ==PID==     #0 0x<pc> <module>+0x<offset> (BuildId: <hex>)   (the faulting or calling stack;
//!                                                               the build id when the module has one)
//! ==PID==   freed by thread <tid> here:           (detect mode, when recorded)
//! ==PID==     #0 ...
//! ==PID==   previously allocated by thread <tid> here:
//! ==PID==     #0 ...
//! ==PID== nevermore: aborting                      (or: exiting with status N)
//! ```
//!
//! Offsets are those of the call instruction for return addresses (so `addr2line` on
//! `module` at `offset` names the calling line). With `report_format=json` a report is one JSON
//! object on one line instead (schema: `docs/report-schema.json`). Reports are formatted into
//! a static buffer owned by the reporting thread and written with one `write(2)`, so they never
//! allocate and concurrent reports never interleave.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

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
    SizeMismatch,
    AllocDeallocMismatch,
    MemoryLeak,
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
            Kind::SizeMismatch => "size-mismatch",
            Kind::AllocDeallocMismatch => "alloc-dealloc-mismatch",
            Kind::MemoryLeak => "memory-leak",
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
    /// The size the caller said the object has (sized `operator delete`, `free_sized`), when
    /// that is what is wrong.
    pub claimed: Option<usize>,
    /// The pointer the call was given, where `addr` is another address: the object `free` or
    /// `realloc` found overwritten (`addr` is the first byte written over), the buffer of a
    /// call that ran past its object (`addr` is the object's end). The operation's line names
    /// it, so that `free of 0x...` is the pointer the program freed.
    pub pointer: Option<usize>,
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

/// The opened `report_path`: its descriptor (-1 until opened) and its file (device, inode), to
/// tell when the program closed it or put a file of its own at its number (daemons close
/// every descriptor).
static OUT_FD: AtomicI32 = AtomicI32::new(-1);
static OUT_DEV: AtomicU64 = AtomicU64::new(0);
static OUT_INO: AtomicU64 = AtomicU64::new(0);
/// Set once the failure to open `report_path` was said.
static SAID_NO_FILE: AtomicBool = AtomicBool::new(false);

/// `report_path` made absolute at start-up (relative to the directory the program started in,
/// which a daemon may leave), and its length (0 until then).
static PATH: crate::GlobalCell<[u8; PATH_MAX]> = crate::GlobalCell::new([0; PATH_MAX]);
static PATH_LEN: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
const PATH_MAX: usize = 4096;

/// At start-up, with `report_path` set: makes the path absolute, and opens the file if it
/// exists, so that a daemon that later changes directory, drops privileges or closes every
/// descriptor still reports there. A file that does not exist yet is created at the first
/// report, by the process that has one: created here, it would belong to whoever started
/// first (a root launcher such as `setpriv` or `runuser`, whose program could then not
/// write it).
pub fn open_destination() {
    let Some(path) = crate::options().report_path else { return };
    // SAFETY: once, during initialisation, before any report can read it.
    let buf = unsafe { PATH.get_mut() };
    let mut len = 0;
    if path.first() != Some(&b'/') {
        // SAFETY: getcwd writes a NUL-terminated path of at most `buf.len()` bytes.
        if !unsafe { libc::getcwd(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) }.is_null() {
            len = buf.iter().position(|&c| c == 0).unwrap_or(0);
            if len > 0 && buf[len - 1] != b'/' {
                buf[len] = b'/';
                len += 1;
            }
        }
    }
    if len + path.len() >= buf.len() {
        return; // left as it is, and said at the first report
    }
    buf[len..len + path.len()].copy_from_slice(path);
    PATH_LEN.store(len + path.len(), Ordering::Release);
    // One that cannot be opened is said at the first report, by the process that has one (a
    // launcher that starts the program, and loads the library too, says nothing).
    if let Some(fd) = open_report_path(false) {
        adopt(-1, fd);
    }
}

/// The descriptor reports and stats go to: the file of `report_path` (created if missing),
/// opened again if the program closed or replaced it (and not under a seccomp filter, which
/// might kill the process for `open`), else stderr.
pub fn out_fd() -> i32 {
    if crate::options().report_path.is_none() {
        return 2;
    }
    let fd = OUT_FD.load(Ordering::Acquire);
    if fd >= 0 && is_report_file(fd) {
        return fd;
    }
    if crate::seccomp::filtered() {
        return 2;
    }
    let Some(new) = open_report_path(true) else {
        say_no_file();
        return 2;
    };
    adopt(fd, new)
}

/// Says once that `report_path` cannot be opened (`errno`).
fn say_no_file() {
    if !SAID_NO_FILE.swap(true, Ordering::Relaxed) {
        let mut m = Buf::<256>::new();
        let _ = writeln!(m, "nevermore: cannot open report_path (errno {}); reporting to stderr", sys::errno());
        sys::write_all(2, m.as_bytes());
    }
}

/// Makes `new` the report file in place of `old`; returns the descriptor to use. Two threads
/// reopening at once open the same file: the loser's copy is closed, and the file's identity
/// is the same either way.
fn adopt(old: i32, new: i32) -> i32 {
    let (dev, ino) = sys::file_id(new).unwrap_or((0, 0));
    OUT_DEV.store(dev, Ordering::Relaxed);
    OUT_INO.store(ino, Ordering::Relaxed);
    match OUT_FD.compare_exchange(old, new, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) => new,
        Err(other) => {
            sys::close(new);
            other
        }
    }
}

/// Whether reports go to the file of `report_path` (it is set and could be opened).
fn report_file_open() -> bool {
    crate::options().report_path.is_some() && OUT_FD.load(Ordering::Acquire) >= 0
}

/// Whether `fd` is the library's open `report_path` (its number, and still its file).
pub fn is_report_file(fd: i32) -> bool {
    sys::is_own(fd, OUT_FD.load(Ordering::Acquire), (OUT_DEV.load(Ordering::Relaxed), OUT_INO.load(Ordering::Relaxed)))
}

/// Opens the report file (the path made absolute at start-up, else the option as given) to
/// append reports to it, creating it if `create`; close-on-exec, at a high number.
fn open_report_path(create: bool) -> Option<i32> {
    let mut p = Buf::<{ PATH_MAX + 1 }>::new();
    match PATH_LEN.load(Ordering::Acquire) {
        // Written once at start-up, before PATH_LEN was published.
        n if n > 0 => p.push_bytes(&PATH.get()[..n]),
        _ => p.push_bytes(crate::options().report_path.unwrap_or(b"")),
    }
    if p.len >= PATH_MAX {
        sys::set_errno(libc::ENAMETOOLONG);
        return None;
    }
    p.bytes[p.len] = 0;
    let flags = libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC | if create { libc::O_CREAT } else { 0 };
    // `p` holds a NUL-terminated path.
    let f = sys::beyond_fd_limit(|| sys::open(p.bytes.as_ptr() as *const libc::c_char, flags, 0o644));
    (f >= 0).then(|| sys::move_fd_high(f))
}

/// The stacks of a report: where it happened, and (detect mode) who freed and allocated the
/// object. Frames are raw PCs; they are printed as `module+offset` for later symbolization.
#[derive(Clone, Copy, Default)]
pub struct Stacks<'a> {
    /// The faulting or calling stack (innermost first).
    pub here: &'a [usize],
    /// `here[0]` is the address of the faulting instruction (not a return address).
    pub exact_first: bool,
    /// (thread, frames) of the free and of the allocation, when recorded.
    pub freed: Option<(u32, &'a [u64])>,
    pub allocated: Option<(u32, &'a [u64])>,
    /// Why the free/allocation stacks are missing, when they are.
    pub note: Option<&'static str>,
}

/// A frame as (module path, offset to symbolize, module's build id). Return addresses are
/// moved back by one byte, into the call instruction, so that the offset names the calling line.
fn frame_site(pc: usize, ret: bool) -> Option<(&'static [u8], usize, &'static [u8])> {
    let m = crate::stack::module_of(pc)?;
    Some((m.name(), pc.wrapping_sub(m.base).wrapping_sub(ret as usize), m.build_id()))
}

/// Writes bytes as lower-case hexadecimal digits.
struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

fn text_frames(b: &mut impl Write, pid: u32, frames: impl Iterator<Item = usize>, exact_first: bool) {
    let mut any = false;
    for (i, pc) in frames.enumerate() {
        any = true;
        let _ = write!(b, "=={pid}==     #{i} {pc:#018x} ");
        match frame_site(pc, !(i == 0 && exact_first)) {
            Some((name, off, id)) => {
                let _ = write!(b, "{}+{off:#x}", Bytes(name));
                if !id.is_empty() {
                    let _ = write!(b, " (BuildId: {})", Hex(id));
                }
            }
            None => {
                let _ = write!(b, "<unknown module>");
            }
        }
        let _ = writeln!(b);
    }
    if !any {
        let _ = writeln!(b, "=={pid}==     (stack not recorded)");
    }
}

/// Writes bytes as text, lossily.
struct Bytes<'a>(&'a [u8]);

impl fmt::Display for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{fffd}")?;
            }
        }
        Ok(())
    }
}

/// Writes a JSON string literal.
struct Json<'a>(&'a [u8]);

impl fmt::Display for Json<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"")?;
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                match c {
                    '"' => f.write_str("\\\"")?,
                    '\\' => f.write_str("\\\\")?,
                    c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
                    c => f.write_char(c)?,
                }
            }
            if !chunk.invalid().is_empty() {
                f.write_str("\\ufffd")?;
            }
        }
        f.write_str("\"")
    }
}

fn json_frames(b: &mut impl Write, frames: impl Iterator<Item = usize>, exact_first: bool) {
    let _ = write!(b, "[");
    for (i, pc) in frames.enumerate() {
        if i > 0 {
            let _ = write!(b, ",");
        }
        let _ = write!(b, "{{\"pc\":\"{pc:#x}\",");
        match frame_site(pc, !(i == 0 && exact_first)) {
            Some((name, off, id)) => {
                let _ = write!(b, "\"module\":{},\"offset\":\"{off:#x}\",\"build_id\":", Json(name));
                let _ = if id.is_empty() { write!(b, "null}}") } else { write!(b, "\"{}\"}}", Hex(id)) };
            }
            None => {
                let _ = write!(b, "\"module\":null,\"offset\":null,\"build_id\":null}}");
            }
        }
    }
    let _ = write!(b, "]");
}

/// Formats a report into `b` (the exact text the process prints).
pub fn format(b: &mut impl Write, r: &Report, pid: u32, tid: u32, action: Option<u8>) {
    format_with(b, r, pid, tid, action, &Stacks::default())
}

/// Formats a report with its stacks (plain text).
pub fn format_with(b: &mut impl Write, r: &Report, pid: u32, tid: u32, action: Option<u8>, st: &Stacks<'_>) {
    text_head(b, r, pid, tid);
    if let Some(c) = r.claimed {
        let _ = writeln!(b, "=={pid}==   size given: {c} bytes");
    }
    if !st.here.is_empty() {
        text_frames(b, pid, st.here.iter().copied(), st.exact_first);
    }
    if let Some((t, f)) = st.freed {
        let _ = writeln!(b, "=={pid}==   freed by thread {t} here:");
        text_frames(b, pid, f.iter().map(|&x| x as usize), false);
    }
    if let Some((t, f)) = st.allocated {
        let _ = writeln!(b, "=={pid}==   previously allocated by thread {t} here:");
        text_frames(b, pid, f.iter().map(|&x| x as usize), false);
    }
    if let Some(n) = st.note {
        let _ = writeln!(b, "=={pid}==   {n}");
    }
    action_text(b, pid, action);
}

/// The first lines of a text report: the kind, the call and what is wrong, the object.
fn text_head(b: &mut impl Write, r: &Report, pid: u32, tid: u32) {
    let _ = writeln!(b, "=={pid}== nevermore: ERROR: {} on address {:#x} (thread {tid})", r.kind.name(), r.addr);
    let _ = writeln!(b, "=={pid}==   {} of {:#x}: {}", r.op, r.pointer.unwrap_or(r.addr), r.what);
    if let Some(o) = r.object {
        let _ = writeln!(
            b,
            "=={pid}==   object {:#x} of {} bytes; the address is at offset {} from its start",
            o.start,
            o.size,
            r.addr.wrapping_sub(o.start) as isize
        );
    }
}

/// The last line of a text report: what happens next.
fn action_text(b: &mut impl Write, pid: u32, action: Option<u8>) {
    let _ = match action {
        None => writeln!(b, "=={pid}== nevermore: aborting"),
        Some(code) => writeln!(b, "=={pid}== nevermore: exiting with status {code}"),
    };
}

/// The last fields of a JSON report, and its end: what happens next.
fn action_json(b: &mut impl Write, action: Option<u8>) {
    let _ = match action {
        None => writeln!(b, ",\"action\":\"abort\",\"exit_status\":null}}"),
        Some(code) => writeln!(b, ",\"action\":\"exit\",\"exit_status\":{code}}}"),
    };
}

/// Formats a report as one JSON object on one line (schema: docs/report-schema.json).
pub fn format_json(b: &mut impl Write, r: &Report, pid: u32, tid: u32, action: Option<u8>, st: &Stacks<'_>) {
    json_head(b, r, pid, tid, st);
    let _ = write!(b, ",\"leaked\":null");
    action_json(b, action);
}

/// A JSON report's fields up to `note`, after an opening brace.
fn json_head(b: &mut impl Write, r: &Report, pid: u32, tid: u32, st: &Stacks<'_>) {
    let _ = write!(
        b,
        "{{\"nevermore_report\":1,\"pid\":{pid},\"thread\":{tid},\"kind\":\"{}\",\"address\":\"{:#x}\",\"operation\":{},\"description\":{},\"mode\":\"{}\",\"object\":",
        r.kind.name(),
        r.addr,
        Json(r.op.as_bytes()),
        Json(r.what.as_bytes()),
        if crate::detect() { "detect" } else { "prevent" }
    );
    match r.object {
        Some(o) => {
            let _ = write!(
                b,
                "{{\"start\":\"{:#x}\",\"size\":{},\"offset\":{}}}",
                o.start,
                o.size,
                r.addr.wrapping_sub(o.start) as isize
            );
        }
        None => {
            let _ = write!(b, "null");
        }
    }
    match r.claimed {
        Some(c) => {
            let _ = write!(b, ",\"claimed_size\":{c}");
        }
        None => {
            let _ = write!(b, ",\"claimed_size\":null");
        }
    }
    match r.pointer {
        Some(p) => {
            let _ = write!(b, ",\"pointer\":\"{p:#x}\"");
        }
        None => {
            let _ = write!(b, ",\"pointer\":null");
        }
    }
    let _ = write!(b, ",\"stack\":");
    json_frames(b, st.here.iter().copied(), st.exact_first);
    for (key, v) in [("freed", st.freed), ("allocated", st.allocated)] {
        let _ = write!(b, ",\"{key}\":");
        match v {
            Some((t, f)) => {
                let _ = write!(b, "{{\"thread\":{t},\"stack\":");
                json_frames(b, f.iter().map(|&x| x as usize), false);
                let _ = write!(b, "}}");
            }
            None => {
                let _ = write!(b, "null");
            }
        }
    }
    let _ = write!(b, ",\"note\":");
    match st.note {
        Some(n) => {
            let _ = write!(b, "{}", Json(n.as_bytes()));
        }
        None => {
            let _ = write!(b, "null");
        }
    }
}

/// Leaks of one allocation stack (`leak`).
#[derive(Clone, Copy, Default)]
pub struct LeakGroup {
    /// The allocation stack's id in the depot (0: not recorded).
    pub stack: u32,
    pub thread: u32,
    pub bytes: u64,
    pub objects: u64,
    /// One of the objects, and its size.
    pub example: usize,
    pub example_size: usize,
}

/// Allocation stacks listed in a leak report (the ones that leaked the most bytes); the
/// others are summed up in one line.
pub const LEAK_GROUPS_SHOWN: usize = 10;

/// Reports the leaks found at exit (`groups`, the biggest first; `total`: bytes and objects)
/// as one `memory-leak` report, then ends the process with the configured action.
#[cold]
#[inline(never)]
pub fn leaks(groups: &[LeakGroup], total: (u64, u64)) -> ! {
    let action = crate::options().exitcode;
    let tid = sys::gettid();
    while REPORT_OWNER.compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed).is_err() {
        core::hint::spin_loop();
    }
    // SAFETY: this thread owns REPORT_OWNER, hence the buffer.
    let b = unsafe { &mut *REPORT_BUF.0.get() };
    b.len = 0;
    let pid = sys::getpid();
    let first = groups.first().copied().unwrap_or_default();
    let shown = &groups[..groups.len().min(LEAK_GROUPS_SHOWN)];
    let (rest_bytes, rest_objects) =
        groups[shown.len()..].iter().fold((0u64, 0u64), |(b, o), g| (b + g.bytes, o + g.objects));
    let d = &crate::stack::DEPOT;
    let r = Report {
        kind: Kind::MemoryLeak,
        addr: first.example,
        op: "exit",
        what: "live objects that no pointer leads to are left at exit",
        object: Some(Object { start: first.example, size: first.example_size }),
        claimed: None,
        pointer: None,
    };
    let out = |b: &mut Buf<32768>| {
        if let Some(fd) = crate::leak::own_output_fd() {
            sys::write_all(fd, b.as_bytes());
        }
        to_syslog(b.as_bytes());
        b.len = 0;
    };
    if crate::options().json {
        let st = Stacks {
            allocated: (first.stack != 0).then(|| (first.thread, d.get(first.stack))),
            note: (first.stack == 0).then_some("allocation stacks not recorded (stacks=0)"),
            ..Stacks::default()
        };
        json_head(b, &r, pid, tid, &st);
        let _ = write!(
            b,
            ",\"leaked\":{{\"bytes\":{},\"objects\":{},\"stacks\":{},\"groups\":[",
            total.0,
            total.1,
            groups.len()
        );
        for (i, g) in shown.iter().enumerate() {
            let _ = write!(
                b,
                "{}{{\"bytes\":{},\"objects\":{},\"example\":\"{:#x}\",\"example_size\":{},\"allocated\":",
                if i > 0 { "," } else { "" },
                g.bytes,
                g.objects,
                g.example,
                g.example_size
            );
            leak_event_json(b, g, d);
            let _ = write!(b, "}}");
            // The line is written in parts when it grows long: ten stacks of long module paths
            // do not fit the buffer at once.
            if b.len > b.bytes.len() / 2 {
                out(b);
            }
        }
        let _ = write!(b, "]}}");
        action_json(b, action);
    } else {
        text_head(b, &r, pid, tid);
        let _ = writeln!(
            b,
            "=={pid}==   leaked {} bytes in {} objects, from {} allocation stacks:",
            total.0,
            total.1,
            groups.len()
        );
        for g in shown {
            let _ = writeln!(
                b,
                "=={pid}==   leaked {} bytes in {} objects (one: {:#x} of {} bytes), allocated by thread {} here:",
                g.bytes, g.objects, g.example, g.example_size, g.thread
            );
            if g.stack == 0 {
                let _ = writeln!(b, "=={pid}==     (allocation stacks not recorded: stacks=0)");
            } else {
                text_frames(b, pid, d.get(g.stack).iter().map(|&x| x as usize), false);
            }
            // One write per group: a report with many stacks may not fit the buffer at once.
            out(b);
        }
        if shown.len() < groups.len() {
            let _ = writeln!(
                b,
                "=={pid}==   and {} more allocation stacks: {rest_bytes} bytes in {rest_objects} objects",
                groups.len() - shown.len()
            );
        }
        action_text(b, pid, action);
    }
    out(b);
    match action {
        // SAFETY: `_exit` ends the process without running anything else.
        Some(code) => unsafe { libc::_exit(code as i32) },
        None => sys::die(),
    }
}

/// `{"thread":..,"stack":[..]}` of a leak group's allocation, or null when not recorded.
fn leak_event_json(b: &mut impl Write, g: &LeakGroup, d: &crate::stack::Depot) {
    if g.stack == 0 {
        let _ = write!(b, "null");
    } else {
        let _ = write!(b, "{{\"thread\":{},\"stack\":", g.thread);
        json_frames(b, d.get(g.stack).iter().map(|&x| x as usize), false);
        let _ = write!(b, "}}");
    }
}

/// The report buffer: too big for a signal stack, so one static buffer, claimed by the first
/// reporting thread (reports are fatal; a second reporter waits for the first to finish).
struct ReportBuf(core::cell::UnsafeCell<Buf<32768>>);
// SAFETY: only the thread that owns `REPORT_OWNER` touches the buffer.
unsafe impl Sync for ReportBuf {}
static REPORT_BUF: ReportBuf = ReportBuf(core::cell::UnsafeCell::new(Buf::new()));
static REPORT_OWNER: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);

/// Prints the report and ends the process with the configured action (SIGABRT by default).
#[cold]
#[inline(never)]
pub fn fatal(r: Report) -> ! {
    fatal_at(None, r)
}

/// `fatal` for a fault: `regs` is the interrupted context (its stack is the one reported).
#[cold]
#[inline(never)]
pub fn fatal_at(regs: Option<crate::stack::Regs>, r: Report) -> ! {
    let action = crate::options().exitcode;
    let tid = sys::gettid();
    loop {
        match REPORT_OWNER.compare_exchange(0, tid, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => break,
            Err(owner) if owner == tid => bare_report_and_die(&r, tid, action),
            Err(_) => core::hint::spin_loop(),
        }
    }
    // The rest runs on a stack of its own: a fault may be handled on the program's alternate
    // signal stack, often a few KiB (`MINSIGSTKSZ`, `SIGSTKSZ`), which walking and printing
    // the stacks overran (a bare SIGSEGV, or a write past it into the program's memory).
    // Where the stack of the report starts: the fault's registers, or this frame's (walked
    // from the report stack, the program's frames are still where they were).
    let (regs, exact) = match regs {
        Some(regs) => (regs, true),
        None => (crate::stack::regs_here(), false),
    };
    #[cfg(target_arch = "x86_64")]
    {
        let top = report_stack();
        if top != 0 {
            let mut job = (regs, exact, Some(r));
            // SAFETY: `top` is the top of a stack of ours that nothing else uses (this thread
            // owns the report); `job` stays valid on this stack, which is not unwound.
            unsafe { sys::run_on_stack(top, report_on_own_stack, &mut job as *mut _ as *mut core::ffi::c_void) }
        }
    }
    report_and_die(regs, exact, r)
}

/// A fault while reporting: prints the bare report and goes. Apart, so that its buffer does
/// not weigh on the stack frame of every report (a fault may be handled on a small alternate
/// signal stack).
#[cold]
#[inline(never)]
fn bare_report_and_die(r: &Report, tid: u32, action: Option<u8>) -> ! {
    let mut b = Buf::<1024>::new();
    format(&mut b, r, sys::getpid(), tid, action);
    sys::write_all(out_fd(), b.as_bytes());
    sys::die();
}

/// Bytes of the stack reports run on.
#[cfg(target_arch = "x86_64")]
const REPORT_STACK: usize = 512 << 10;

/// The top of the report stack, mapped on first use (0: none could be had).
#[cfg(target_arch = "x86_64")]
fn report_stack() -> usize {
    static TOP: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let top = TOP.load(Ordering::Relaxed);
    if top != 0 {
        return top;
    }
    let top = sys::new_stack(REPORT_STACK);
    TOP.store(top, Ordering::Relaxed);
    top
}

#[cfg(target_arch = "x86_64")]
extern "C" fn report_on_own_stack(job: *mut core::ffi::c_void) -> ! {
    // SAFETY: `fatal_at` passes its `(regs, exact, Some(report))`, still on its own stack.
    let job = unsafe { &mut *(job as *mut (crate::stack::Regs, bool, Option<Report>)) };
    match job.2.take() {
        Some(r) => report_and_die(job.0, job.1, r),
        None => sys::die(),
    }
}

/// The report of `fatal_at` (its caller owns `REPORT_OWNER`), then the configured action.
/// `regs`: where the walk of the access stack starts; `exact`: they are a fault's (the first
/// frame is the faulting instruction itself, not a return address).
#[inline(never)]
fn report_and_die(regs: crate::stack::Regs, exact: bool, r: Report) -> ! {
    let action = crate::options().exitcode;
    let tid = sys::gettid();
    let mut here = [0usize; crate::stack::MAX_FRAMES];
    let n = if crate::is_ready() { crate::stack::walk(regs, true, &mut here) } else { 0 };
    let mut st = Stacks { here: &here[..n], exact_first: exact, ..Stacks::default() };
    if crate::is_ready() {
        if !crate::detect() {
            st.note = Some("allocation and free stacks not recorded (prevent mode; run with mode=detect)");
        } else if !crate::stack::enabled() {
            st.note = Some("allocation and free stacks not recorded (stacks=0)");
        } else {
            let at = r.object.map_or(r.addr, |o| o.start);
            match crate::heap::trace_of(at) {
                Some((alloc, alloc_tid, free, free_tid)) => {
                    let d = &crate::stack::DEPOT;
                    st.allocated = Some((alloc_tid, d.get(alloc)));
                    if free_tid != 0 {
                        st.freed = Some((free_tid, d.get(free)));
                    }
                }
                None if r.kind != Kind::WildAccess && r.kind != Kind::OutOfMemory => {
                    st.note = Some("allocation and free stacks not known for this address")
                }
                None => {}
            }
        }
    }
    // SAFETY: this thread owns REPORT_OWNER, hence the buffer.
    let b = unsafe { &mut *REPORT_BUF.0.get() };
    b.len = 0;
    if crate::options().json {
        format_json(b, &r, sys::getpid(), tid, action, &st);
    } else {
        format_with(b, &r, sys::getpid(), tid, action, &st);
    }
    sys::write_all(out_fd(), b.as_bytes());
    to_syslog(b.as_bytes());
    match action {
        // SAFETY: `_exit` ends the process without running anything else.
        Some(code) => unsafe { libc::_exit(code as i32) },
        None => sys::die(),
    }
}

/// Prints a one-line message prefixed with `nevermore: ` to stderr (and to the system log
/// when reports go there).
pub fn say(args: fmt::Arguments<'_>) {
    if !unbounded(2) {
        return;
    }
    let mut b = Buf::<512>::new();
    b.push_bytes(b"nevermore: ");
    let _ = b.write_fmt(args);
    b.push_bytes(b"\n");
    sys::write_all(2, b.as_bytes());
    to_syslog(b.as_bytes());
}

/// Whether a message written to `fd` cannot meet a file-size limit, which would end the
/// process with SIGXFSZ: `fd` is not a regular file, or no such limit is set. A process that
/// confines itself often sets that limit to 0 (OpenSSH's pre-authentication child); one that
/// installed a seccomp filter is not asked (its filter may kill the process for `prlimit64`):
/// no message goes to a regular file there.
fn unbounded(fd: i32) -> bool {
    let Some(st) = sys::stat(fd) else {
        // Closed (the write fails harmlessly), or refused by a filter: say nothing there.
        return !crate::seccomp::filtered();
    };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return true;
    }
    !crate::seccomp::filtered() && sys::file_size_limit().is_none()
}

/// Whether standard error leads nowhere anyone looks: closed, or `/dev/null` (character
/// device 1:3), as daemons leave it.
fn stderr_unseen() -> bool {
    let Some(st) = sys::stat(2) else { return true };
    st.st_mode & libc::S_IFMT == libc::S_IFCHR && st.st_rdev == libc::makedev(1, 3)
}

/// Whether a seccomp filter is in force: it might kill the process for a system call the
/// program itself never makes (`socket`), where a report must end it the configured way and
/// a message must not end it at all.
fn filtered() -> bool {
    // One the program installed while it ran may refuse (or kill for) `prctl` itself.
    // SAFETY: prctl(PR_GET_SECCOMP) only reads the calling thread's mode.
    crate::seccomp::filtered() || unsafe { libc::prctl(libc::PR_GET_SECCOMP) != 0 }
}

/// Sends `text` to the system log, a datagram per line (`<11>`: facility user, severity
/// error; tagged `nevermore[pid]`), when the `syslog` option says so: always, or (`auto`)
/// when no file of `report_path` takes the reports (none is set, or it cannot be opened),
/// standard error is unseen (so that a daemon's report is not lost) and no seccomp filter is
/// in force. Nothing happens when the socket is missing
/// (containers) or refuses; a full log is waited for at most 100 ms. Only system calls on
/// the stack: safe in the fault handler.
fn to_syslog(text: &[u8]) {
    let o = crate::options();
    let wanted = match o.syslog {
        config::Syslog::Never => false,
        config::Syslog::Always => true,
        config::Syslog::Auto => !report_file_open() && !filtered() && stderr_unseen(),
    };
    if !wanted {
        return;
    }
    let path = o.syslog_path.unwrap_or(b"/dev/log");
    // SAFETY: an all-zero sockaddr_un is valid; the path (below 108 bytes, checked when the
    // option was parsed; /dev/log otherwise) is copied in with its terminating NUL left zero.
    let mut addr: libc::sockaddr_un = unsafe { core::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    if path.len() >= addr.sun_path.len() {
        return;
    }
    for (d, &c) in addr.sun_path.iter_mut().zip(path) {
        *d = c as libc::c_char;
    }
    // SAFETY: plain socket call.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return;
    }
    // A log that is full waits for its reader (the queue holds ten datagrams by default), but
    // never for long: the process must still end, or go on.
    let wait = libc::timeval { tv_sec: 0, tv_usec: 100_000 };
    // SAFETY: setsockopt with a timeval on our own socket.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_SNDTIMEO,
            &wait as *const libc::timeval as *const libc::c_void,
            core::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    let pid = sys::getpid();
    for line in text.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
        let mut m = Buf::<1024>::new();
        let _ = write!(m, "<11>nevermore[{pid}]: ");
        m.push_bytes(line);
        // SAFETY: sendto from our buffer to the address built above (a system call: the
        // exported `sendto` is the library's own, see `io`).
        let sent = unsafe {
            sys::own_syscall(
                libc::SYS_sendto,
                [
                    fd as usize,
                    m.as_bytes().as_ptr() as usize,
                    m.as_bytes().len(),
                    libc::MSG_NOSIGNAL as usize,
                    &addr as *const libc::sockaddr_un as usize,
                    core::mem::size_of::<libc::sockaddr_un>(),
                ],
            )
        };
        if sent < 0 {
            // Missing, refused, or still full after the wait: give up on the rest.
            break;
        }
    }
    sys::close(fd);
}

/// Reports an unusable `NEVERMORE_OPTIONS` and exits with status 1.
pub fn bad_options(e: &config::ParseError<'_>) -> ! {
    let mut b = Buf::<512>::new();
    b.push_bytes(b"nevermore: NEVERMORE_OPTIONS: ");
    match e {
        config::ParseError::TooLong(n) => {
            let _ = write!(b, "{n} bytes, longer than the {} taken", config::MAX_TEXT);
        }
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
            claimed: None,
            pointer: Some(0x1000),
        };
        format(&mut b, &r, 42, 43, None);
        let s = core::str::from_utf8(b.as_bytes()).unwrap();
        // The operation's line names the pointer freed; the first line, the byte written over.
        assert_eq!(
            s,
            "==42== nevermore: ERROR: heap-buffer-overflow on address 0x1018 (thread 43)\n\
             ==42==   free of 0x1000: the canary after the object was overwritten\n\
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
