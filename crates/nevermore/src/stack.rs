//! Call stacks for reports: capture, the module table, and the stack depot.
//!
//! **Capture** walks the stack from the current registers (or, in the fault handler, from the
//! interrupted context) with the `.eh_frame` call-frame information of each module, so that code
//! built without frame pointers (all of Debian) unwinds correctly; code without CFI falls back to
//! the frame-pointer chain. Only the rules x86-64 code uses are interpreted: the CFA as a register
//! plus offset, and where the return address and `rbp` were saved. The rule found for a PC is
//! kept in a small direct-mapped cache, so a repeated stack costs a few loads per frame.
//! Capture allocates nothing, takes no lock, and reads only the stack and the modules'
//! `.eh_frame_hdr`/`.eh_frame` sections.
//!
//! **Modules** (load bias, executable range, `.eh_frame_hdr`, path) are collected with
//! `dl_iterate_phdr` into an append-only table in private memory: at initialisation, before a
//! stack is recorded whenever the C library's counts of loaded and unloaded objects changed
//! (one look at them, ~20 ns), and for a PC in no known module if they changed. Records are
//! never rewritten or freed (a reader, perhaps a signal handler, may hold one): an unloaded
//! module's record is marked gone, and a library loaded again at the same place gets it back.
//!
//! **The depot** deduplicates stacks: a lock-free open-addressing hash table maps a stack to a
//! `u32` id, the index of its record in a bounded store of words (header, then the PCs). When
//! the store or the table is full, new stacks get id 0 ("not recorded").

use core::arch::asm;
use core::ffi::{c_char, c_int, c_void};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::lock::RawMutex;

/// Most frames kept per stack.
pub const MAX_FRAMES: usize = 20;

/// Per-object record: who allocated and freed it (depot ids and thread ids), and the epoch of
/// the alias it was handed out under (slab slots), so a stale pointer is matched to its object.
#[repr(C)]
pub struct Trace {
    pub alloc: AtomicU32,
    pub alloc_tid: AtomicU32,
    pub free: AtomicU32,
    pub free_tid: AtomicU32,
    pub epoch: AtomicU32,
}

impl Trace {
    /// Records an allocation (the free half is cleared).
    #[inline]
    pub fn set_alloc(&self, id: u32, tid: u32, epoch: u32) {
        self.free.store(0, Ordering::Relaxed);
        self.free_tid.store(0, Ordering::Relaxed);
        self.alloc.store(id, Ordering::Relaxed);
        self.alloc_tid.store(tid, Ordering::Relaxed);
        self.epoch.store(epoch, Ordering::Release);
    }

    #[inline]
    pub fn set_free(&self, id: u32, tid: u32) {
        self.free.store(id, Ordering::Relaxed);
        self.free_tid.store(tid, Ordering::Release);
    }
}

/// Whether stacks are being recorded (detect mode with `stacks=1`, once the depot exists).
#[inline]
pub fn enabled() -> bool {
    !DEPOT.table.load(Ordering::Relaxed).is_null()
}

/// Sets up the module table and (when recording) the depot. Called once from `init`.
pub fn init(record: bool) {
    // Our own range comes from our own ELF header, so that it is known even when the module
    // table cannot be read now: seccomp's prefix is made from it.
    if let Some((lo, hi)) = text_from_own_header() {
        SELF_LO.store(lo, Ordering::Relaxed);
        SELF_HI.store(hi, Ordering::Relaxed);
    }
    let _ = refresh_modules();
    if record {
        DEPOT.init();
    }
}

// ---------------------------------------------------------------------------------------------
// Modules

const NAME_MAX: usize = 230;
/// Module records per chunk of the table, and most chunks: 16 384 modules loaded over the
/// life of the process (a library loaded again at the same place reuses its record).
const CHUNK_MODULES: usize = 256;
const MAX_CHUNKS: usize = 64;
/// Without the C library's load counters, a PC in no module rebuilds at most this often.
const UNCOUNTED_REFRESH_MS: u64 = 100;

#[repr(C)]
pub struct Module {
    /// Load bias (`dlpi_addr`): an address minus `base` is the ELF virtual address.
    pub base: usize,
    /// The executable segments' range.
    pub lo: usize,
    pub hi: usize,
    /// `.eh_frame_hdr` in memory, or 0.
    pub hdr: usize,
    /// Set when the module is no longer loaded (its record stays, for readers that hold it).
    gone: AtomicBool,
    pub name_len: u16,
    pub name: [u8; NAME_MAX],
    /// The GNU build id of the module (its `NT_GNU_BUILD_ID` note), `build_id_len` bytes; 0
    /// when it has none (or one longer than `BUILD_ID_MAX`).
    build_id_len: u8,
    build_id: [u8; BUILD_ID_MAX],
}

/// Longest build id kept: SHA-1 ids (the linkers' default) have 20 bytes, MD5 and UUID ids 16.
pub const BUILD_ID_MAX: usize = 32;

impl Module {
    pub fn name(&self) -> &[u8] {
        &self.name[..self.name_len as usize]
    }

    /// The module's build id (empty when unknown): a report's frames carry it, so that a file
    /// replaced since (a package upgrade) is not read for symbols that are no longer its own.
    pub fn build_id(&self) -> &[u8] {
        &self.build_id[..self.build_id_len as usize]
    }
}

/// The module table, append-only: records are written, then published by raising `NMODULES`;
/// a module that goes away is marked `gone`, never removed, so a reader (a stack capture, a
/// signal handler) never meets a record being rewritten or freed. Lookups go newest first, so
/// a library loaded where an unloaded one was is found, not its predecessor.
static CHUNKS: [AtomicPtr<Module>; MAX_CHUNKS] = [const { AtomicPtr::new(ptr::null_mut()) }; MAX_CHUNKS];
static NMODULES: AtomicUsize = AtomicUsize::new(0);
/// The C library's counts of objects loaded and unloaded (`dlpi_adds`, `dlpi_subs`) when the
/// table was last brought up to date; u64::MAX until then, or when it does not count.
static SEEN_ADDS: AtomicU64 = AtomicU64::new(u64::MAX);
static SEEN_SUBS: AtomicU64 = AtomicU64::new(u64::MAX);
static LAST_REFRESH_MS: AtomicU64 = AtomicU64::new(0);
/// Our own executable range: frames in it are skipped.
static SELF_LO: AtomicUsize = AtomicUsize::new(0);
static SELF_HI: AtomicUsize = AtomicUsize::new(0);

#[repr(C)]
struct DlPhdrInfo {
    addr: usize,
    name: *const c_char,
    phdr: *const Phdr,
    phnum: u16,
    adds: u64,
    subs: u64,
}

/// `size` a `dl_iterate_phdr` callback is passed when `dlpi_adds` and `dlpi_subs` are there.
const INFO_WITH_COUNTS: usize = core::mem::size_of::<DlPhdrInfo>();

#[repr(C)]
struct Phdr {
    p_type: u32,
    p_flags: u32,
    p_offset: u64,
    p_vaddr: u64,
    p_paddr: u64,
    p_filesz: u64,
    p_memsz: u64,
    p_align: u64,
}

extern "C" {
    fn dl_iterate_phdr(cb: extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> c_int, data: *mut c_void) -> c_int;
}

/// Held around every call of `dl_iterate_phdr` made here (and every update of the module
/// table), and by `fork`'s prepare handler
/// with the allocator's other locks. glibc does not reset the lock that `dl_iterate_phdr`
/// takes in a forked child: had another thread been inside it when the program forked, the
/// child's first look at the loaded objects would wait for ever. Taken only if free (a signal
/// handler may interrupt a thread holding it), so a look can be skipped, never blocked.
static LOADER: RawMutex = RawMutex::new();

/// The lock `fork`'s handlers take so that no thread is inside `dl_iterate_phdr` for us.
pub fn loader_lock() -> &'static RawMutex {
    &LOADER
}

/// `dl_iterate_phdr(cb, data)` under `LOADER`; false (and no call) when it was held.
fn iterate_loaded(cb: extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> c_int, data: *mut c_void) -> bool {
    if !LOADER.try_lock() {
        return false;
    }
    // SAFETY: the callbacks here only read what they are passed and write `data`, which the
    // caller made for them.
    unsafe { dl_iterate_phdr(cb, data) };
    LOADER.unlock();
    true
}

const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;
const PT_GNU_EH_FRAME: u32 = 0x6474_e550;
const PF_X: u32 = 1;
/// The note type of a GNU build id (its name is "GNU").
const NT_GNU_BUILD_ID: u32 = 3;

const PF_W: u32 = 2;

/// This library's own writable memory (its data and bss), page-rounded: (start, end), or
/// None when the loaded objects cannot be looked at now. The leak check leaves it out of what
/// the program holds: the allocator's statics may hold addresses of objects (a cursor on the
/// last page issued) that the program does not.
pub fn own_writable() -> Option<(usize, usize)> {
    extern "C" fn find(info: *mut DlPhdrInfo, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the (start, end) pair of `own_writable`; `info` is valid for the
        // duration of the callback (dl_iterate_phdr's contract).
        let (out, info) = unsafe { (&mut *(data as *mut (usize, usize)), &*info) };
        let here = own_writable as fn() -> Option<(usize, usize)> as usize;
        let Some((_, lo, hi, _)) = describe(info) else { return 0 };
        if !(lo..hi).contains(&here) {
            return 0;
        }
        for i in 0..info.phnum as usize {
            // SAFETY: phdr has phnum entries.
            let ph = unsafe { &*info.phdr.add(i) };
            if ph.p_type == PT_LOAD && ph.p_flags & PF_W != 0 {
                let start = info.addr.wrapping_add(ph.p_vaddr as usize) & !(crate::sys::PAGE - 1);
                let end =
                    crate::sys::round_up(info.addr.wrapping_add((ph.p_vaddr + ph.p_memsz) as usize), crate::sys::PAGE);
                out.0 = out.0.min(start);
                out.1 = out.1.max(end);
            }
        }
        1
    }
    let mut range = (usize::MAX, 0usize);
    if !iterate_loaded(find, &mut range as *mut (usize, usize) as *mut c_void) {
        return None;
    }
    (range.0 < range.1).then_some(range)
}

/// Record `i` of the table (its chunk must exist).
fn module_record(i: usize) -> *mut Module {
    // SAFETY: chunks hold CHUNK_MODULES records; the caller checked that chunk i / CHUNK_MODULES
    // was made (`i` below `NMODULES`, or the refresher made it).
    unsafe { CHUNKS[i / CHUNK_MODULES].load(Ordering::Acquire).add(i % CHUNK_MODULES) }
}

/// The records published so far, oldest first.
fn records() -> impl DoubleEndedIterator<Item = &'static Module> {
    // SAFETY: records below NMODULES are complete and never freed or rewritten (but `gone`).
    (0..NMODULES.load(Ordering::Acquire)).map(|i| unsafe { &*module_record(i) })
}

/// What a module looks like in `dl_iterate_phdr`: (bias, executable range, `.eh_frame_hdr`).
fn describe(info: &DlPhdrInfo) -> Option<(usize, usize, usize, usize)> {
    let (mut lo, mut hi, mut hdr) = (usize::MAX, 0, 0);
    for i in 0..info.phnum as usize {
        // SAFETY: phdr has phnum entries.
        let ph = unsafe { &*info.phdr.add(i) };
        if ph.p_type == PT_LOAD && ph.p_flags & PF_X != 0 {
            lo = lo.min(info.addr.wrapping_add(ph.p_vaddr as usize));
            hi = hi.max(info.addr.wrapping_add((ph.p_vaddr + ph.p_memsz) as usize));
        } else if ph.p_type == PT_GNU_EH_FRAME {
            hdr = info.addr.wrapping_add(ph.p_vaddr as usize);
        }
    }
    (lo < hi).then_some((info.addr, lo, hi, hdr))
}

/// The build id in a module's notes, read where the loader mapped them: (bytes, length), the
/// length 0 when there is none. Only notes inside a loaded segment's file part are read (the
/// linkers put them in the first one).
fn build_id_of(info: &DlPhdrInfo) -> ([u8; BUILD_ID_MAX], usize) {
    let mut out = [0u8; BUILD_ID_MAX];
    // SAFETY: phdr has phnum entries (dl_iterate_phdr's contract, or `text_from_header`'s).
    let phdrs = unsafe { core::slice::from_raw_parts(info.phdr, info.phnum as usize) };
    let loaded = |from: u64, len: u64| {
        phdrs.iter().any(|l| {
            l.p_type == PT_LOAD
                && from >= l.p_vaddr
                && from.checked_add(len).is_some_and(|e| e <= l.p_vaddr + l.p_filesz)
        })
    };
    for ph in phdrs.iter().filter(|ph| ph.p_type == PT_NOTE && loaded(ph.p_vaddr, ph.p_filesz)) {
        // Each note: name size, descriptor size, type (u32 each), then the name and the
        // descriptor, each padded to the segment's alignment (4, or 8 for 8-aligned notes).
        let align = if ph.p_align == 8 { 8 } else { 4 };
        let pad = |n: usize| (n + align - 1) & !(align - 1);
        let start = info.addr.wrapping_add(ph.p_vaddr as usize);
        let end = start + ph.p_filesz as usize;
        let mut at = start;
        while at + 12 <= end {
            // SAFETY: [start, end) lies in the file part of a loaded segment (checked above),
            // mapped readable for as long as the module is loaded, which it is during the
            // callback; the loads are unaligned-safe.
            let (namesz, descsz, kind) = unsafe {
                let w = at as *const u32;
                (w.read_unaligned() as usize, w.add(1).read_unaligned() as usize, w.add(2).read_unaligned())
            };
            let name_at = at + 12;
            let Some(desc_at) = name_at.checked_add(pad(namesz)) else { break };
            let Some(next) = desc_at.checked_add(pad(descsz)) else { break };
            if next > end {
                break;
            }
            // SAFETY: [name_at, name_at + namesz) is inside [start, end), checked just above.
            let name = unsafe { core::slice::from_raw_parts(name_at as *const u8, namesz) };
            if kind == NT_GNU_BUILD_ID && name == b"GNU\0" {
                if descsz == 0 || descsz > BUILD_ID_MAX {
                    return (out, 0);
                }
                // SAFETY: [desc_at, desc_at + descsz) is inside [start, end), checked above.
                out[..descsz].copy_from_slice(unsafe { core::slice::from_raw_parts(desc_at as *const u8, descsz) });
                return (out, descsz);
            }
            at = next;
        }
    }
    (out, 0)
}

extern "C" {
    /// The linker's symbol for this library's ELF header (mapped: it starts the first
    /// loadable segment).
    static __ehdr_start: u8;
}

/// This library's executable range, read from its own program headers: what `describe` finds
/// for it through `dl_iterate_phdr`, without the loader's lock.
fn text_from_own_header() -> Option<(usize, usize)> {
    // SAFETY: the linker's symbol for our own ELF header, mapped with our first segment.
    unsafe { text_from_header(ptr::addr_of!(__ehdr_start) as usize) }
}

/// The dynamic linker's executable range, from its ELF header at `AT_BASE`; None when the
/// program was started without one (`AT_BASE` is 0: run by the linker itself, or static).
pub fn loader_text() -> Option<(usize, usize)> {
    // SAFETY: getauxval only reads the auxiliary vector.
    let base = unsafe { libc::getauxval(libc::AT_BASE) } as usize;
    // SAFETY: AT_BASE is where the kernel mapped the interpreter, starting with its ELF
    // header, which stays mapped for the process's life.
    (base != 0).then(|| unsafe { text_from_header(base) }).flatten()
}

/// The executable range of the module whose ELF header is mapped at `base`, read from its
/// program headers without the loader's lock.
///
/// # Safety
/// `base` must be the mapped ELF header of a loaded module.
unsafe fn text_from_header(base: usize) -> Option<(usize, usize)> {
    // SAFETY: the ELF header is mapped at `base`: e_phoff at 32, e_phentsize and e_phnum at
    // 54 and 56; the program headers it points to are in the same loaded segment.
    let (phoff, phentsize, phnum) = unsafe {
        let b = base as *const u8;
        (
            (b.add(32) as *const u64).read_unaligned() as usize,
            (b.add(54) as *const u16).read_unaligned() as usize,
            (b.add(56) as *const u16).read_unaligned() as usize,
        )
    };
    if phentsize != core::mem::size_of::<Phdr>() {
        return None;
    }
    // SAFETY: as above, `phnum` entries of `Phdr`.
    let phdrs = unsafe { core::slice::from_raw_parts((base + phoff) as *const Phdr, phnum) };
    // The load bias: the segment holding the header at file offset 0 is mapped at `base`.
    let first = phdrs.iter().find(|ph| ph.p_type == PT_LOAD && ph.p_offset == 0)?;
    let bias = base.wrapping_sub(first.p_vaddr as usize);
    let info =
        DlPhdrInfo { addr: bias, name: ptr::null(), phdr: phdrs.as_ptr(), phnum: phnum as u16, adds: 0, subs: 0 };
    describe(&info).map(|(_, lo, hi, _)| (lo, hi))
}

/// Copies a module's name into `out` (truncated), made absolute when `dlopen` was given a
/// relative path (`./plugin.so`): reports are symbolized later, maybe by another process in
/// another directory. The directory is the current one, which is where the path was relative
/// to unless the program changed it between the `dlopen` and its first allocation. Returns
/// the length.
fn absolute_name(s: &[u8], out: &mut [u8; NAME_MAX]) -> usize {
    let s = s.strip_prefix(b"./").unwrap_or(s);
    let mut at = 0;
    if !s.is_empty() && s[0] != b'/' {
        // SAFETY: getcwd writes at most `NAME_MAX` bytes, NUL included, into `out`.
        let ok = !unsafe { libc::getcwd(out.as_mut_ptr() as *mut c_char, NAME_MAX) }.is_null();
        let dir = if ok { out.iter().position(|&b| b == 0).unwrap_or(0) } else { 0 };
        if dir > 0 && dir + 1 + s.len() <= NAME_MAX {
            at = dir;
            if out[at - 1] != b'/' {
                out[at] = b'/';
                at += 1;
            }
        }
    }
    let n = s.len().min(NAME_MAX - at);
    out[at..at + n].copy_from_slice(&s[..n]);
    at + n
}

/// State of one refresh: which published records were met again.
struct Refresh {
    /// Bit i: record i is loaded (records past 16 384 are not kept anyway).
    seen: [u64; MAX_CHUNKS * CHUNK_MODULES / 64],
    first: bool,
}

extern "C" fn add_module(info: *mut DlPhdrInfo, size: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the refresh state of `refresh_modules`; `info` is valid for the duration
    // of the callback (dl_iterate_phdr's contract).
    let (st, info) = unsafe { (&mut *(data as *mut Refresh), &*info) };
    let first = core::mem::replace(&mut st.first, false);
    if first && size >= INFO_WITH_COUNTS {
        SEEN_ADDS.store(info.adds, Ordering::Relaxed);
        SEEN_SUBS.store(info.subs, Ordering::Relaxed);
    }
    let Some((base, lo, hi, hdr)) = describe(info) else { return 0 };
    let mut name = [0u8; NAME_MAX];
    let mut name_len = 0;
    if !info.name.is_null() {
        // SAFETY: dlpi_name is a NUL-terminated string.
        let s = unsafe { core::ffi::CStr::from_ptr(info.name) }.to_bytes();
        name_len = absolute_name(s, &mut name);
    }
    if name_len == 0 && first {
        // The main program has an empty name: ask the kernel.
        let r = crate::sys::readlink(c"/proc/self/exe", &mut name[..NAME_MAX]);
        name_len = r.max(0) as usize;
    }
    let (build_id, build_id_len) = build_id_of(info);
    // Known already (loaded again at the same place counts as the same, unless it is another
    // build)?
    let n = NMODULES.load(Ordering::Acquire);
    for i in (0..n).rev() {
        // SAFETY: published record.
        let m = unsafe { &*module_record(i) };
        if (m.base, m.lo, m.hi, m.hdr) == (base, lo, hi, hdr)
            && m.name() == &name[..name_len]
            && m.build_id() == &build_id[..build_id_len]
        {
            st.seen[i / 64] |= 1 << (i % 64);
            m.gone.store(false, Ordering::Release);
            return 0;
        }
    }
    if n == MAX_CHUNKS * CHUNK_MODULES {
        return 0;
    }
    let c = &CHUNKS[n / CHUNK_MODULES];
    if c.load(Ordering::Acquire).is_null() {
        let chunk = crate::meta::map(CHUNK_MODULES * core::mem::size_of::<Module>()) as *mut Module;
        if chunk.is_null() {
            return 1;
        }
        c.store(chunk, Ordering::Release);
    }
    // SAFETY: record n is past the published ones: no reader looks at it yet; the chunk is
    // zeroed memory of CHUNK_MODULES records.
    unsafe {
        let m = &mut *module_record(n);
        (m.base, m.lo, m.hi, m.hdr) = (base, lo, hi, hdr);
        m.name = name;
        m.name_len = name_len as u16;
        m.build_id = build_id;
        m.build_id_len = build_id_len as u8;
        m.gone.store(false, Ordering::Relaxed);
    }
    st.seen[n / 64] |= 1 << (n % 64);
    NMODULES.store(n + 1, Ordering::Release);
    0
}

/// Brings the module table up to date with the loaded objects (at start-up, or for a PC in no
/// known module once something was loaded or unloaded). The whole update runs under `LOADER`,
/// so one runs at a time and `fork` never leaves one half done in the child. Returns false
/// when the lock was taken (another thread, or the code this signal handler interrupted).
fn refresh_modules() -> bool {
    if !LOADER.try_lock() {
        return false;
    }
    refresh_locked();
    LOADER.unlock();
    true
}

/// `refresh_modules` with `LOADER` held.
fn refresh_locked() {
    // Not on the stack, which may be a small signal stack: the state is 2 KiB. Its lock is
    // only ever taken under `LOADER`, so it never waits.
    static STATE: crate::lock::Locked<Refresh> =
        crate::lock::Locked::new(Refresh { seen: [0; MAX_CHUNKS * CHUNK_MODULES / 64], first: true });
    let mut st = STATE.lock();
    st.seen = [0; MAX_CHUNKS * CHUNK_MODULES / 64];
    st.first = true;
    let subs = SEEN_SUBS.load(Ordering::Relaxed);
    // SAFETY: the callback only writes records past the published ones and the state.
    unsafe { dl_iterate_phdr(add_module, &mut *st as *mut Refresh as *mut c_void) };
    for (i, m) in records().enumerate() {
        if st.seen[i / 64] & (1 << (i % 64)) == 0 {
            m.gone.store(true, Ordering::Release);
        }
    }
    drop(st);
    if SEEN_SUBS.load(Ordering::Relaxed) != subs {
        // Something was unloaded: the cached rules of its PCs may belong to another library now.
        for e in &RULES {
            e.key.store(0, Ordering::Release);
        }
    }
    // Our own range comes from our ELF header (`init`); from the table only if that failed.
    let me = capture as *const () as usize;
    if let Some(m) = module_of(me).filter(|_| own_text().is_none()) {
        SELF_LO.store(m.lo, Ordering::Relaxed);
        SELF_HI.store(m.hi, Ordering::Relaxed);
    }
}

fn now_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into `ts`.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

extern "C" fn read_counts(info: *mut DlPhdrInfo, size: usize, data: *mut c_void) -> c_int {
    if size >= INFO_WITH_COUNTS {
        // SAFETY: `data` is the caller's pair; `info` is valid, with the counters (`size`).
        unsafe {
            let out = &mut *(data as *mut (u64, u64));
            *out = ((*info).adds, (*info).subs);
        }
    }
    1 // the first object is enough
}

/// What the C library says of the objects loaded and unloaded so far.
enum Counts {
    /// `dlpi_adds`, `dlpi_subs`.
    Known(u64, u64),
    /// It does not count them.
    Unknown,
    /// Not looked at: another thread (or the code this signal handler interrupted) was looking.
    Busy,
}

fn load_counts() -> Counts {
    let mut c = (u64::MAX, u64::MAX);
    // The callback writes the pair and stops at the first object.
    if !iterate_loaded(read_counts, &mut c as *mut (u64, u64) as *mut c_void) {
        return Counts::Busy;
    }
    if c.0 == u64::MAX {
        Counts::Unknown
    } else {
        Counts::Known(c.0, c.1)
    }
}

/// Whether the counts differ from those of the last refresh.
fn changed(a: u64, s: u64) -> bool {
    (a, s) != (SEEN_ADDS.load(Ordering::Relaxed), SEEN_SUBS.load(Ordering::Relaxed))
}

/// A PC in no known module: refresh the table if an object was loaded or unloaded since the
/// last refresh (code from `dlopen`; a PC in generated code changes nothing and costs one
/// look at the counters). Without counters, at most every `UNCOUNTED_REFRESH_MS`.
#[cold]
fn maybe_refresh() -> bool {
    match load_counts() {
        Counts::Busy => return false,
        Counts::Known(a, s) if !changed(a, s) => return false,
        Counts::Known(..) => {}
        Counts::Unknown => {
            let (now, last) = (now_ms(), LAST_REFRESH_MS.load(Ordering::Relaxed));
            if now.saturating_sub(last) < UNCOUNTED_REFRESH_MS
                || LAST_REFRESH_MS.compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed).is_err()
            {
                return false;
            }
        }
    }
    refresh_modules()
}

/// Brings the module table up to date when an object was loaded or unloaded since it was
/// last: a library loaded where an unloaded one was would otherwise be taken for it (the wrong
/// name in reports, the wrong unwinding rules). A look at the C library's counters, done
/// before each recorded stack (not in signal handlers: see `module_of`).
#[inline]
fn sync_modules() {
    if let Counts::Known(a, s) = load_counts() {
        if changed(a, s) {
            let _ = refresh_modules();
        }
    }
}

/// The allocator's own executable range, once the module table was read.
pub fn own_text() -> Option<(usize, usize)> {
    let (lo, hi) = (SELF_LO.load(Ordering::Relaxed), SELF_HI.load(Ordering::Relaxed));
    (lo < hi).then_some((lo, hi))
}

/// The module holding `pc`, if known (no refresh: safe in a signal handler).
pub fn module_of(pc: usize) -> Option<&'static Module> {
    records().rev().find(|m| pc >= m.lo && pc < m.hi && !m.gone.load(Ordering::Acquire))
}

fn module_or_refresh(pc: usize) -> Option<&'static Module> {
    module_of(pc).or_else(|| if maybe_refresh() { module_of(pc) } else { None })
}

// ---------------------------------------------------------------------------------------------
// Unwinding

/// The registers an unwind step needs.
#[derive(Clone, Copy)]
pub struct Regs {
    pub pc: usize,
    pub sp: usize,
    pub bp: usize,
}

/// How to find the caller's frame from a PC, packed into a u64 for the rule cache:
/// bits 0..32 CFA offset (i32), 32..48 offset of the saved rbp from the CFA (i16),
/// 48..56 offset of the return address from the CFA in 8-byte units (i8), 56.. flags.
#[derive(Clone, Copy)]
struct Rule(u64);

const F_CFA_RBP: u64 = 1 << 56;
const F_RBP_SAVED: u64 = 1 << 57;
const F_END: u64 = 1 << 58;
const F_VALID: u64 = 1 << 59;

impl Rule {
    fn new(cfa_rbp: bool, cfa_off: i64, rbp: Option<i64>, ra_off: i64) -> Option<Rule> {
        let cfa_off = i32::try_from(cfa_off).ok()?;
        let ra8 = i8::try_from(ra_off / 8).ok()?;
        let mut v = (cfa_off as u32 as u64) | (((ra8 as u8) as u64) << 48) | F_VALID;
        if cfa_rbp {
            v |= F_CFA_RBP;
        }
        if let Some(o) = rbp {
            v |= (i16::try_from(o).ok()? as u16 as u64) << 32 | F_RBP_SAVED;
        }
        Some(Rule(v))
    }
    const END: Rule = Rule(F_END | F_VALID);
    fn cfa_off(self) -> i64 {
        self.0 as u32 as i32 as i64
    }
    fn rbp_off(self) -> i64 {
        (self.0 >> 32) as u16 as i16 as i64
    }
    fn ra_off(self) -> i64 {
        ((self.0 >> 48) as u8 as i8 as i64) * 8
    }
}

const CACHE_SIZE: usize = 4096;

struct CacheEntry {
    key: AtomicUsize,
    val: AtomicU64,
}

static RULES: [CacheEntry; CACHE_SIZE] =
    [const { CacheEntry { key: AtomicUsize::new(0), val: AtomicU64::new(0) } }; CACHE_SIZE];

#[inline]
fn cache_slot(pc: usize) -> &'static CacheEntry {
    &RULES[(pc ^ (pc >> 12)).wrapping_mul(0x9E37_79B9) >> 4 & (CACHE_SIZE - 1)]
}

/// The rule for `pc` (an exact instruction address), from the cache or the module's CFI.
/// None: no CFI covers it (use frame pointers).
fn rule_for(pc: usize) -> Option<Rule> {
    let e = cache_slot(pc);
    let k1 = e.key.load(Ordering::Acquire);
    if k1 == pc {
        let v = e.val.load(Ordering::Acquire);
        if e.key.load(Ordering::Acquire) == pc && v & F_VALID != 0 {
            return Some(Rule(v));
        }
    }
    let m = module_or_refresh(pc)?;
    if m.hdr == 0 {
        return None;
    }
    // SAFETY: `hdr` points at the module's mapped `.eh_frame_hdr`; the parser only follows
    // offsets found there, into the module's mapped `.eh_frame`.
    let r = unsafe { cfi::find(m.hdr, pc) }?;
    e.key.store(0, Ordering::Release);
    e.val.store(r.0, Ordering::Release);
    e.key.store(pc, Ordering::Release);
    Some(r)
}

/// Largest step from one frame's stack pointer to the next one that is believed.
const MAX_STEP: usize = 1 << 20;
/// Same for a step taken by frame pointer (no CFI): kept small, the chain may be garbage.
const MAX_FP_STEP: usize = 1 << 16;

/// The words a walk reads: the stack's frames as their unwind rules describe them, which is
/// believed only as far as it can be checked. A frame whose rules do not match the stack it
/// runs on (code that switched stacks, a program's hand-made context, a corrupt frame) can
/// send the walk past the end of a stack into memory that is not mapped. So every page is
/// read first through `sys::probe_word`, which a fault cannot crash; the pages found readable
/// (one run of them, the part of the stack walked so far) are then read directly.
struct Reader {
    /// Start and end of the run of pages known to be readable.
    lo: usize,
    hi: usize,
}

impl Reader {
    fn new() -> Reader {
        Reader { lo: 0, hi: 0 }
    }

    /// The word at `a`, or None if it cannot be read (the walk ends there).
    #[inline]
    fn word(&mut self, a: usize) -> Option<usize> {
        if a & 7 != 0 {
            return None;
        }
        if a.wrapping_sub(self.lo) >= self.hi - self.lo {
            let p = crate::sys::probe_word(a);
            if p.status == crate::sys::PROBE_FAILED {
                return None;
            }
            let page = a & !(crate::sys::PAGE - 1);
            if page == self.hi && self.hi != 0 {
                self.hi += crate::sys::PAGE;
            } else {
                (self.lo, self.hi) = (page, page + crate::sys::PAGE);
            }
            return Some(p.value);
        }
        // SAFETY: `a` is 8-byte aligned inside a page that a probe found readable during this
        // walk: a page of the stack being walked, which stays mapped while its thread runs the
        // walk (or, in the fault handler, while that thread is stopped in it).
        Some(unsafe { ptr::read_volatile(a as *const usize) })
    }
}

/// Walks the stack from `r`, writing return addresses (the first one is `r.pc` itself) into
/// `out`, skipping frames inside this library. `exact`: `r.pc` is the address of the
/// interrupted instruction (not a return address). Returns the number written.
pub fn walk(mut r: Regs, mut exact: bool, out: &mut [usize]) -> usize {
    let (self_lo, self_hi) = (SELF_LO.load(Ordering::Relaxed), SELF_HI.load(Ordering::Relaxed));
    let mut n = 0;
    let mut mem = Reader::new();
    for _ in 0..64 {
        if n == out.len() || r.pc < 4096 {
            break;
        }
        if !(self_lo..self_hi).contains(&r.pc) {
            out[n] = r.pc;
            n += 1;
        }
        let look = if exact { r.pc } else { r.pc - 1 };
        exact = false;
        let (cfa, ra, bp) = match rule_for(look) {
            Some(rule) if rule.0 & F_END != 0 => break,
            Some(rule) => {
                let base = if rule.0 & F_CFA_RBP != 0 { r.bp } else { r.sp };
                let cfa = base.wrapping_add(rule.cfa_off() as usize);
                if cfa <= r.sp || cfa - r.sp > MAX_STEP || cfa & 7 != 0 {
                    break;
                }
                let Some(ra) = mem.word(cfa.wrapping_add(rule.ra_off() as usize)) else { break };
                let bp = if rule.0 & F_RBP_SAVED != 0 {
                    let Some(bp) = mem.word(cfa.wrapping_add(rule.rbp_off() as usize)) else { break };
                    bp
                } else {
                    r.bp
                };
                (cfa, ra, bp)
            }
            None => {
                // Frame pointers: [rbp] = caller's rbp, [rbp+8] = return address.
                if r.bp < r.sp || r.bp - r.sp > MAX_FP_STEP || r.bp & 7 != 0 {
                    break;
                }
                let (Some(ra), Some(bp)) = (mem.word(r.bp + 8), mem.word(r.bp)) else { break };
                (r.bp + 16, ra, bp)
            }
        };
        r = Regs { pc: ra, sp: cfa, bp };
    }
    n
}

/// Captures the calling thread's stack (without this library's frames) into `out`.
#[inline(never)]
pub fn capture(out: &mut [usize]) -> usize {
    walk(regs_here(), true, out)
}

/// The caller's registers as a walk starts from them (its own frame is the first one, skipped
/// as the library's). Always inlined, so that the frame is the caller's.
#[inline(always)]
pub fn regs_here() -> Regs {
    let (pc, sp, bp): (usize, usize, usize);
    // SAFETY: reads the instruction pointer, stack pointer and frame pointer; no memory access.
    unsafe {
        asm!(
            "lea {pc}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            pc = out(reg) pc,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags)
        );
    }
    Regs { pc, sp, bp }
}

/// Captures the current stack into the depot and returns its id (0: not recorded).
#[inline(never)]
pub fn record() -> u32 {
    if !enabled() {
        return 0;
    }
    sync_modules();
    let mut f = [0usize; MAX_FRAMES];
    let n = capture(&mut f);
    DEPOT.intern(&f[..n])
}

/// Minimal `.eh_frame` interpreter (x86-64).
mod cfi {
    use super::Rule;

    const RBP: u64 = 6;

    struct Reader {
        p: usize,
    }

    impl Reader {
        unsafe fn u8(&mut self) -> u8 {
            // SAFETY: the caller keeps `p` inside the CFI sections.
            let v = unsafe { *(self.p as *const u8) };
            self.p += 1;
            v
        }
        unsafe fn u16(&mut self) -> u16 {
            // SAFETY: as above.
            let v = unsafe { (self.p as *const u16).read_unaligned() };
            self.p += 2;
            v
        }
        unsafe fn u32(&mut self) -> u32 {
            // SAFETY: as above.
            let v = unsafe { (self.p as *const u32).read_unaligned() };
            self.p += 4;
            v
        }
        unsafe fn u64(&mut self) -> u64 {
            // SAFETY: as above.
            let v = unsafe { (self.p as *const u64).read_unaligned() };
            self.p += 8;
            v
        }
        unsafe fn uleb(&mut self) -> u64 {
            let (mut v, mut shift) = (0u64, 0u32);
            loop {
                // SAFETY: as above.
                let b = unsafe { self.u8() };
                if shift < 64 {
                    v |= ((b & 0x7f) as u64) << shift;
                }
                shift += 7;
                if b & 0x80 == 0 {
                    return v;
                }
            }
        }
        unsafe fn sleb(&mut self) -> i64 {
            let (mut v, mut shift) = (0i64, 0u32);
            loop {
                // SAFETY: as above.
                let b = unsafe { self.u8() };
                if shift < 64 {
                    v |= ((b & 0x7f) as i64) << shift;
                }
                shift += 7;
                if b & 0x80 == 0 {
                    if shift < 64 && b & 0x40 != 0 {
                        v |= -1i64 << shift;
                    }
                    return v;
                }
            }
        }
        /// A `DW_EH_PE_*` encoded value; `data` is the base for datarel.
        unsafe fn encoded(&mut self, enc: u8, data: usize) -> Option<usize> {
            if enc == 0xff {
                return Some(0);
            }
            let at = self.p;
            // SAFETY: as above.
            let v = unsafe {
                match enc & 0x0f {
                    0x00 => self.u64() as usize,
                    0x01 => self.uleb() as usize,
                    0x02 => self.u16() as usize,
                    0x03 => self.u32() as usize,
                    0x04 => self.u64() as usize,
                    0x09 => self.sleb() as usize,
                    0x0a => self.u16() as i16 as isize as usize,
                    0x0b => self.u32() as i32 as isize as usize,
                    0x0c => self.u64() as usize,
                    _ => return None,
                }
            };
            let v = match enc & 0x70 {
                0x00 => v,
                0x10 => v.wrapping_add(at),
                0x30 => v.wrapping_add(data),
                _ => return None,
            };
            if enc & 0x80 != 0 {
                return None;
            }
            Some(v)
        }
    }

    /// Finds the rule for `pc` through `.eh_frame_hdr` at `hdr`.
    ///
    /// # Safety
    /// `hdr` must be a mapped `.eh_frame_hdr` whose table points into a mapped `.eh_frame`.
    pub unsafe fn find(hdr: usize, pc: usize) -> Option<Rule> {
        let mut r = Reader { p: hdr };
        // SAFETY: the header is mapped (caller); FDEs it points to are in `.eh_frame`.
        unsafe {
            if r.u8() != 1 {
                return None;
            }
            let (ptr_enc, count_enc, table_enc) = (r.u8(), r.u8(), r.u8());
            r.encoded(ptr_enc, hdr)?;
            let count = r.encoded(count_enc, hdr)?;
            if table_enc != 0x3b || count == 0 {
                return None;
            }
            let table = r.p as *const [i32; 2];
            // Last entry whose initial location is <= pc.
            let (mut lo, mut hi) = (0usize, count);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if hdr.wrapping_add((*table.add(mid))[0] as isize as usize) <= pc {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let e = *table.add(lo);
            if hdr.wrapping_add(e[0] as isize as usize) > pc {
                return None;
            }
            fde(hdr.wrapping_add(e[1] as isize as usize), pc)
        }
    }

    struct Cie {
        code_align: u64,
        data_align: i64,
        ra: u64,
        fde_enc: u8,
        aug_z: bool,
        insns: usize,
        end: usize,
    }

    unsafe fn entry_len(r: &mut Reader) -> Option<usize> {
        // SAFETY: caller's contract.
        let len = unsafe { r.u32() };
        match len {
            0 => None,
            // SAFETY: caller's contract (a 64-bit length follows the escape value).
            0xffff_ffff => Some(unsafe { r.u64() } as usize),
            n => Some(n as usize),
        }
    }

    unsafe fn cie(at: usize) -> Option<Cie> {
        let mut r = Reader { p: at };
        // SAFETY: caller's contract: `at` is a CIE in `.eh_frame`.
        unsafe {
            let len = entry_len(&mut r)?;
            let end = r.p + len;
            if r.u32() != 0 {
                return None;
            }
            let version = r.u8();
            let aug_start = r.p;
            while r.u8() != 0 {}
            let aug = core::slice::from_raw_parts(aug_start as *const u8, r.p - aug_start - 1);
            if aug.starts_with(b"eh") {
                r.u64();
            }
            let code_align = r.uleb();
            let data_align = r.sleb();
            let ra = if version == 1 { r.u8() as u64 } else { r.uleb() };
            let mut fde_enc = 0u8;
            let aug_z = aug.first() == Some(&b'z');
            if aug_z {
                let alen = r.uleb() as usize;
                let after = r.p + alen;
                for &c in &aug[1..] {
                    match c {
                        b'R' => fde_enc = r.u8(),
                        b'L' => {
                            r.u8();
                        }
                        b'P' => {
                            let enc = r.u8();
                            r.encoded(enc & 0x7f, 0)?;
                        }
                        _ => {}
                    }
                }
                r.p = after;
            }
            Some(Cie { code_align, data_align, ra, fde_enc, aug_z, insns: r.p, end })
        }
    }

    unsafe fn fde(at: usize, pc: usize) -> Option<Rule> {
        let mut r = Reader { p: at };
        // SAFETY: caller's contract: `at` is an FDE in `.eh_frame`.
        unsafe {
            let len = entry_len(&mut r)?;
            let end = r.p + len;
            let cie_field = r.p;
            let cie_off = r.u32() as usize;
            if cie_off == 0 {
                return None;
            }
            let c = cie(cie_field - cie_off)?;
            let start = r.encoded(c.fde_enc, 0)?;
            let range = r.encoded(c.fde_enc & 0x0f, 0)?;
            if pc < start || pc - start >= range {
                return None;
            }
            if c.aug_z {
                let alen = r.uleb() as usize;
                r.p += alen;
            }
            let mut st = State::initial();
            run(&c, c.insns, c.end, usize::MAX, 0, &mut st, None)?;
            let init = st;
            run(&c, r.p, end, pc, start, &mut st, Some(&init))?;
            st.rule()
        }
    }

    #[derive(Clone, Copy)]
    enum Reg {
        Same,
        At(i64),
        Undefined,
        Other,
    }

    #[derive(Clone, Copy)]
    struct State {
        cfa_reg: u64,
        cfa_off: i64,
        cfa_expr: bool,
        rbp: Reg,
        ra: Reg,
    }

    impl State {
        fn initial() -> State {
            State { cfa_reg: 7, cfa_off: 8, cfa_expr: false, rbp: Reg::Same, ra: Reg::At(-8) }
        }
        fn set(&mut self, reg: u64, ra: u64, v: Reg) {
            if reg == RBP {
                self.rbp = v;
            } else if reg == ra {
                self.ra = v;
            }
        }
        fn rule(&self) -> Option<Rule> {
            if matches!(self.ra, Reg::Undefined) {
                return Some(Rule::END);
            }
            if self.cfa_expr || (self.cfa_reg != 7 && self.cfa_reg != RBP) {
                return None;
            }
            let ra = match self.ra {
                Reg::At(o) => o,
                _ => return None,
            };
            let rbp = match self.rbp {
                Reg::Same => None,
                Reg::At(o) => Some(o),
                _ => return None,
            };
            Rule::new(self.cfa_reg == RBP, self.cfa_off, rbp, ra)
        }
    }

    /// Runs CFA instructions from `p` to `end`, stopping once the location passes `pc`.
    unsafe fn run(
        c: &Cie,
        p: usize,
        end: usize,
        pc: usize,
        mut loc: usize,
        st: &mut State,
        init: Option<&State>,
    ) -> Option<()> {
        let mut r = Reader { p };
        let mut saved = [State::initial(); 8];
        let mut depth = 0usize;
        let restore = |st: &mut State, reg: u64| {
            if let Some(i) = init {
                let v = if reg == RBP {
                    i.rbp
                } else if reg == c.ra {
                    i.ra
                } else {
                    return;
                };
                st.set(reg, c.ra, v);
            }
        };
        // SAFETY: caller's contract: the instructions lie in `.eh_frame` before `end`.
        unsafe {
            while r.p < end {
                let op = r.u8();
                let advance = |loc: &mut usize, delta: u64| {
                    *loc = loc.wrapping_add((delta * c.code_align) as usize);
                    *loc > pc
                };
                match op >> 6 {
                    1 => {
                        if advance(&mut loc, (op & 0x3f) as u64) {
                            return Some(());
                        }
                        continue;
                    }
                    2 => {
                        let off = r.uleb() as i64 * c.data_align;
                        st.set((op & 0x3f) as u64, c.ra, Reg::At(off));
                        continue;
                    }
                    3 => {
                        restore(st, (op & 0x3f) as u64);
                        continue;
                    }
                    _ => {}
                }
                match op {
                    0x00 => {}
                    0x01 => {
                        loc = r.encoded(c.fde_enc, 0)?;
                        if loc > pc {
                            return Some(());
                        }
                    }
                    0x02 => {
                        let d = r.u8() as u64;
                        if advance(&mut loc, d) {
                            return Some(());
                        }
                    }
                    0x03 => {
                        let d = r.u16() as u64;
                        if advance(&mut loc, d) {
                            return Some(());
                        }
                    }
                    0x04 => {
                        let d = r.u32() as u64;
                        if advance(&mut loc, d) {
                            return Some(());
                        }
                    }
                    0x05 => {
                        let reg = r.uleb();
                        let off = r.uleb() as i64 * c.data_align;
                        st.set(reg, c.ra, Reg::At(off));
                    }
                    0x06 => {
                        let reg = r.uleb();
                        restore(st, reg);
                    }
                    0x07 => {
                        let reg = r.uleb();
                        st.set(reg, c.ra, Reg::Undefined);
                    }
                    0x08 => {
                        let reg = r.uleb();
                        st.set(reg, c.ra, Reg::Same);
                    }
                    0x09 => {
                        let reg = r.uleb();
                        r.uleb();
                        st.set(reg, c.ra, Reg::Other);
                    }
                    0x0a => {
                        if depth < saved.len() {
                            saved[depth] = *st;
                        }
                        depth += 1;
                    }
                    0x0b => {
                        if depth == 0 {
                            return None;
                        }
                        depth -= 1;
                        if depth < saved.len() {
                            // Like libgcc, the remembered state includes the CFA rule.
                            *st = saved[depth];
                        }
                    }
                    0x0c => {
                        st.cfa_reg = r.uleb();
                        st.cfa_off = r.uleb() as i64;
                        st.cfa_expr = false;
                    }
                    0x0d => {
                        st.cfa_reg = r.uleb();
                        st.cfa_expr = false;
                    }
                    0x0e => st.cfa_off = r.uleb() as i64,
                    0x0f => {
                        let n = r.uleb() as usize;
                        r.p += n;
                        st.cfa_expr = true;
                    }
                    0x10 | 0x16 => {
                        let reg = r.uleb();
                        let n = r.uleb() as usize;
                        r.p += n;
                        st.set(reg, c.ra, Reg::Other);
                    }
                    0x11 => {
                        let reg = r.uleb();
                        let off = r.sleb() * c.data_align;
                        st.set(reg, c.ra, Reg::At(off));
                    }
                    0x12 => {
                        st.cfa_reg = r.uleb();
                        st.cfa_off = r.sleb() * c.data_align;
                        st.cfa_expr = false;
                    }
                    0x13 => st.cfa_off = r.sleb() * c.data_align,
                    0x14 | 0x15 => {
                        let reg = r.uleb();
                        r.uleb();
                        st.set(reg, c.ra, Reg::Other);
                    }
                    0x2e => {
                        r.uleb();
                    }
                    0x2f => {
                        let reg = r.uleb();
                        let off = -(r.uleb() as i64) * c.data_align;
                        st.set(reg, c.ra, Reg::At(off));
                    }
                    _ => return None,
                }
            }
        }
        Some(())
    }
}

// ---------------------------------------------------------------------------------------------
// The depot

const TABLE_BITS: u32 = 17;
const TABLE_LEN: usize = 1 << TABLE_BITS;
/// Words of stack records (header + PCs): 32 MiB, made writable as used (`STORE`); under
/// `RLIMIT_DATA` at most an eighth of the limit.
const STORE_WORDS: usize = 1 << 22;

/// The depot's store, charged to the process as it fills (`meta::Table`).
static STORE: crate::meta::Table = crate::meta::Table::new();

pub struct Depot {
    table: AtomicPtr<AtomicU32>,
    store: AtomicPtr<u64>,
    /// Words of `store`.
    words: AtomicUsize,
    cursor: AtomicUsize,
    stacks: AtomicUsize,
    dropped: AtomicU64,
}

pub static DEPOT: Depot = Depot {
    table: AtomicPtr::new(ptr::null_mut()),
    store: AtomicPtr::new(ptr::null_mut()),
    words: AtomicUsize::new(0),
    cursor: AtomicUsize::new(1),
    stacks: AtomicUsize::new(0),
    dropped: AtomicU64::new(0),
};

fn hash(frames: &[usize]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3;
    for &f in frames {
        h = (h ^ f as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    h ^ (h >> 32)
}

impl Depot {
    fn init(&self) {
        let words = crate::sys::data_limit().map_or(STORE_WORDS, |l| (l / 8 / 8).min(STORE_WORDS));
        let store = STORE.map(words * 8) as *mut u64;
        let table = crate::meta::map(TABLE_LEN * 4) as *mut AtomicU32;
        if store.is_null() || table.is_null() {
            return;
        }
        self.words.store(words, Ordering::Relaxed);
        self.store.store(store, Ordering::Release);
        self.table.store(table, Ordering::Release);
    }

    /// The id of `frames` (stored if new); 0 when the depot is full or absent.
    pub fn intern(&self, frames: &[usize]) -> u32 {
        let table = self.table.load(Ordering::Acquire);
        let store = self.store.load(Ordering::Acquire);
        if frames.is_empty() || table.is_null() || store.is_null() {
            return 0;
        }
        let h = hash(frames);
        let header = (h << 8) | frames.len() as u64;
        let mut i = (h as usize) & (TABLE_LEN - 1);
        let mut mine = 0usize;
        for _ in 0..64 {
            // SAFETY: i < TABLE_LEN.
            let slot = unsafe { &*table.add(i) };
            let mut id = slot.load(Ordering::Acquire);
            if id == 0 {
                if self.stacks.load(Ordering::Relaxed) >= TABLE_LEN * 3 / 4 {
                    break;
                }
                if mine == 0 {
                    let need = frames.len() + 1;
                    let at = self.cursor.fetch_add(need, Ordering::Relaxed);
                    if at + need > self.words.load(Ordering::Relaxed) || !STORE.ensure((at + need) * 8) {
                        break;
                    }
                    // SAFETY: words at..at+need are ours (reserved above) inside the store.
                    unsafe {
                        *store.add(at) = header;
                        for (k, &f) in frames.iter().enumerate() {
                            *store.add(at + 1 + k) = f as u64;
                        }
                    }
                    mine = at;
                }
                match slot.compare_exchange(0, mine as u32, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => {
                        self.stacks.fetch_add(1, Ordering::Relaxed);
                        return mine as u32;
                    }
                    Err(other) => id = other,
                }
            }
            // SAFETY: a published id is the index of a complete record in the store.
            let same = unsafe {
                *store.add(id as usize) == header
                    && frames.iter().enumerate().all(|(k, &f)| *store.add(id as usize + 1 + k) == f as u64)
            };
            if same {
                return id;
            }
            i = (i + 1) & (TABLE_LEN - 1);
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
        0
    }

    /// The frames of stack `id` (0: none).
    pub fn get(&self, id: u32) -> &'static [u64] {
        let store = self.store.load(Ordering::Acquire);
        if id == 0 || store.is_null() || id as usize >= self.words.load(Ordering::Relaxed) {
            return &[];
        }
        // SAFETY: ids come from `intern`: a header then its frames, all inside the store.
        unsafe {
            let n = (*store.add(id as usize) & 0xff) as usize;
            core::slice::from_raw_parts(store.add(id as usize + 1), n.min(MAX_FRAMES))
        }
    }

    /// (stacks stored, bytes of store used, stacks not recorded because the depot was full).
    pub fn usage(&self) -> (usize, usize, u64) {
        (
            self.stacks.load(Ordering::Relaxed),
            self.cursor.load(Ordering::Relaxed).min(self.words.load(Ordering::Relaxed)) * 8 + TABLE_LEN * 4,
            self.dropped.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `refresh_modules`, again while another thread holds the loader lock (the tests run in
    /// parallel, and each refreshes the table): false if it never got the lock in 10 s.
    fn refreshed() -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(10) {
            if refresh_modules() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        false
    }

    #[test]
    fn own_header_gives_the_range_the_loader_gives() {
        let from_header = text_from_own_header().expect("own program headers readable");
        assert!(refreshed());
        let m = module_of(text_from_own_header as *const () as usize).expect("this code is in a known module");
        assert_eq!(from_header, (m.lo, m.hi));
        let pc = own_header_gives_the_range_the_loader_gives as *const () as usize;
        assert!(pc >= from_header.0 && pc < from_header.1);
    }

    /// The dynamic linker's code as read from its header at `AT_BASE` is the range the loaded
    /// objects' list gives for the object named after it (`heap::needs_view` relies on it).
    #[test]
    fn the_dynamic_linkers_header_gives_its_range() {
        let (lo, hi) = loader_text().expect("a dynamically linked test binary has AT_BASE");
        assert!(refreshed());
        let m = module_of(lo).expect("the dynamic linker is a known module");
        assert_eq!((lo, hi), (m.lo, m.hi));
        let name = core::str::from_utf8(m.name()).unwrap();
        assert!(name.contains("ld-linux"), "{name}");
    }
}
