//! Symbolization of reports, outside the process that wrote them: the library prints raw
//! frames as `module+0xoffset` (text) or `{"module": ..., "offset": ...}` (JSON); here each
//! frame gets `function file:line` from the module's DWARF (falling back to its symbol table,
//! then to `module+offset`).

use std::collections::HashMap;

use serde_json::Value;

/// One source location of a frame (an inlined call chain yields several, innermost first).
#[derive(Clone, Debug, Default)]
pub struct Site {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
}

#[derive(Default)]
pub struct Symbolizer {
    /// The root directory the program ran under: module paths are read below it.
    root: Option<std::path::PathBuf>,
    loaders: HashMap<String, Option<addr2line::Loader>>,
    /// Per module: the size of each symbol that has one, by its address.
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

impl Symbolizer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A symbolizer that reads each module at its path below `root` (when given).
    pub fn with_root(root: Option<std::path::PathBuf>) -> Self {
        Symbolizer { root, ..Self::default() }
    }

    /// Where `module` (a path as the program saw it) is read.
    fn file_of(&self, module: &str) -> String {
        match &self.root {
            Some(r) => r.join(module.trim_start_matches('/')).to_string_lossy().into_owned(),
            None => module.to_string(),
        }
    }

    /// The source sites of `offset` in `module` (innermost first); empty when unknown.
    pub fn sites(&mut self, module: &str, offset: u64) -> Vec<Site> {
        let file = self.file_of(module);
        let loader = self.loaders.entry(module.to_string()).or_insert_with(|| addr2line::Loader::new(&file).ok());
        let Some(l) = loader else { return Vec::new() };
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
                let sizes = self.sizes.entry(module.to_string()).or_insert_with(|| symbol_sizes(&file));
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
        out
    }

    /// Rewrites one line of a text report; other lines come back unchanged.
    pub fn text_line(&mut self, line: &str) -> String {
        let Some((prefix, module, offset)) = parse_frame_line(line) else { return line.to_string() };
        let sites = self.sites(module, offset);
        if sites.is_empty() {
            return line.to_string();
        }
        let mut out = String::new();
        for (i, s) in sites.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            out.push_str(prefix);
            out.push_str("in ");
            out.push_str(s.function.as_deref().unwrap_or("??"));
            if let Some(f) = &s.file {
                out.push(' ');
                out.push_str(f);
                if let Some(l) = s.line {
                    out.push_str(&format!(":{l}"));
                }
            }
            if i == 0 {
                out.push_str(&format!(" ({module}+{offset:#x})"));
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
                let sites = match (module, offset) {
                    (Some(m), Some(o)) => self.sites(&m, o),
                    _ => Vec::new(),
                };
                let first = sites.first().cloned().unwrap_or_default();
                let fo = f.as_object_mut().expect("a frame is an object");
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

/// Splits `==PID==     #N 0xPC module+0xOFF` into (`==PID==     #N 0xPC `, module, offset);
/// anything before `==PID==` (a log's prefix) goes with the first part.
pub fn parse_frame_line(line: &str) -> Option<(&str, &str, u64)> {
    let mut from = 0;
    while let Some(at) = line[from..].find("==") {
        let start = from + at;
        if let Some(site) = frame_site(&line[start..]) {
            let prefix_len = line.len() - site.len();
            let plus = site.rfind("+0x")?;
            let offset = parse_hex(&site[plus + 1..])?;
            return Some((&line[..prefix_len], &site[..plus], offset));
        }
        from = start + 2;
    }
    None
}

/// The `module+0xOFF` part of a frame line that starts at its `==PID==`.
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
    site.rfind("+0x").and_then(|plus| parse_hex(&site[plus + 1..])).map(|_| site)
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
        let sites = sym.sites(&libc, probe);
        assert!(
            sites.iter().all(|s| s.function.as_deref() != Some(name.as_str())),
            "{probe:#x} in {libc} named after {name}, which ends before it"
        );
        // A frame inside that function keeps its name.
        let inside = funcs.iter().find(|f| f.2 == name).unwrap().0 + 1;
        let sites = sym.sites(&libc, inside);
        assert!(
            sites.iter().any(|s| s.function.as_deref().is_some_and(|f| f.contains(name.as_str()))),
            "{inside:#x}: {sites:?}"
        );
    }

    #[test]
    fn frame_lines_parse() {
        let l = "==12==     #3 0x00007f00 /lib/x86_64-linux-gnu/libc.so.6+0x27249";
        let (p, m, o) = parse_frame_line(l).unwrap();
        assert_eq!(p, "==12==     #3 0x00007f00 ");
        assert_eq!(m, "/lib/x86_64-linux-gnu/libc.so.6");
        assert_eq!(o, 0x27249);
        assert!(parse_frame_line("==12==   freed by thread 3 here:").is_none());
        assert!(parse_frame_line("hello +0x12").is_none());
        assert!(parse_frame_line("==12==     #0 0x1 <unknown module>").is_none());
        // After a log's prefix (the journal's date, host and tag).
        let j = "Dec 05 01:00:00 host nevermore[12]: ==12==     #3 0x00007f00 /usr/sbin/nginx+0x1a2b";
        let (p, m, o) = parse_frame_line(j).unwrap();
        assert_eq!(p, "Dec 05 01:00:00 host nevermore[12]: ==12==     #3 0x00007f00 ");
        assert_eq!((m, o), ("/usr/sbin/nginx", 0x1a2b));
        assert!(parse_frame_line("a == b: ==== #1 0x2 m+0x3").is_none());
    }
}
