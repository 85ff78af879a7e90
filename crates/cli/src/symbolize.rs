//! Symbolization of reports, outside the process that wrote them: the library prints raw
//! frames as `module+0xoffset (BuildId: hex)` (text) or `{"module": ..., "offset": ...,
//! "build_id": ...}` (JSON); here each frame gets `function file:line` from the module's DWARF
//! (falling back to its symbol table, then to `module+offset`).
//!
//! A frame's build id says which file to read: the debug file of that build in a debug
//! directory (`/usr/lib/debug/.build-id/ab/cdef....debug`, where distributions install their
//! debug symbol packages) when there is one, else the module itself if it is still that build.
//! A module replaced since the report (a package upgrade, a rebuilt program) is not read: its
//! symbols would name other functions, so the frame says why it is left raw instead.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// One source location of a frame (an inlined call chain yields several, innermost first).
#[derive(Clone, Debug, Default)]
pub struct Site {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

/// Where the symbols of a frame's module come from.
#[derive(Clone, Debug)]
enum Source {
    /// This file (the module, or its debug file).
    File(String),
    /// The module's file is another build now (its build id, when it has one) and no debug
    /// file of the reported build was found.
    Replaced(String, Option<String>),
}

#[derive(Default)]
pub struct Symbolizer {
    /// The root directory the program ran under: module paths are read below it.
    root: Option<PathBuf>,
    /// Directories searched for `.build-id/ab/cdef....debug` files.
    debug_dirs: Vec<PathBuf>,
    /// Per (module, build id): which file is read.
    sources: HashMap<(String, Option<String>), Source>,
    loaders: HashMap<String, Option<addr2line::Loader>>,
    /// Per file: the size of each symbol that has one, by its address.
    sizes: HashMap<String, HashMap<u64, u64>>,
}

/// The sizes of `module`'s symbols (static and dynamic) that have one, by address.
fn symbol_sizes(module: &str) -> HashMap<u64, u64> {
    use object::{Object, ObjectSymbol};
    let mut sizes = HashMap::new();
    let Ok(data) = std::fs::read(module) else { return sizes };
    let Ok(file) = object::File::parse(&*data) else { return sizes };
    for s in file.symbols().chain(file.dynamic_symbols()).filter(|s| s.size() > 0) {
        let n = sizes.entry(s.address()).or_insert(0);
        *n = s.size().max(*n);
    }
    sizes
}

/// What picks the file to symbolize from: an ELF file's build id (lower-case hexadecimal) and
/// the name its `.gnu_debuglink` section gives its debug file.
struct ElfIds {
    build_id: Option<String>,
    debuglink: Option<String>,
}

/// The `ElfIds` of the file at `path`; None when it cannot be read as ELF.
fn elf_ids(path: &Path) -> Option<ElfIds> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let build_id = file.build_id().ok()?.map(|b| b.iter().map(|x| format!("{x:02x}")).collect());
    let debuglink = file.gnu_debuglink().ok().flatten().and_then(|(name, _crc)| String::from_utf8(name.to_vec()).ok());
    Some(ElfIds { build_id, debuglink })
}

/// The build id of the ELF file at `path`, if it can be read and has one.
fn file_build_id(path: &Path) -> Option<String> {
    elf_ids(path).and_then(|ids| ids.build_id)
}

/// The default debug directory, below the program's root when it had another.
const DEBUG_DIR: &str = "/usr/lib/debug";

impl Symbolizer {
    pub fn new() -> Self {
        Self::with_dirs(None, Vec::new())
    }

    /// A symbolizer that reads each module at its path below `root` (when given), and looks
    /// for debug files in `debug_dirs` (by default `/usr/lib/debug`, below `root` if given).
    pub fn with_dirs(root: Option<PathBuf>, mut debug_dirs: Vec<PathBuf>) -> Self {
        if debug_dirs.is_empty() {
            debug_dirs.push(match &root {
                Some(r) => r.join(DEBUG_DIR.trim_start_matches('/')),
                None => PathBuf::from(DEBUG_DIR),
            });
        }
        Symbolizer { root, debug_dirs, ..Self::default() }
    }

    /// Where `module` (a path as the program saw it) is read.
    fn file_of(&self, module: &str) -> String {
        match &self.root {
            Some(r) => r.join(module.trim_start_matches('/')).to_string_lossy().into_owned(),
            None => module.to_string(),
        }
    }

    /// The file to read for `module` of build `id` (hex; None when the report gave none).
    fn source(&mut self, module: &str, id: Option<&str>) -> Source {
        let key = (module.to_string(), id.map(str::to_string));
        if let Some(s) = self.sources.get(&key) {
            return s.clone();
        }
        let file = self.file_of(module);
        let debug = id.filter(|id| id.len() > 2 && id.bytes().all(|b| b.is_ascii_hexdigit())).and_then(|id| {
            let (dir, rest) = id.split_at(2);
            self.debug_dirs
                .iter()
                .map(|d| d.join(".build-id").join(dir).join(format!("{rest}.debug")))
                .find(|p| file_build_id(p).as_deref() == Some(id))
        });
        let source = match debug {
            Some(p) => Source::File(p.to_string_lossy().into_owned()),
            None => match (elf_ids(Path::new(&file)), id) {
                (Some(ids), Some(id)) if ids.build_id.as_deref() != Some(id) => Source::Replaced(file, ids.build_id),
                // The same build, or a file that cannot be read (its frames stay raw).
                (Some(ids), _) => Source::File(self.linked_debug(&file, &ids).unwrap_or(file)),
                (None, _) => Source::File(file),
            },
        };
        self.sources.insert(key, source.clone());
        source
    }

    /// The debug file that `file` names in its `.gnu_debuglink` section (a program stripped
    /// with `objcopy --only-keep-debug` and `--add-gnu-debuglink`, as packagers and deployers
    /// do), looked for where gdb looks: beside it, in `.debug/` beside it, and below each debug
    /// directory at the module's directory. Only a debug file of the same build (or one where
    /// either file has no build id) is taken.
    fn linked_debug(&self, file: &str, ids: &ElfIds) -> Option<String> {
        let name = ids.debuglink.as_deref()?;
        let own = &ids.build_id;
        let path = Path::new(file);
        let dir = path.parent()?;
        let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
        // The module's directory as the program saw it (below `--root`, the path read is longer).
        let seen = self.root.as_ref().and_then(|r| dir.strip_prefix(r).ok()).unwrap_or(dir);
        for d in &self.debug_dirs {
            candidates.push(d.join(seen.strip_prefix("/").unwrap_or(seen)).join(name));
        }
        candidates.into_iter().filter(|c| c.as_path() != path).find_map(|c| match elf_ids(&c) {
            Some(theirs) if own.is_none() || theirs.build_id.is_none() || theirs.build_id == *own => {
                Some(c.to_string_lossy().into_owned())
            }
            _ => None,
        })
    }

    /// The source sites of `offset` in `module` of build `id` (innermost first); Ok(empty)
    /// when unknown, Err(why) when the module's file is another build now.
    pub fn sites(&mut self, module: &str, offset: u64, id: Option<&str>) -> Result<Vec<Site>, String> {
        let file = match self.source(module, id) {
            Source::File(f) => f,
            Source::Replaced(f, now) => {
                return Err(match now {
                    Some(now) => format!("{f} is another build now (BuildId: {now})"),
                    None => format!("{f} is another build now (no build id)"),
                })
            }
        };
        let loader = self.loaders.entry(file.clone()).or_insert_with(|| addr2line::Loader::new(&file).ok());
        let Some(l) = loader else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        if let Ok(mut frames) = l.find_frames(offset) {
            while let Ok(Some(f)) = frames.next() {
                let function = f.function.as_ref().and_then(|n| n.demangle().ok().map(|s| s.into_owned()));
                let (file, line) = f.location.map_or((None, None), |loc| (loc.file.map(str::to_string), loc.line));
                out.push(Site { function, file, line });
            }
        }
        if out.iter().all(|s| s.function.is_none()) {
            // The nearest symbol below, unless the offset lies past its end: a library stripped
            // of its static symbols (libc) has only its exported ones, and the nearest of those
            // to a local function (`__strlen_avx2`) is another function altogether.
            let symbol = l.find_symbol_info(offset).filter(|sym| {
                let sizes = self.sizes.entry(file.clone()).or_insert_with(|| symbol_sizes(&file));
                sizes.get(&sym.address()).is_none_or(|&n| offset < sym.address().saturating_add(n))
            });
            if let Some(name) = symbol.map(|sym| sym.name()) {
                let name = addr2line::demangle_auto(name.into(), None).into_owned();
                match out.first_mut() {
                    Some(s) => s.function = Some(name),
                    None => out.push(Site { function: Some(name), file: None, line: None }),
                }
            }
        }
        Ok(out)
    }

    /// Rewrites one line of a text report; other lines come back unchanged.
    pub fn text_line(&mut self, line: &str) -> String {
        let Some(f) = parse_frame_line(line) else { return line.to_string() };
        let sites = match self.sites(f.module, f.offset, f.build_id) {
            Ok(sites) if sites.is_empty() => return line.to_string(),
            Ok(sites) => sites,
            Err(why) => return format!("{line} [not symbolized: {why}]"),
        };
        let build = f.build_id.map(|id| format!(" (BuildId: {id})")).unwrap_or_default();
        let mut out = String::new();
        for (i, s) in sites.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(f.prefix);
            out.push_str("in ");
            out.push_str(s.function.as_deref().unwrap_or("??"));
            if let Some(file) = &s.file {
                out.push(' ');
                out.push_str(file);
                if let Some(l) = s.line {
                    out.push_str(&format!(":{l}"));
                }
            }
            if i == 0 {
                out.push_str(&format!(" ({}+{:#x}){build}", f.module, f.offset));
            } else {
                out.push_str(" (inlined)");
            }
        }
        out
    }

    /// Adds `function`, `file`, `line` (and `inlined`, the outer sites of an inlined call) to
    /// every frame of a JSON report line; other lines come back unchanged.
    pub fn json_line(&mut self, line: &str) -> String {
        let Ok(mut v) = serde_json::from_str::<Value>(line) else { return line.to_string() };
        if v.get("nevermore_report").is_none() {
            return line.to_string();
        }
        let mut stacks: Vec<&mut Value> = Vec::new();
        let obj = v.as_object_mut().expect("a report is an object");
        let mut rest: Vec<&mut Value> = Vec::new();
        for (k, val) in obj.iter_mut() {
            match k.as_str() {
                "stack" => stacks.push(val),
                "freed" | "allocated" => rest.push(val),
                // A leak report's groups, each with its allocation.
                "leaked" => {
                    if let Some(groups) = val.get_mut("groups").and_then(Value::as_array_mut) {
                        rest.extend(groups.iter_mut().filter_map(|g| g.get_mut("allocated")));
                    }
                }
                _ => {}
            }
        }
        for r in rest {
            if let Some(s) = r.get_mut("stack") {
                stacks.push(s);
            }
        }
        for stack in stacks {
            let Some(frames) = stack.as_array_mut() else { continue };
            for f in frames {
                let module = f.get("module").and_then(Value::as_str).map(str::to_string);
                let offset = f.get("offset").and_then(Value::as_str).and_then(parse_hex);
                let id = f.get("build_id").and_then(Value::as_str).map(str::to_string);
                let (sites, why) = match (module, offset) {
                    (Some(m), Some(o)) => match self.sites(&m, o, id.as_deref()) {
                        Ok(sites) => (sites, None),
                        Err(why) => (Vec::new(), Some(why)),
                    },
                    _ => (Vec::new(), None),
                };
                let first = sites.first().cloned().unwrap_or_default();
                let fo = f.as_object_mut().expect("a frame is an object");
                if let Some(why) = why {
                    fo.insert("not_symbolized".into(), Value::from(why));
                }
                fo.insert("function".into(), first.function.map_or(Value::Null, Value::from));
                fo.insert("file".into(), first.file.map_or(Value::Null, Value::from));
                fo.insert("line".into(), first.line.map_or(Value::Null, Value::from));
                let inlined: Vec<Value> = sites
                    .iter()
                    .skip(1)
                    .map(|s| serde_json::json!({"function": s.function, "file": s.file, "line": s.line}))
                    .collect();
                fo.insert("inlined".into(), Value::Array(inlined));
            }
        }
        serde_json::to_string(&v).unwrap_or_else(|_| line.to_string())
    }

    /// Symbolizes a whole line, text or JSON. The report may follow a prefix that a log added
    /// (the system log's `nevermore[PID]: `, a journal's date and host): it is kept.
    pub fn line(&mut self, line: &str) -> String {
        match line.find("{\"nevermore_report\"") {
            Some(at) => format!("{}{}", &line[..at], self.json_line(&line[at..])),
            None => self.text_line(line),
        }
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// A frame line of a text report, split.
#[derive(Debug, PartialEq)]
pub struct FrameLine<'a> {
    /// `==PID==     #N 0xPC ` and anything before `==PID==` (a log's prefix).
    pub prefix: &'a str,
    pub module: &'a str,
    pub offset: u64,
    /// The module's build id, when the frame gives one.
    pub build_id: Option<&'a str>,
}

/// Splits `==PID==     #N 0xPC module+0xOFF[ (BuildId: HEX)]`.
pub fn parse_frame_line(line: &str) -> Option<FrameLine<'_>> {
    let mut from = 0;
    while let Some(at) = line[from..].find("==") {
        let start = from + at;
        if let Some(site) = frame_site(&line[start..]) {
            let prefix_len = line.len() - site.len();
            let (site, build_id) = split_build_id(site);
            let plus = site.rfind("+0x")?;
            let offset = parse_hex(&site[plus + 1..])?;
            return Some(FrameLine { prefix: &line[..prefix_len], module: &site[..plus], offset, build_id });
        }
        from = start + 2;
    }
    None
}

/// `module+0xOFF (BuildId: HEX)` as (`module+0xOFF`, Some(HEX)); a site without a build id
/// comes back whole.
fn split_build_id(site: &str) -> (&str, Option<&str>) {
    let Some(at) = site.rfind(" (BuildId: ") else { return (site, None) };
    match site[at + 11..].strip_suffix(')') {
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_hexdigit()) => (&site[..at], Some(id)),
        _ => (site, None),
    }
}

/// The `module+0xOFF[ (BuildId: HEX)]` part of a frame line that starts at its `==PID==`.
fn frame_site(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("==")?;
    let close = rest.find("==")?;
    if close == 0 || !rest[..close].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let body = &rest[close + 2..];
    let trimmed = body.trim_start();
    let after_hash = trimmed.strip_prefix('#')?;
    let sp = after_hash.find(' ')?;
    if !after_hash[..sp].bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let after_num = &after_hash[sp + 1..];
    let pc_end = after_num.find(' ')?;
    parse_hex(&after_num[..pc_end])?;
    let site = &after_num[pc_end + 1..];
    let (bare, _) = split_build_id(site);
    bare.rfind("+0x").and_then(|plus| parse_hex(&bare[plus + 1..])).map(|_| site)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C library this test runs with, from its own mappings.
    fn libc_path() -> String {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        maps.lines()
            .filter_map(|l| l.split_whitespace().nth(5))
            .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
            .expect("no C library mapped")
            .to_string()
    }

    /// An offset just past the end of an exported function of libc, before the next exported
    /// symbol: there the nearest symbol below is not the function at that offset. Its name is
    /// not given to a frame there (it was: `__nss_database_lookup` for `__strlen_avx2`).
    #[test]
    fn a_frame_past_the_nearest_symbol_s_end_does_not_take_its_name() {
        use object::{Object, ObjectSymbol, SymbolKind};
        let libc = libc_path();
        let data = std::fs::read(&libc).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let mut funcs: Vec<(u64, u64, String)> = file
            .dynamic_symbols()
            .filter(|s| s.kind() == SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address(), s.size(), s.name().unwrap_or("").to_string()))
            .collect();
        funcs.sort();
        let all: Vec<(u64, u64)> =
            file.symbols().chain(file.dynamic_symbols()).map(|s| (s.address(), s.size())).collect();
        let (probe, name) = funcs
            .windows(2)
            .map(|w| (w[0].0 + w[0].1 + 16, &w[0].2, w[1].0))
            .find(|&(p, _, next)| p < next && all.iter().all(|&(a, n)| !(a <= p && p < a + n.max(1))))
            .map(|(p, name, _)| (p, name.clone()))
            .expect("no gap between libc's exported functions");
        let mut sym = Symbolizer::new();
        let sites = sym.sites(&libc, probe, None).unwrap();
        assert!(
            sites.iter().all(|s| s.function.as_deref() != Some(name.as_str())),
            "{probe:#x} in {libc} named after {name}, which ends before it"
        );
        // A frame inside that function keeps its name.
        let inside = funcs.iter().find(|f| f.2 == name).unwrap().0 + 1;
        let sites = sym.sites(&libc, inside, None).unwrap();
        assert!(
            sites.iter().any(|s| s.function.as_deref().is_some_and(|f| f.contains(name.as_str()))),
            "{inside:#x}: {sites:?}"
        );
    }

    #[test]
    fn frame_lines_parse() {
        let l = "==12==     #3 0x00007f00 /lib/x86_64-linux-gnu/libc.so.6+0x27249";
        let f = parse_frame_line(l).unwrap();
        assert_eq!(f.prefix, "==12==     #3 0x00007f00 ");
        assert_eq!(f.module, "/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!((f.offset, f.build_id), (0x27249, None));
        assert!(parse_frame_line("==12==   freed by thread 3 here:").is_none());
        assert!(parse_frame_line("hello +0x12").is_none());
        assert!(parse_frame_line("==12==     #0 0x1 <unknown module>").is_none());
        // After a log's prefix (the journal's date, host and tag).
        let j = "Dec 05 01:00:00 host nevermore[12]: ==12==     #3 0x00007f00 /usr/sbin/nginx+0x1a2b";
        let f = parse_frame_line(j).unwrap();
        assert_eq!(f.prefix, "Dec 05 01:00:00 host nevermore[12]: ==12==     #3 0x00007f00 ");
        assert_eq!((f.module, f.offset), ("/usr/sbin/nginx", 0x1a2b));
        assert!(parse_frame_line("a == b: ==== #1 0x2 m+0x3").is_none());
        // With the module's build id.
        let b = "==12==     #0 0x00007f00 /srv/my app+0x10 (BuildId: 18b2264194)";
        let f = parse_frame_line(b).unwrap();
        assert_eq!((f.module, f.offset, f.build_id), ("/srv/my app", 0x10, Some("18b2264194")));
        assert_eq!(f.prefix, "==12==     #0 0x00007f00 ");
        // Not a build id: the whole site is the module.
        assert!(parse_frame_line("==12==     #0 0x1 m+0x10 (BuildId: xyz)").is_none());
        assert!(parse_frame_line("==12==     #0 0x1 m+0x10 (BuildId: )").is_none());
    }
}
