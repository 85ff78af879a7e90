//! Out-of-band metadata memory: a bump allocator over private anonymous chunks that are
//! never reachable from program objects. Blocks are never returned here; the owners of
//! fixed-size blocks (slab slot tables, thread caches) keep their own free lists.

use core::ptr;

use crate::lock::Locked;
use crate::sys;

const CHUNK: usize = 64 << 20;

/// Mapped bytes kept past every block: a lock-free reader that pairs a slot table with the
/// wrong class (a span reused under it) reads at most this far past the table's start, and
/// stays in mapped memory (`slab::page_has_live_lane`). At least the biggest slot table.
pub const READ_SLACK: usize = 1 << 20;

struct Arena {
    cur: usize,
    end: usize,
}

static ARENA: Locked<Arena> = Locked::new(Arena { cur: 0, end: 0 });

/// Returns `bytes` of zeroed memory aligned to 64, or null when the system is out of memory.
pub fn alloc(bytes: usize) -> *mut u8 {
    let bytes = sys::round_up(bytes.max(1), 64);
    let mut a = ARENA.lock();
    if a.cur + bytes + READ_SLACK > a.end {
        let len = sys::round_up(bytes + READ_SLACK, CHUNK);
        let p = sys::map_meta(len);
        if p.is_null() {
            return ptr::null_mut();
        }
        a.cur = p as usize;
        a.end = p as usize + len;
    }
    let p = a.cur;
    a.cur += bytes;
    p as *mut u8
}

/// The lock, for the fork handlers.
pub fn raw_lock() -> &'static crate::lock::RawMutex {
    ARENA.raw()
}
