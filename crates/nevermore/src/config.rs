//! Options, read once from `NEVERMORE_OPTIONS` (`key=value` pairs separated by `:` or `,`,
//! in the style of `ASAN_OPTIONS`). Parsing works on the environment string in place and
//! never allocates. A malformed option is a clear one-line error and exit status 1: running
//! silently with a setting the user did not ask for would be worse.

/// How use-after-free is handled (see the `alias` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every object has its own alias page, revoked before `free` returns: every later access
    /// through a dangling pointer traps.
    Detect,
    /// Objects share alias pages in groups; revocations are batched. A dangling pointer can
    /// never reach a newer object; late accesses trap.
    Prevent,
}

/// Parsed options. `report_path` and `syslog_path` borrow the option string: the library's
/// own copy of the environment variable, which lives as long as the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    pub mode: Mode,
    /// Print counters when the process exits.
    pub stats: bool,
    /// Also print them every this many seconds while the process runs (0: never), at the
    /// first refill of a thread cache once the time has come (`stats::maybe_periodic`).
    pub stats_interval_s: u32,
    /// Append reports (and stats) to this file instead of stderr.
    pub report_path: Option<&'static [u8]>,
    /// Say once on stderr how the allocator set itself up.
    pub verbose: bool,
    /// Exit with this status after a report instead of dying of SIGABRT.
    pub exitcode: Option<u8>,
    /// Address space reserved for one-time aliases, in MiB (default 32 TiB). When it is used
    /// up, addresses of retired epochs are reused (degrade mode, counted in the stats).
    pub alias_space_mib: usize,
    /// Address space large objects take fresh addresses from, in MiB (default 32 TiB). Past
    /// it, the addresses of large objects freed long ago are reused (`large::take_va`).
    pub large_space_mib: usize,
    /// Reports as one JSON object per line (`report_format=json`) instead of text.
    pub json: bool,
    /// Detect mode: record allocation and free stacks (`stacks=0` turns it off).
    pub stacks: bool,
    /// Detect mode with stacks: which frees by another family's function than the allocating
    /// one are reported (`alloc_dealloc_mismatch`): 0 none; 1 `operator new` against
    /// `operator new[]` (`delete` of an array, `delete[]` of a single object); 2 also the C
    /// functions against the C++ operators (`free` of an object from `new`, `delete` of memory
    /// from `malloc`). Level 2 also reports every deletion of a module whose C++ runtime is
    /// linked in statically (its `operator new` calls `malloc` unseen), hence the default 1.
    pub alloc_dealloc_mismatch: u8,
    /// Detect mode: at exit, report the live objects no pointer leads to (`detect_leaks`).
    pub detect_leaks: bool,
    /// Detect mode: at exit, check the canaries of the objects still live, which no `free`
    /// will check (`check_at_exit`; on in detect mode by default).
    pub check_at_exit: bool,
    /// Detect mode: every object, small ones too, gets pool pages of its own and lies against
    /// a guard page, so that an access past its end traps where it happens (`guard_all`).
    pub guard_all: bool,
    /// The copies the program calls (`memcpy`, `strcpy`, ...) check their heap buffers
    /// against their objects' ends first (`check_copies`).
    pub check_copies: bool,
    /// The string and memory reads the program calls (`strlen`, `memcmp`, ...) are held to
    /// their objects' ends when they return (`check_reads`; on in detect mode by default).
    pub check_reads: bool,
    /// Freed pool pages not reused for this many milliseconds are returned to the system.
    pub dirty_decay_ms: u32,
    /// Prevent mode, single-threaded processes: reuse the dead slots of pinned groups once a
    /// conservative scan proves no pointer to them is left (`sweep`).
    pub sweep: bool,
    /// Percent of the time sweeps may take (`sweep_share`): after a sweep that took `t`, the
    /// next waits `t * (100 - share) / share`.
    pub sweep_share: u32,
    /// Sweep processes with several threads too, holding the others still with ptrace while a
    /// sweep runs (`sweep_threads`; `stop`).
    pub sweep_threads: bool,
    /// A second task reads a share of the heap beside the sweeping thread, on another
    /// processor (`sweep_helper`; `stop::helper`).
    pub sweep_helper: bool,
    /// Let the allocator's own system calls on its own descriptors through seccomp filters the
    /// program installs while it runs (`seccomp_exempt`; `seccomp`).
    pub seccomp_exempt: bool,
    /// Report a sized free (sized `operator delete`, `free_sized`) given another size than the
    /// object's (`size_mismatch`); else the object is freed as if no size were given.
    pub size_mismatch: bool,
    /// Heaps with more MiB of live objects are not swept (`sweep_max_live`): the program stands
    /// still while a sweep reads them, about half a millisecond per MiB.
    pub sweep_max_live_mib: u32,
    /// The number of the first epoch (1): for tests of what happens when epoch numbers wrap
    /// round, which takes 2^32 - 2 epochs otherwise.
    pub first_epoch: u32,
    /// Entries of the mirror table (a power of two); None: 65536 in prevent mode, 4194304 in
    /// detect mode.
    pub mirror_table: Option<u32>,
    /// When reports and messages also go to the system log.
    pub syslog: Syslog,
    /// The system log's socket (`/dev/log` when None).
    pub syslog_path: Option<&'static [u8]>,
}

impl Options {
    pub const DEFAULT: Options = Options {
        mode: Mode::Prevent,
        stats: false,
        stats_interval_s: 0,
        report_path: None,
        verbose: false,
        exitcode: None,
        json: false,
        stacks: true,
        alloc_dealloc_mismatch: 1,
        detect_leaks: false,
        check_at_exit: false,
        guard_all: false,
        check_copies: true,
        check_reads: false,
        alias_space_mib: 32 << 20,
        large_space_mib: 32 << 20,
        dirty_decay_ms: 10_000,
        sweep: true,
        sweep_share: 33,
        sweep_threads: true,
        sweep_helper: true,
        seccomp_exempt: true,
        size_mismatch: true,
        sweep_max_live_mib: 64,
        first_epoch: 1,
        mirror_table: None,
        syslog: Syslog::Auto,
        syslog_path: None,
    };
}

/// Every option, for the error message and the docs.
pub const KNOWN: &str =
    "mode, stats, stats_interval, report_path, verbose, exitcode, report_format, stacks, alloc_dealloc_mismatch, detect_leaks, check_at_exit, guard_all, check_copies, check_reads, alias_space, large_space, dirty_decay, sweep, sweep_threads, sweep_helper, sweep_share, sweep_max_live, seccomp_exempt, size_mismatch, first_epoch, mirror_table, syslog, syslog_path";

/// When reports also go to the system log (`syslog`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Syslog {
    /// When nobody would see them otherwise: no file of `report_path` (none set, or it cannot
    /// be opened), and standard error closed or `/dev/null` (a daemon's usual state).
    Auto,
    Never,
    Always,
}

#[derive(Debug, PartialEq, Eq)]
pub enum ParseError<'a> {
    /// The option string is longer than `MAX_TEXT` bytes.
    TooLong(usize),
    UnknownKey(&'a [u8]),
    BadValue {
        key: &'a [u8],
        value: &'a [u8],
        expected: &'static str,
    },
    MissingValue(&'a [u8]),
}

/// Longest option string taken (a path may be up to 4096 bytes, with room for the rest).
pub const MAX_TEXT: usize = 8192;

/// Parses an option string. Empty items (`a=1::b=0`) are ignored.
pub fn parse(s: &'static [u8]) -> Result<Options, ParseError<'static>> {
    let mut o = Options::DEFAULT;
    let mut guard_all_value: &'static [u8] = b"";
    let mut check_reads = None;
    let mut detect_leaks_value: &'static [u8] = b"";
    let mut check_at_exit = None;
    for item in s.split(|&c| c == b':' || c == b',') {
        if item.is_empty() {
            continue;
        }
        let eq = match item.iter().position(|&c| c == b'=') {
            Some(i) => i,
            None => return Err(ParseError::MissingValue(item)),
        };
        let (key, value) = (&item[..eq], &item[eq + 1..]);
        match key {
            b"mode" => {
                o.mode = match value {
                    b"detect" => Mode::Detect,
                    b"prevent" => Mode::Prevent,
                    _ => return Err(ParseError::BadValue { key, value, expected: "detect or prevent" }),
                }
            }
            b"stats" => o.stats = parse_bool(key, value)?,
            b"detect_leaks" => {
                o.detect_leaks = parse_bool(key, value)?;
                detect_leaks_value = value;
            }
            b"check_at_exit" => check_at_exit = Some((parse_bool(key, value)?, value)),
            b"stacks" => o.stacks = parse_bool(key, value)?,
            b"alloc_dealloc_mismatch" => {
                o.alloc_dealloc_mismatch = match value {
                    b"0" => 0,
                    b"1" => 1,
                    b"2" => 2,
                    _ => return Err(ParseError::BadValue { key, value, expected: "0, 1 or 2" }),
                }
            }
            b"guard_all" => {
                o.guard_all = parse_bool(key, value)?;
                guard_all_value = value;
            }
            b"check_copies" => o.check_copies = parse_bool(key, value)?,
            b"check_reads" => check_reads = Some(parse_bool(key, value)?),
            b"report_format" => {
                o.json = match value {
                    b"text" => false,
                    b"json" => true,
                    _ => return Err(ParseError::BadValue { key, value, expected: "text or json" }),
                }
            }
            b"verbose" => o.verbose = parse_bool(key, value)?,
            b"sweep" => o.sweep = parse_bool(key, value)?,
            b"sweep_threads" => o.sweep_threads = parse_bool(key, value)?,
            b"sweep_helper" => o.sweep_helper = parse_bool(key, value)?,
            b"seccomp_exempt" => o.seccomp_exempt = parse_bool(key, value)?,
            b"size_mismatch" => o.size_mismatch = parse_bool(key, value)?,
            b"report_path" => {
                if value.is_empty() {
                    return Err(ParseError::BadValue { key, value, expected: "a file path" });
                }
                o.report_path = Some(value)
            }
            b"syslog" => {
                o.syslog = match value {
                    b"auto" => Syslog::Auto,
                    b"0" | b"false" | b"no" => Syslog::Never,
                    b"1" | b"true" | b"yes" => Syslog::Always,
                    _ => return Err(ParseError::BadValue { key, value, expected: "auto, 0 or 1" }),
                }
            }
            b"syslog_path" => {
                if value.is_empty() || value.len() >= 108 {
                    return Err(ParseError::BadValue { key, value, expected: "a socket path (below 108 bytes)" });
                }
                o.syslog_path = Some(value)
            }
            b"exitcode" => o.exitcode = Some(parse_in(key, value, 1..=255, "a number from 1 to 255")? as u8),
            b"alias_space" => o.alias_space_mib = parse_space(key, value)?,
            b"large_space" => o.large_space_mib = parse_space(key, value)?,
            b"dirty_decay" => {
                o.dirty_decay_ms = parse_in(key, value, 0..=3_600_000, "milliseconds from 0 to 3600000")? as u32
            }
            b"stats_interval" => {
                o.stats_interval_s = parse_in(key, value, 0..=86_400, "seconds from 0 to 86400")? as u32
            }
            b"sweep_share" => o.sweep_share = parse_in(key, value, 1..=90, "a percentage from 1 to 90")? as u32,
            b"sweep_max_live" => {
                o.sweep_max_live_mib = parse_in(key, value, 1..=1 << 20, "MiB from 1 to 1048576")? as u32
            }
            b"first_epoch" => {
                o.first_epoch = parse_in(key, value, 1..=u32::MAX as u64 - 1, "a number from 1 to 4294967294")? as u32
            }
            b"mirror_table" => {
                let n = parse_uint(value)
                    .filter(|&n| n.is_power_of_two() && (64..=1 << 22).contains(&n))
                    .ok_or(ParseError::BadValue { key, value, expected: "a power of two from 64 to 4194304" })?;
                o.mirror_table = Some(n as u32);
            }
            _ => return Err(ParseError::UnknownKey(key)),
        }
    }
    // Reads are checked where bugs are looked for, unless said otherwise.
    o.check_reads = check_reads.unwrap_or(o.mode == Mode::Detect);
    if o.guard_all && o.mode != Mode::Detect {
        // A page of memory per object is a bug-hunting setting; prevent mode would pay it for
        // nothing it promises (and has no guard-page layout for small objects).
        return Err(ParseError::BadValue {
            key: b"guard_all",
            value: guard_all_value,
            expected: "0 unless mode=detect",
        });
    }
    match check_at_exit {
        Some((true, value)) if o.mode != Mode::Detect => {
            // Prevent mode holds no stacks to report with, and its sweeps use the slots'
            // size entries the check reads.
            return Err(ParseError::BadValue { key: b"check_at_exit", value, expected: "0 unless mode=detect" });
        }
        Some((on, _)) => o.check_at_exit = on,
        None => o.check_at_exit = o.mode == Mode::Detect,
    }
    if o.detect_leaks && o.mode != Mode::Detect {
        // The leak check reads the whole process at exit and reports with allocation stacks,
        // which prevent mode does not record.
        return Err(ParseError::BadValue {
            key: b"detect_leaks",
            value: detect_leaks_value,
            expected: "0 unless mode=detect",
        });
    }
    Ok(o)
}

/// An address-space size in MiB (`alias_space`, `large_space`): 16 MiB to 64 TiB.
fn parse_space(key: &'static [u8], value: &'static [u8]) -> Result<usize, ParseError<'static>> {
    parse_in(key, value, 16..=64 << 20, "a size in MiB from 16 to 67108864").map(|n| n as usize)
}

/// A decimal number in `range`, or the error saying what was `expected`.
fn parse_in(
    key: &'static [u8],
    value: &'static [u8],
    range: core::ops::RangeInclusive<u64>,
    expected: &'static str,
) -> Result<u64, ParseError<'static>> {
    parse_uint(value).filter(|n| range.contains(n)).ok_or(ParseError::BadValue { key, value, expected })
}

fn parse_bool(key: &'static [u8], value: &'static [u8]) -> Result<bool, ParseError<'static>> {
    match value {
        b"1" | b"true" | b"yes" => Ok(true),
        b"0" | b"false" | b"no" => Ok(false),
        _ => Err(ParseError::BadValue { key, value, expected: "0 or 1" }),
    }
}

/// A decimal number of up to 18 digits, nothing else.
pub(crate) fn parse_uint(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 18 {
        return None;
    }
    let mut n: u64 = 0;
    for &c in v {
        if !c.is_ascii_digit() {
            return None;
        }
        n = n * 10 + (c - b'0') as u64;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_values() {
        assert_eq!(parse(b""), Ok(Options::DEFAULT));
        assert_eq!(Options::DEFAULT.mode, Mode::Prevent);
        assert_eq!(parse(b"mode=detect").unwrap().mode, Mode::Detect);
        let o = parse(b"stats=1:report_path=/tmp/x.log,verbose=true::exitcode=23:mode=prevent").unwrap();
        assert_eq!(o.mode, Mode::Prevent);
        assert!(o.stats && o.verbose);
        assert_eq!(o.report_path, Some(&b"/tmp/x.log"[..]));
        assert_eq!(o.exitcode, Some(23));
        assert!(!parse(b"stats=0").unwrap().stats);
        assert!(parse(b"report_format=json").unwrap().json);
        assert!(!parse(b"report_format=text").unwrap().json);
        assert!(Options::DEFAULT.stacks && !parse(b"stacks=0").unwrap().stacks);
        assert_eq!(parse(b"").unwrap().alloc_dealloc_mismatch, 1);
        assert_eq!(parse(b"alloc_dealloc_mismatch=0").unwrap().alloc_dealloc_mismatch, 0);
        assert_eq!(parse(b"alloc_dealloc_mismatch=2").unwrap().alloc_dealloc_mismatch, 2);
        assert!(!parse(b"mode=detect").unwrap().detect_leaks);
        assert!(parse(b"mode=detect:detect_leaks=1").unwrap().detect_leaks);
        assert_eq!(
            parse(b"detect_leaks=1"),
            Err(ParseError::BadValue { key: b"detect_leaks", value: b"1", expected: "0 unless mode=detect" })
        );
        assert!(matches!(parse(b"alloc_dealloc_mismatch=3"), Err(ParseError::BadValue { .. })));
        assert!(matches!(parse(b"alloc_dealloc_mismatch=yes"), Err(ParseError::BadValue { .. })));
        assert!(parse(b"").unwrap().size_mismatch);
        assert!(!parse(b"size_mismatch=0").unwrap().size_mismatch);
        assert!(!parse(b"").unwrap().guard_all);
        assert!(parse(b"mode=detect:guard_all=1").unwrap().guard_all);
        assert!(parse(b"guard_all=yes,mode=detect").unwrap().guard_all);
        assert!(!parse(b"guard_all=0").unwrap().guard_all);
        assert!(parse(b"").unwrap().check_copies);
        assert!(!parse(b"check_copies=0").unwrap().check_copies);
        assert!(!parse(b"").unwrap().check_at_exit && parse(b"mode=detect").unwrap().check_at_exit);
        assert!(!parse(b"mode=detect:check_at_exit=0").unwrap().check_at_exit);
        assert!(parse(b"check_at_exit=0").is_ok());
        assert_eq!(
            parse(b"check_at_exit=1"),
            Err(ParseError::BadValue { key: b"check_at_exit", value: b"1", expected: "0 unless mode=detect" })
        );
        assert!(!parse(b"").unwrap().check_reads && parse(b"mode=detect").unwrap().check_reads);
        assert!(
            parse(b"check_reads=1").unwrap().check_reads && !parse(b"mode=detect:check_reads=0").unwrap().check_reads
        );
        assert_eq!(
            parse(b"guard_all=1"),
            Err(ParseError::BadValue { key: b"guard_all", value: b"1", expected: "0 unless mode=detect" })
        );
        assert!(matches!(parse(b"mode=detect:guard_all=1:mode=prevent"), Err(ParseError::BadValue { .. })));
        assert!(matches!(parse(b"report_format=xml"), Err(ParseError::BadValue { .. })));
        assert!(Options::DEFAULT.sweep && !parse(b"sweep=0").unwrap().sweep);
        assert!(Options::DEFAULT.sweep_threads && !parse(b"sweep_threads=0").unwrap().sweep_threads);
        assert!(Options::DEFAULT.sweep_helper && !parse(b"sweep_helper=0").unwrap().sweep_helper);
        assert!(Options::DEFAULT.seccomp_exempt && !parse(b"seccomp_exempt=0").unwrap().seccomp_exempt);
        assert_eq!(Options::DEFAULT.stats_interval_s, 0);
        assert_eq!(parse(b"stats_interval=30").unwrap().stats_interval_s, 30);
        assert_eq!(parse(b"stats_interval=0").unwrap().stats_interval_s, 0);
        assert!(matches!(parse(b"stats_interval=86401"), Err(ParseError::BadValue { key: b"stats_interval", .. })));
        assert!(matches!(parse(b"stats_interval=1s"), Err(ParseError::BadValue { key: b"stats_interval", .. })));
        assert_eq!(Options::DEFAULT.sweep_share, 33);
        assert_eq!(parse(b"sweep_share=50").unwrap().sweep_share, 50);
        assert_eq!(parse(b"sweep_share=1").unwrap().sweep_share, 1);
        assert!(matches!(parse(b"sweep_share=0"), Err(ParseError::BadValue { key: b"sweep_share", .. })));
        assert!(matches!(parse(b"sweep_share=91"), Err(ParseError::BadValue { key: b"sweep_share", .. })));
        assert!(matches!(parse(b"sweep_share=1/3"), Err(ParseError::BadValue { .. })));
        assert_eq!(Options::DEFAULT.sweep_max_live_mib, 64);
        assert_eq!(parse(b"sweep_max_live=512").unwrap().sweep_max_live_mib, 512);
        assert!(matches!(parse(b"sweep_max_live=0"), Err(ParseError::BadValue { key: b"sweep_max_live", .. })));
        assert!(matches!(parse(b"sweep_max_live=1048577"), Err(ParseError::BadValue { .. })));
    }

    #[test]
    fn errors_name_the_culprit() {
        assert_eq!(parse(b"stats=1:bogus=2"), Err(ParseError::UnknownKey(b"bogus")));
        assert!(matches!(parse(b"stats=maybe"), Err(ParseError::BadValue { key: b"stats", .. })));
        assert!(matches!(parse(b"exitcode=0"), Err(ParseError::BadValue { .. })));
        assert_eq!(parse(b"alias_space=64").unwrap().alias_space_mib, 64);
        assert!(matches!(parse(b"alias_space=8"), Err(ParseError::BadValue { .. })));
        assert!(matches!(parse(b"alias_space=lots"), Err(ParseError::BadValue { .. })));
        assert_eq!(Options::DEFAULT.large_space_mib, 32 << 20);
        assert_eq!(parse(b"large_space=256").unwrap().large_space_mib, 256);
        assert!(matches!(parse(b"large_space=15"), Err(ParseError::BadValue { key: b"large_space", .. })));
        assert!(matches!(parse(b"large_space=67108865"), Err(ParseError::BadValue { key: b"large_space", .. })));
        assert!(matches!(parse(b"exitcode=256"), Err(ParseError::BadValue { .. })));
        assert!(matches!(parse(b"exitcode=-1"), Err(ParseError::BadValue { .. })));
        assert_eq!(parse(b"stats"), Err(ParseError::MissingValue(b"stats")));
        assert!(matches!(parse(b"mode=fast"), Err(ParseError::BadValue { key: b"mode", .. })));
        assert!(matches!(parse(b"report_path="), Err(ParseError::BadValue { .. })));
        assert_eq!(Options::DEFAULT.syslog, Syslog::Auto);
        assert_eq!(parse(b"syslog=1").unwrap().syslog, Syslog::Always);
        assert_eq!(parse(b"syslog=0").unwrap().syslog, Syslog::Never);
        assert!(matches!(parse(b"syslog=maybe"), Err(ParseError::BadValue { .. })));
        assert_eq!(parse(b"syslog_path=/run/log").unwrap().syslog_path, Some(&b"/run/log"[..]));
        assert!(matches!(parse(b"syslog_path="), Err(ParseError::BadValue { .. })));
        assert_eq!(Options::DEFAULT.first_epoch, 1);
        assert_eq!(parse(b"mirror_table=64").unwrap().mirror_table, Some(64));
        assert_eq!(parse(b"mirror_table=4194304").unwrap().mirror_table, Some(1 << 22));
        for bad in [&b"mirror_table=32"[..], b"mirror_table=100", b"mirror_table=8388608"] {
            assert!(matches!(parse(bad), Err(ParseError::BadValue { key: b"mirror_table", .. })), "{bad:?}");
        }
        assert_eq!(parse(b"first_epoch=4294967294").unwrap().first_epoch, crate::alias::LAST_EPOCH);
        assert!(matches!(parse(b"first_epoch=4294967295"), Err(ParseError::BadValue { key: b"first_epoch", .. })));
        assert!(matches!(parse(b"first_epoch=0"), Err(ParseError::BadValue { .. })));
        assert_eq!(Options::DEFAULT.dirty_decay_ms, 10_000);
        assert_eq!(parse(b"dirty_decay=0").unwrap().dirty_decay_ms, 0);
        assert_eq!(parse(b"dirty_decay=3600000").unwrap().dirty_decay_ms, 3_600_000);
        assert!(matches!(parse(b"dirty_decay=3600001"), Err(ParseError::BadValue { key: b"dirty_decay", .. })));
        assert!(matches!(parse(b"dirty_decay=1s"), Err(ParseError::BadValue { .. })));
    }
}
