//! The process's mappings, as `/proc/self/maps` lists them: which are the program's own memory
//! (what sweeps read, what `mlockall` should lock) and which are the allocator's (the pool's
//! views, the alias arena, metadata), and what the program did to the allocator's.

use crate::{alias, meta, pool, sys};

/// Room for `/proc/self/maps`.
pub const MAPS_BYTES: usize = 1 << 20;
/// No-access mappings larger than this are address-space reservations, not data.
const MAX_NO_ACCESS: usize = 1 << 30;

/// A line of `/proc/self/maps`: (start, end, protection (`PROT_*` bits), shared, path).
pub fn parse_line(line: &[u8]) -> Option<(usize, usize, i32, bool, &[u8])> {
    let mut fields = line.split(|&c| c == b' ').filter(|f| !f.is_empty());
    let range = fields.next()?;
    let perms = fields.next()?;
    let dash = range.iter().position(|&c| c == b'-')?;
    let start = hex(&range[..dash])?;
    let end = hex(&range[dash + 1..])?;
    let (_offset, _dev, _inode) = (fields.next()?, fields.next()?, fields.next()?);
    let path = fields.next().unwrap_or(b"");
    if perms.len() < 4 || end < start {
        return None;
    }
    let prot = [(b'r', libc::PROT_READ), (b'w', libc::PROT_WRITE), (b'x', libc::PROT_EXEC)]
        .iter()
        .zip(perms)
        .fold(0, |p, (&(c, bit), &have)| if have == c { p | bit } else { p });
    Some((start, end, prot, perms[3] == b's', path))
}

fn hex(s: &[u8]) -> Option<usize> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v = 0usize;
    for &c in s {
        let d = (c as char).to_digit(16)?;
        v = (v << 4) | d as usize;
    }
    Some(v)
}

/// What a mapping of the program allows and what backs it.
#[derive(Clone, Copy)]
pub struct Access {
    pub readable: bool,
    pub shared: bool,
    /// Mapped from a file (not anonymous memory, nor a kernel-named one like `[stack]`).
    pub file: bool,
}

/// Calls `f(lo, hi, access)` for every range of the program's own memory in the
/// `/proc/self/maps` listing `maps`: every mapping but the pool's views, the alias arena, the
/// kernel's special mappings, big no-access reservations and the library's metadata (which
/// may have merged with the program's own mappings). Stops, returning false, when `f` does or
/// a line does not parse.
pub fn program_ranges(maps: &[u8], mut f: impl FnMut(usize, usize, Access) -> bool) -> bool {
    let (arena, arena_len) = alias::arena_range();
    let n = maps.len();
    let mut rest = 0;
    while rest < n {
        let end = maps[rest..n].iter().position(|&c| c == b'\n').map_or(n, |k| rest + k);
        let Some((lo, hi, prot, shared, path)) = parse_line(&maps[rest..end]) else { return false };
        let readable = prot & libc::PROT_READ != 0;
        let access = Access { readable, shared, file: !path.is_empty() && path[0] != b'[' };
        rest = end + 1;
        let ours = is_pool_view(path) || lo.wrapping_sub(arena) < arena_len;
        let special = matches!(path, b"[vvar]" | b"[vvar_vclock]" | b"[vsyscall]" | b"[vdso]");
        if ours || special || (!readable && hi - lo > MAX_NO_ACCESS) {
            continue;
        }
        let mut at = lo;
        while at < hi {
            let (from, to) = match meta::range_from(at) {
                Some((start, end)) if start <= at => (at, at.max(end.min(hi))),
                Some((start, _)) => (start.min(hi), start.min(hi)),
                None => (hi, hi),
            };
            // `[at, from)` is the program's; `[from, to)` is metadata.
            if from > at && !f(at, from, access) {
                return false;
            }
            at = to.max(from);
        }
    }
    true
}

/// After the program's `mlockall` (see `api::mlockall`): unlocks the pool's views and the alias
/// arena, whose pages revocation must be able to drop (`MADV_DONTNEED` and `MADV_REMOVE` refuse
/// locked mappings); with `fill_program`, fills and locks the program's own memory, as
/// `mlockall(MCL_CURRENT)` without `MCL_ONFAULT` would have. Returns false when the listing of
/// mappings cannot be had.
pub fn after_mlockall(fill_program: bool) -> bool {
    let (arena, arena_len) = alias::arena_range();
    with_listing(|maps| {
        for line in maps.split(|&c| c == b'\n') {
            if let Some((lo, hi, _, _, path)) = parse_line(line) {
                if is_pool_view(path) || lo.wrapping_sub(arena) < arena_len {
                    // SAFETY: munlock of the allocator's own mapping; it changes no contents.
                    unsafe { libc::munlock(lo as *const libc::c_void, hi - lo) };
                }
            }
        }
        !fill_program
            || program_ranges(maps, |lo, hi, access| {
                if access.readable {
                    // SAFETY: mlock of the program's own mapped range; it changes no contents.
                    unsafe { libc::mlock(lo as *const libc::c_void, hi - lo) };
                }
                true
            })
    })
    .unwrap_or(false)
}

/// `f` of the listing of `/proc/self/maps`, read into a buffer of our own (outside a sweep,
/// whose buffers are its own); None when it cannot be read.
fn with_listing<R>(f: impl FnOnce(&[u8]) -> R) -> Option<R> {
    let buf = meta::map(MAPS_BYTES);
    if buf.is_null() {
        return None;
    }
    // SAFETY: a fresh private mapping of MAPS_BYTES bytes, ours until unmapped below.
    let maps = unsafe { core::slice::from_raw_parts_mut(buf, MAPS_BYTES) };
    let r = sys::read_file(c"/proc/self/maps", maps).map(|n| f(&maps[..n]));
    meta::unmap(buf, MAPS_BYTES);
    r
}

/// Most of the program's protections on the allocator's views that a fork carries over.
const MAX_PROTECTED: usize = 4096;
const ENTRY: usize = core::mem::size_of::<(usize, usize, i32)>();

/// Protections the program set on parts of the pool's views (`mprotect` of a heap buffer, to
/// make it read-only or executable), which a forked child's remapping of those views drops:
/// recorded before it (`record`), set again after (`restore`).
pub struct Protections {
    list: *mut (usize, usize, i32),
    n: usize,
}

impl Protections {
    /// The views of the pool that are not readable and writable as the allocator maps them.
    pub fn record() -> Protections {
        let mut p = Protections { list: meta::map(MAX_PROTECTED * ENTRY) as *mut (usize, usize, i32), n: 0 };
        if p.list.is_null() {
            return p;
        }
        with_listing(|maps| {
            for line in maps.split(|&c| c == b'\n') {
                let Some((lo, hi, prot, _, path)) = parse_line(line) else { continue };
                if is_pool_view(path) && prot != libc::PROT_READ | libc::PROT_WRITE && p.n < MAX_PROTECTED {
                    // SAFETY: below the list's capacity.
                    unsafe { *p.list.add(p.n) = (lo, hi, prot) };
                    p.n += 1;
                }
            }
        });
        p
    }

    /// Sets the recorded protections again.
    pub fn restore(self) {
        for k in 0..self.n {
            // SAFETY: below the number recorded.
            let (lo, hi, prot) = unsafe { *self.list.add(k) };
            // SAFETY: the protection the program had on this range of the allocator's view.
            unsafe { libc::mprotect(lo as *mut libc::c_void, hi - lo, prot) };
        }
        if !self.list.is_null() {
            meta::unmap(self.list as *mut u8, MAX_PROTECTED * ENTRY);
        }
    }
}

/// Whether a mapping's path names the pool's memfd (its canonical view, mirrors or a large
/// object's view).
pub fn is_pool_view(path: &[u8]) -> bool {
    path.strip_prefix(b"/memfd:").is_some_and(|name| name.starts_with(pool::MEMFD_NAME.to_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_parse() {
        let l = b"7f4513c20000-7f4513c22000 rw-p 001d2000 00:1f 1234                       /usr/lib/libc.so.6";
        let rw = libc::PROT_READ | libc::PROT_WRITE;
        assert_eq!(parse_line(l), Some((0x7f4513c20000, 0x7f4513c22000, rw, false, &b"/usr/lib/libc.so.6"[..])));
        let l = b"5f34a7600000-5f34a7c00000 rw-s 00000000 00:01 99 /memfd:nevermore-pool (deleted)";
        let (_, _, prot, s, path) = parse_line(l).unwrap();
        assert!(prot == rw && s && is_pool_view(path));
        let l = b"5f34a7600000-5f34a7601000 r-xs 00000000 00:01 99 /memfd:nevermore-pool (deleted)";
        assert_eq!(parse_line(l).unwrap().2, libc::PROT_READ | libc::PROT_EXEC);
        assert!(!is_pool_view(b"/memfd:other (deleted)") && !is_pool_view(b"/tmp/nevermore-pool"));
        let l = b"5f34a7c00000-7f34a7800000 ---p 00000000 00:00 0 ";
        assert_eq!(parse_line(l), Some((0x5f34a7c00000, 0x7f34a7800000, 0, false, &b""[..])));
        assert_eq!(parse_line(b"garbage"), None);
        assert_eq!(parse_line(b"2000-1000 rw-p 0 0 0"), None);
        assert_eq!(hex(b"ffffffffff600000"), Some(0xffffffffff600000));
        assert_eq!(hex(b"12g"), None);
    }
}
