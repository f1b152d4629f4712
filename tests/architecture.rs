//! The layout's one rule that the compiler does not keep: modules import each other in
//! one direction. Each file under src/ is a module; an arrow goes from a file to every
//! module it names by path: `crate::a::b` and `super::x` anywhere in its code, and a
//! child module `x::` in a `use` item (in code, a parent reaching into a child it owns is
//! not an arrow). A circle of arrows, files that reach each other, fails the test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A scratch tree for a check's own test: a folder of its own (two tests never share
/// one), removed when dropped, also when the test fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("handshake-arch-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

/// A file of a scratch tree, with the folders it needs.
fn put(path: impl AsRef<Path>, text: impl AsRef<[u8]>) {
    let path = path.as_ref();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// This crate's `src`.
fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// A check over the crate found nothing; else the findings, after `why`.
fn none(found: impl IntoIterator<Item = impl std::fmt::Debug>, why: &str) {
    let found: Vec<_> = found.into_iter().collect();
    assert!(found.is_empty(), "{why}: {found:#?}");
}

/// Module path ("cmd::audit::server") of each file under `src`.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension() != Some(std::ffi::OsStr::new("rs")) {
                continue;
            }
            let rel = p.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if matches!(
                parts.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                parts.pop();
            }
            out.insert(parts.join("::"), p);
        }
    }
    out
}

/// The code of a file without comments, string literals and its `#[cfg(test)]` module
/// (tests may reach anywhere).
fn code(text: &str) -> String {
    // An inline test module; `mod tests;` (a file of its own) is only a declaration.
    let text = match text.find("#[cfg(test)]\nmod tests {") {
        Some(i) => &text[..i],
        None => text,
    };
    without_comments_and_strings(text)
}

/// A file's text without its comments and string literals.
fn without_comments_and_strings(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let line = match line.find("//") {
            Some(i) if !line[..i].contains('"') => &line[..i],
            _ => line,
        };
        // Drop string literals (a path inside a message is not an import).
        let mut in_str = false;
        let mut prev = ' ';
        for c in line.chars() {
            if c == '"' && prev != '\\' {
                in_str = !in_str;
            } else if !in_str {
                out.push(c);
            }
            prev = c;
        }
        out.push('\n');
    }
    out
}

/// The module a path names: the longest known module that starts it.
fn resolve(path: &[String], known: &BTreeMap<String, PathBuf>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|m| known.contains_key(m))
}

/// The modules a file (module `me`) names.
// One pass over a file's `use` trees (groups, `self`, `super`, `crate`), a small
// parser whose cases belong together.
#[allow(clippy::too_many_lines)]
fn arrows(me: &str, text: &str, known: &BTreeMap<String, PathBuf>) -> BTreeSet<String> {
    let code = code(text);
    let here: Vec<String> = if me.is_empty() {
        Vec::new()
    } else {
        me.split("::").map(String::from).collect()
    };
    let mut out = BTreeSet::new();
    let chars: Vec<char> = code.chars().collect();
    // Inside a `use` item: a child module named there is an import; in code it is the
    // parent reaching into what it owns, not an arrow.
    let mut in_use = vec![false; chars.len()];
    let mut k = 0;
    while k + 4 <= chars.len() {
        let starts_item = k == 0 || matches!(chars[k - 1], '\n' | ' ' | '{' | ';');
        if starts_item && chars[k..k + 4] == ['u', 's', 'e', ' '] {
            let end = (k..chars.len())
                .find(|&e| chars[e] == ';')
                .unwrap_or(chars.len());
            for flag in &mut in_use[k..end] {
                *flag = true;
            }
            k = end;
        }
        k += 1;
    }
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !(c.is_alphabetic() || c == '_')
            || (i > 0
                && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_' || chars[i - 1] == ':'))
        {
            i += 1;
            continue;
        }
        // A path: ident(::ident)*, also through a `{` group's first level.
        let mut segs: Vec<String> = Vec::new();
        let mut j = i;
        loop {
            let start = j;
            while j < chars.len() && (chars[j].is_alphanumeric() || chars[j] == '_') {
                j += 1;
            }
            segs.push(chars[start..j].iter().collect());
            if j + 2 < chars.len()
                && chars[j] == ':'
                && chars[j + 1] == ':'
                && (chars[j + 2].is_alphabetic() || chars[j + 2] == '_')
            {
                j += 2;
            } else {
                break;
            }
        }
        let began = i;
        i = j.max(i + 1);
        if segs.len() < 2 && !(j + 2 < chars.len() && chars[j] == ':' && chars[j + 1] == ':') {
            continue;
        }
        let absolute: Option<Vec<String>> = match segs[0].as_str() {
            "crate" => Some(segs[1..].to_vec()),
            "self" => Some(
                here.iter()
                    .cloned()
                    .chain(segs[1..].iter().cloned())
                    .collect(),
            ),
            "super" => {
                let mut base = here.clone();
                let mut k = 0;
                while k < segs.len() && segs[k] == "super" {
                    base.pop();
                    k += 1;
                }
                Some(base.into_iter().chain(segs[k..].iter().cloned()).collect())
            }
            // A child module named without a prefix, in a `use` item.
            _ if !in_use[began] => None,
            first => {
                let child: Vec<String> = here
                    .iter()
                    .cloned()
                    .chain(std::iter::once(first.to_string()))
                    .collect();
                known
                    .contains_key(&child.join("::"))
                    .then(|| here.iter().cloned().chain(segs.iter().cloned()).collect())
            }
        };
        // A `use x::{a, b::c}` group: each first-level name may itself be a module.
        if let Some(p) = absolute {
            let group = j + 2 < chars.len()
                && chars[j] == ':'
                && chars[j + 1] == ':'
                && chars[j + 2] == '{';
            if group {
                let end = (j + 3..chars.len())
                    .find(|&k| chars[k] == '}')
                    .unwrap_or(chars.len());
                let inner: String = chars[j + 3..end].iter().collect();
                for item in inner.split(',') {
                    let item = item.trim();
                    let head: Vec<String> = item
                        .split("::")
                        .map(|s| s.trim().trim_end_matches('*').to_string())
                        .filter(|s| {
                            !s.is_empty()
                                && s != "self"
                                && s.chars().all(|c| c.is_alphanumeric() || c == '_')
                        })
                        .collect();
                    let mut full = p.clone();
                    full.extend(head);
                    if let Some(m) = resolve(&full, known) {
                        out.insert(m);
                    }
                }
            }
            // (The group's base alone is not named: `use super::{a, b}` reaches a and b.)
            if !group {
                if let Some(m) = resolve(&p, known) {
                    out.insert(m);
                }
            }
        }
    }
    out.remove(me);
    out.remove("");
    out
}

/// Strongly connected groups of more than one module (Tarjan's algorithm).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        on: BTreeSet<&'a str>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.g.contains_key(w) {
                continue;
            }
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(lw));
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low[v];
                t.low.insert(v, lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        g: graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on: BTreeSet::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

/// The circles of the tree under `src`, each as its files sorted and joined.
fn circles_of(src: &Path) -> BTreeSet<String> {
    let known = modules(src);
    let graph: BTreeMap<String, BTreeSet<String>> = known
        .iter()
        .map(|(m, p)| {
            (
                m.clone(),
                arrows(m, &std::fs::read_to_string(p).unwrap(), &known),
            )
        })
        .collect();
    let root = src.parent().unwrap();
    circles(&graph)
        .into_iter()
        .map(|g| {
            let mut files: Vec<String> = g
                .iter()
                .map(|m| known[m].strip_prefix(root).unwrap().display().to_string())
                .collect();
            files.sort();
            files.join(" <> ")
        })
        .collect()
}

#[test]
fn no_import_circles() {
    let src = src_dir();
    none(
        circles_of(&src),
        "import circles (make the arrows run one way; ARCHITECTURE.md)",
    );
}

/// The check sees a circle: two modules of a scratch tree that import each other, one
/// by `use crate::`, the other by `super::` in its code; and none once that arrow goes.
#[test]
fn the_check_catches_a_circle() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "pub mod a;\npub mod b;\n");
    put(
        src.join("a/mod.rs"),
        "pub mod inner;\nuse crate::b::B;\npub struct A;\n",
    );
    put(src.join("a/inner.rs"), "pub fn f() {}\n");
    let b_with_arrow = "pub struct B;\npub fn g() -> super::a::A { super::a::A }\n";
    put(src.join("b.rs"), b_with_arrow);
    let found = circles_of(&src);
    put(
        src.join("b.rs"),
        "pub struct B;\n// super::a::A in a comment\n",
    );
    let after = circles_of(&src);
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        ["src/a/mod.rs <> src/b.rs"]
    );
    assert!(after.is_empty(), "{after:?}");
}

/// ARCHITECTURE.md's code map names every file and folder directly under `src/`, so a
/// new room cannot go unmapped (issue 43: `procs.rs` and `interrupt.rs` had).
#[test]
fn every_room_is_on_the_map() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let named = if path.is_dir() {
            format!("`src/{name}/`")
        } else {
            format!("`src/{name}`")
        };
        if !map.contains(&named) {
            missing.push(named);
        }
    }
    missing.sort();
    assert!(missing.is_empty(), "not in ARCHITECTURE.md: {missing:?}");
}

/// The arrows from modules under any of `rooms` to any module under `banned`, as
/// "from -> to".
fn arrows_into(src: &Path, rooms: &[&str], banned: &[&str]) -> Vec<String> {
    let under = |m: &str, prefixes: &[&str]| {
        prefixes
            .iter()
            .any(|p| m == *p || m.starts_with(&format!("{p}::")))
    };
    let known = modules(src);
    let mut out = Vec::new();
    for (m, p) in &known {
        if !under(m, rooms) {
            continue;
        }
        for to in arrows(m, &std::fs::read_to_string(p).unwrap(), &known) {
            if under(&to, banned) {
                out.push(format!("{m} -> {to}"));
            }
        }
    }
    out
}

/// The rooms that step one connection through (probe, trace, doctor, audit) open it
/// with the protocol's own client in `proto/`, not through the engine's drivers
/// (issue 43, item 1: `probe`, `doctor` and `trace` reached into `engine::h3`).
const STEPPERS: [&str; 4] = ["probe", "trace", "doctor", "audit"];
const DRIVERS: [&str; 2] = ["engine::h2", "engine::h3"];

#[test]
fn one_connection_is_stepped_through_proto_not_the_engines_drivers() {
    let src = src_dir();
    none(
        arrows_into(&src, &STEPPERS, &DRIVERS),
        "reach proto::h2::client or proto::h3::client instead",
    );
}

/// The check sees such an arrow, by `use` and by a path in code, and not in a comment.
#[test]
fn the_check_catches_a_probe_reaching_into_a_driver() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "pub mod engine;\npub mod probe;\n");
    put(src.join("engine/mod.rs"), "pub mod h3;\npub mod open;\n");
    put(src.join("engine/h3.rs"), "pub struct Endpoints;\n");
    put(src.join("engine/open.rs"), "pub struct Opener;\n");
    put(
        src.join("probe/mod.rs"),
        "pub mod h3;\nuse crate::engine::open::Opener;\n",
    );
    put(
        src.join("probe/h3.rs"),
        "use crate::engine::h3::Endpoints;\n",
    );
    let by_use = arrows_into(&src, &STEPPERS, &DRIVERS);
    put(
        src.join("probe/h3.rs"),
        "// crate::engine::h3 in a comment\nfn f() { let _ = crate::engine::h3::Endpoints; }\n",
    );
    let in_code = arrows_into(&src, &STEPPERS, &DRIVERS);
    put(src.join("probe/h3.rs"), "// crate::engine::h3::Endpoints\n");
    let in_comment = arrows_into(&src, &STEPPERS, &DRIVERS);
    assert_eq!(by_use, ["probe::h3 -> engine::h3"]);
    assert_eq!(in_code, ["probe::h3 -> engine::h3"]);
    assert!(in_comment.is_empty(), "{in_comment:?}");
}

/// The files under `src` (outside `src/sys/`) whose code says `unsafe`, tests included.
fn unsafe_outside_sys(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for p in modules(src).values() {
        let rel = p.strip_prefix(src).unwrap();
        if rel.starts_with("sys") {
            continue;
        }
        let code = without_comments_and_strings(&std::fs::read_to_string(p).unwrap());
        let says = code
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == "unsafe");
        if says {
            out.push(rel.display().to_string());
        }
    }
    out.sort();
    out
}

/// System calls go through one door (issue 43, item 5): no `unsafe` outside `src/sys/`,
/// where each block says why it is sound.
#[test]
fn no_unsafe_outside_sys() {
    let src = src_dir();
    none(
        unsafe_outside_sys(&src),
        "unsafe outside src/sys/ (use rustix, or a safe function in src/sys/)",
    );
    // Each unsafe block in src/sys/ says why it is sound.
    for e in std::fs::read_dir(src.join("sys")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let code = without_comments_and_strings(line);
            if !code.contains("unsafe {") && !code.contains("unsafe fn") {
                continue;
            }
            let before = lines[..i]
                .iter()
                .rev()
                .take(5)
                .any(|l| l.contains("SAFETY:"));
            assert!(
                before,
                "{}:{}: an unsafe block without its SAFETY: reason",
                p.display(),
                i + 1
            );
        }
    }
}

/// The check sees `unsafe` in code and in a test module, not in a comment or a string,
/// and not under `src/sys/`.
#[test]
fn the_check_catches_unsafe_outside_sys() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod c;\npub mod sys;\n",
    );
    put(src.join("a.rs"), "fn f() { unsafe { g() } }\n");
    put(
        src.join("b.rs"),
        "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { unsafe { h() } }\n}\n",
    );
    put(
        src.join("c.rs"),
        "// unsafe here\nconst S: &str = \"unsafe\";\n",
    );
    put(src.join("sys/mod.rs"), "pub fn f() { unsafe { g() } }\n");
    let found = unsafe_outside_sys(&src);
    assert_eq!(found, ["a.rs", "b.rs"]);
}

/// The files under `src` longer than `max` lines, as "path: lines".
fn longer_than(src: &Path, max: usize) -> Vec<String> {
    let mut out: Vec<String> = modules(src)
        .values()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > max).then(|| format!("{}: {n}", p.strip_prefix(src).unwrap().display()))
        })
        .collect();
    out.sort();
    out
}

/// Rooms of one job (issue 43, item 4): no file in `src/` over 700 lines, its tests
/// included.
#[test]
fn no_file_over_700_lines() {
    let src = src_dir();
    none(longer_than(&src, 700), "split along the file's seams");
}

/// The check counts a file's lines: 701 fail, 700 pass.
#[test]
fn the_check_catches_a_long_file() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "pub mod a;\npub mod b;\n");
    put(src.join("a.rs"), "// line\n".repeat(701));
    put(src.join("b.rs"), "// line\n".repeat(700));
    let found = longer_than(&src, 700);
    assert_eq!(found, ["a.rs: 701"]);
}

/// Where a recorder is shared behind a cell or a lock (`RefCell<Recorder>`,
/// `Mutex<stats::Recorder>`, …), and where the engine's drivers name the recorder at all,
/// as "path: what".
fn recorder_writers(src: &Path) -> Vec<String> {
    let drivers = [
        "engine/h1.rs",
        "engine/h2.rs",
        "engine/h3.rs",
        "engine/open.rs",
        "engine/worker.rs",
    ];
    let mut out = Vec::new();
    for p in modules(src).values() {
        let rel = p.strip_prefix(src).unwrap().display().to_string();
        let text = without_comments_and_strings(&std::fs::read_to_string(p).unwrap());
        let code: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        for cell in ["RefCell<", "Mutex<", "RwLock<", "UnsafeCell<"] {
            for (i, _) in code.match_indices(cell) {
                let inner = &code[i + cell.len()..];
                let ty = &inner[..inner.find(['>', ',']).unwrap_or(inner.len())];
                if ty == "Recorder" || ty.ends_with("::Recorder") {
                    out.push(format!("{rel}: {cell}{ty}>"));
                }
            }
        }
        let names = text
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == "Recorder");
        if drivers.contains(&rel.as_str()) && names {
            out.push(format!("{rel}: names the Recorder"));
        }
    }
    out.sort();
    out
}

/// One writer per recorder (issue 43, item 2): a client thread's collector alone writes
/// its recorder; the drivers hand it their connections' events and never hold it.
#[test]
fn one_writer_per_recorder() {
    let src = src_dir();
    none(
        recorder_writers(&src),
        "hand the collector a ConnEvent (engine/collect.rs) instead",
    );
}

/// The check sees a recorder behind a cell by any path, and a driver naming it; not in
/// a comment, and not elsewhere a recorder is owned.
#[test]
fn the_check_catches_a_shared_recorder() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod engine;\n",
    );
    put(
        src.join("a.rs"),
        "struct S { r: Rc<RefCell< crate::stats::Recorder >> }\n",
    );
    put(
        src.join("b.rs"),
        "// Rc<RefCell<Recorder>>\nstruct T { r: Recorder, m: Mutex<u8> }\n",
    );
    put(src.join("engine/mod.rs"), "mod h2;\n");
    put(src.join("engine/h2.rs"), "fn f(r: &mut Recorder) {}\n");
    let found = recorder_writers(&src);
    assert_eq!(
        found,
        [
            "a.rs: RefCell<crate::stats::Recorder>",
            "engine/h2.rs: names the Recorder"
        ]
    );
}

/// Arguments resolved once (issue 43, item 3): a command's file in `src/cmd/` reads as
/// parse, resolve (in `config/`), run, report, in 150 lines at most.
#[test]
fn no_command_file_over_150_lines() {
    let cmd = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
    none(
        longer_than(&cmd, 150),
        "resolve the arguments in config/ and run the work in its own room",
    );
}

/// The files under `src` whose code declares a `thread_local!`, as paths.
fn thread_locals(src: &Path) -> Vec<String> {
    let mut out: Vec<String> = modules(src)
        .values()
        .filter(|p| {
            without_comments_and_strings(&std::fs::read_to_string(p).unwrap())
                .contains("thread_local!")
        })
        .map(|p| p.strip_prefix(src).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

/// What a failure or a response said travels with it (issue 56, item 5): a failure's
/// message is a value in its `Failure`, a redirect's or an error response's example a
/// value in its record's `Outcome::Ok`, never a thread's hidden state beside the
/// collector's queue. The one thread-local left carries no message: a thread's spare
/// read buffers.
#[test]
fn what_was_said_does_not_travel_through_thread_locals() {
    let src = src_dir();
    assert_eq!(
        thread_locals(&src),
        ["proto/h1/conn.rs"],
        "a new thread_local!: carry the value with the record or event instead"
    );
}

/// The check sees a `thread_local!` in code, not in a comment or a string.
#[test]
fn the_check_catches_a_thread_local() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "pub mod a;\npub mod b;\n");
    put(
        src.join("a.rs"),
        "thread_local! { static M: u8 = const { 0 }; }\n",
    );
    put(
        src.join("b.rs"),
        "// thread_local! here\nconst S: &str = \"thread_local!\";\n",
    );
    let found = thread_locals(&src);
    assert_eq!(found, ["a.rs"]);
}

/// The files under `src`, outside the model of causes (`report/reuse.rs`, and
/// `report/cause.rs` whose server causes it uses), whose code names a reuse cause's code
/// (a string starting `not_reused`), as paths.
fn reuse_deciders(src: &Path) -> Vec<String> {
    let mut out: Vec<String> = modules(src)
        .values()
        .filter(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            // Its code, before any test module, without its comment lines.
            let text = text.split("#[cfg(test)]").next().unwrap_or_default();
            text.lines()
                .any(|l| !l.trim_start().starts_with("//") && l.contains("\"not_reused"))
        })
        .map(|p| p.strip_prefix(src).unwrap().display().to_string())
        .filter(|p| p != "report/reuse.rs" && p != "report/cause.rs")
        .collect();
    out.sort();
    out
}

/// Why connections were not reused is decided in one place (issue 56, item 2): bench's
/// diagnosis, trace, audit and watch count their evidence into `report::reuse`, and no
/// other file names a cause of its own.
#[test]
fn reuse_is_decided_in_one_place() {
    let src = src_dir();
    none(
        reuse_deciders(&src),
        "a reuse cause decided outside report/reuse.rs",
    );
}

/// The check sees a cause's code in code, not in a comment.
#[test]
fn the_check_catches_a_cause_decided_elsewhere() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(
        src.join("lib.rs"),
        "pub mod a;\npub mod b;\npub mod report;\n",
    );
    put(src.join("report.rs"), "pub mod reuse;\n");
    put(
        src.join("report/reuse.rs"),
        "const C: &str = \"not_reused_x\";\n",
    );
    put(src.join("a.rs"), "const C: &str = \"not_reused_y\";\n");
    put(src.join("b.rs"), "// \"not_reused_z\" is said elsewhere\n");
    let found = reuse_deciders(&src);
    assert_eq!(found, ["a.rs"]);
}

/// The files under `src` whose code calls `println!` or `eprintln!`, as paths.
fn panicking_prints(src: &Path) -> Vec<String> {
    // `lib.rs` and `main.rs` are both the crate's root in `modules`: read both.
    let mut files: BTreeSet<PathBuf> = modules(src).into_values().collect();
    files.extend(
        ["lib.rs", "main.rs"]
            .map(|f| src.join(f))
            .into_iter()
            .filter(|p| p.exists()),
    );
    let mut out: Vec<String> = files
        .iter()
        .filter(|p| {
            let code = without_comments_and_strings(&std::fs::read_to_string(p).unwrap());
            code.contains("println!(")
        })
        .map(|p| p.strip_prefix(src).unwrap().display().to_string())
        .collect();
    out.sort();
    out
}

/// Output that cannot be written never panics (issue 57, item 5): `println!` and
/// `eprintln!` panic on a closed pipe (`2>&1 | head -1`) or a full disk, so the crate
/// writes stdout through `cmd::print_out` (an error naming it, exit 1) and stderr through
/// `progress::note` (a line lost, the run going on).
#[test]
fn no_print_that_panics() {
    let src = src_dir();
    assert!(
        panicking_prints(&src).is_empty(),
        "println!/eprintln! in {:?}: use cmd::print_out or progress::note",
        panicking_prints(&src)
    );
}

/// The check sees a `println!` or `eprintln!` in code, not in a comment or a string.
#[test]
fn the_check_catches_a_print_that_panics() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "pub mod a;\npub mod b;\npub mod c;\n");
    put(src.join("main.rs"), "fn main() { eprintln!(\"x\"); }\n");
    put(src.join("a.rs"), "fn f() { eprintln!(\"x\"); }\n");
    put(src.join("b.rs"), "fn f() { println!(\"x\"); }\n");
    put(
        src.join("c.rs"),
        "// println!(\"x\")\nconst S: &str = \"eprintln!(\";\n",
    );
    let found = panicking_prints(&src);
    assert_eq!(found, ["a.rs", "b.rs", "main.rs"]);
}

/// The crate's items (`pub` or `pub(crate)` at a file's top level) that no other file
/// names, as "path: name". A function, constant, static or module used only in its own
/// file is private; a type is allowed to be crate-visible when its own file's
/// crate-visible signatures carry it (the compiler's `private_interfaces` then needs it).
fn crate_items_used_only_at_home(src: &Path) -> Vec<String> {
    // `modules` keys lib.rs and main.rs alike (""): both are read here.
    let roots = ["lib.rs", "main.rs"].map(|f| src.join(f));
    let files: BTreeMap<PathBuf, String> = modules(src)
        .into_values()
        .chain(roots.into_iter().filter(|p| p.exists()))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            (p, code(&text))
        })
        .collect();
    let words = |text: &str| -> BTreeSet<String> {
        text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect()
    };
    // Another file's tests count as a use.
    let named: BTreeMap<&PathBuf, BTreeSet<String>> = files
        .keys()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            (p, words(&without_comments_and_strings(&text)))
        })
        .collect();
    let mut out = Vec::new();
    for (p, text) in &files {
        if p.file_name() == Some(std::ffi::OsStr::new("lib.rs")) {
            continue; // the crate's public surface (`api`)
        }
        for line in text.lines() {
            let Some(rest) = line
                .strip_prefix("pub(crate) ")
                .or_else(|| line.strip_prefix("pub "))
            else {
                continue;
            };
            let rest = rest.strip_prefix("async ").unwrap_or(rest);
            let mut it = rest.split_whitespace();
            let (Some(kind), Some(name)) = (it.next(), it.next()) else {
                continue;
            };
            let name: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let typeish = matches!(kind, "struct" | "enum" | "type" | "trait");
            if !typeish && !matches!(kind, "fn" | "const" | "static" | "mod") {
                continue;
            }
            if named.iter().any(|(q, w)| *q != p && w.contains(&name)) {
                continue;
            }
            let carried = typeish
                && interfaces(text)
                    .iter()
                    .any(|i| !i.starts_with(line) && words(i).contains(&name));
            if !carried {
                let rel = p.strip_prefix(src).unwrap().display().to_string();
                out.push(format!("{rel}: {name}"));
            }
        }
    }
    out.sort();
    out
}

/// A file's crate-visible interfaces, where a type it defines can be carried: each
/// `pub` line (a field, a one-line signature), each `pub` function's signature to its
/// body, and each `pub` enum's variants.
fn interfaces(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if !t.starts_with("pub") {
            continue;
        }
        let enum_ = t.contains(" enum ");
        let fn_ = t.contains("fn ");
        let mut item = String::new();
        for next in &lines[i..] {
            item.push_str(next);
            item.push('\n');
            let ends_fn = fn_ && (next.contains('{') || next.contains(';'));
            let ends_enum = enum_ && next.trim_end() == "}";
            if !(fn_ || enum_) || ends_fn || ends_enum {
                break;
            }
        }
        out.push(item);
    }
    out
}

/// Visibility the compiler can check (issue 58, item 5): `pub(crate)` is the default,
/// and an item that only its own file uses is private, so that dead code is the
/// compiler's to see.
#[test]
fn no_crate_item_used_only_in_its_own_file() {
    let src = src_dir();
    none(
        crate_items_used_only_at_home(&src),
        "crate-visible but used only in their own file (make them private)",
    );
}

/// The check sees a function, a constant and a type that only their file uses; not a
/// type carried by a crate-visible signature, nor an item another file names (in code:
/// a name in another file's comment does not count).
#[test]
fn the_check_catches_a_crate_item_used_only_at_home() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "mod a;\nmod b;\n");
    put(
        src.join("a.rs"),
        "pub(crate) fn lonely() {}\npub(crate) const ALONE: u8 = 1;\n\
         pub(crate) struct Hidden;\npub(crate) struct Carried;\n\
         pub(crate) fn make(\n    n: u8,\n) -> Carried {\n    Carried\n}\npub(crate) fn shared() {}\n",
    );
    put(
        src.join("b.rs"),
        "// lonely\nfn f() { crate::a::shared(); crate::a::make(); }\n",
    );
    let found = crate_items_used_only_at_home(&src);
    assert_eq!(found, ["a.rs: ALONE", "a.rs: Hidden", "a.rs: lonely"]);
}

/// The compiler keeps what the text scans above keep: `unsafe` only in `src/sys/`
/// (`#![deny(unsafe_code)]` with one allowance, on `mod sys`, and the binary forbids it),
/// and nothing public but the `api` the tests, fuzz targets and examples reach
/// (`#![warn(unreachable_pub)]`, which `cargo clippy -D warnings` makes an error).
#[test]
fn the_compiler_keeps_unsafe_in_sys_and_the_crate_private() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
    assert!(
        lib.contains("#![deny(unsafe_code)]"),
        "lib.rs denies unsafe code"
    );
    assert!(
        lib.contains("#![warn(unreachable_pub)]"),
        "lib.rs warns on unreachable pub"
    );
    let main = std::fs::read_to_string(root.join("src/main.rs")).unwrap();
    assert!(
        main.contains("#![forbid(unsafe_code)]"),
        "main.rs forbids unsafe code"
    );
    let mut allowances = Vec::new();
    let src = root.join("src");
    for p in modules(&src).values().chain([&src.join("lib.rs")]) {
        let text = std::fs::read_to_string(p).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, l) in lines.iter().enumerate() {
            if l.contains("allow(unsafe_code)") {
                let next = lines.get(i + 1).copied().unwrap_or("");
                allowances.push(format!("{}: {next}", p.file_name().unwrap().display()));
            }
        }
    }
    assert_eq!(
        allowances,
        ["lib.rs: mod sys;"],
        "the one allowance is on mod sys"
    );
    let public: Vec<&str> = lib
        .lines()
        .filter(|l| l.starts_with("pub mod ") || l.starts_with("pub use "))
        .collect();
    assert_eq!(
        public,
        ["pub use cmd::main;", "pub mod api {"],
        "lib.rs makes public only the binary's entry and the api"
    );
}

/// The phases' names, read from their one definition (`src/record/phase.rs`: each
/// `Phase::X => "name",` of `name()`).
fn phase_names(src: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(src.join("record/phase.rs")).unwrap();
    let body = &text[text.find("fn name(self)").expect("Phase::name")..];
    let body = &body[..body.find("\n    }\n").unwrap()];
    body.lines()
        .filter_map(|l| l.split_once("=> \""))
        .map(|(_, rest)| rest.trim_end_matches("\",").to_string())
        .collect()
}

/// The files under `src` (Rust and the page's scripts) other than the phases' own that
/// spell three or more phase names as string literals: a list of phases written out.
fn phase_lists(src: &Path) -> Vec<String> {
    let names = phase_names(src);
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let ext = p.extension().and_then(|e| e.to_str());
            if !matches!(ext, Some("rs" | "js")) || p.ends_with("record/phase.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap();
            let spelled: BTreeSet<&String> = names
                .iter()
                .filter(|n| text.contains(&format!("\"{n}\"")))
                .collect();
            if spelled.len() >= 3 {
                let rel = p.strip_prefix(src).unwrap().display().to_string();
                out.push(format!("{rel}: {spelled:?}"));
            }
        }
    }
    out.sort();
    out
}

/// One spelling of the setup phases (issue 58, item 1): `enum Phase` in
/// `src/record/phase.rs` names them, and every table, sum and label is a use of it.
#[test]
fn phase_lists_are_written_once() {
    let src = src_dir();
    assert_eq!(phase_names(&src).len(), 12, "{:?}", phase_names(&src));
    none(
        phase_lists(&src),
        "phase names spelled outside src/record/phase.rs (use Phase)",
    );
}

/// The check sees a list of phases in Rust and in a script, and not two names that
/// happen to be words of another concept.
#[test]
fn the_check_catches_a_phase_list_written_out() {
    let dir = Scratch::new();
    let src = dir.join("src");
    let phases = std::fs::read_to_string(src_dir().join("record/phase.rs")).unwrap();
    put(src.join("record/phase.rs"), phases);
    put(
        src.join("a.rs"),
        "const SETUP: [&str; 3] = [\"dns\", \"connect\", \"tls\"];\n",
    );
    put(
        src.join("b.js"),
        "const P = [\"send\", \"wait\", \"receive\"];\n",
    );
    put(
        src.join("c.rs"),
        "const K: [&str; 2] = [\"tls\", \"total\"];\n",
    );
    let found = phase_lists(&src);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(
        found[0].starts_with("a.rs") && found[1].starts_with("b.js"),
        "{found:?}"
    );
}

/// ARCHITECTURE.md's code map: for each line of the list (from the ground floor up), the
/// rooms it names (`src/x/` or `src/x.rs`) and its text on one line.
fn floors(map: &str) -> Vec<(BTreeSet<String>, String)> {
    let start = map.find("## Code map").expect("a code map");
    let end = map[start..]
        .find("\n## Invariants")
        .map_or(map.len(), |e| start + e);
    let mut out = Vec::new();
    for bullet in map[start..end].split("\n- ").skip(1) {
        let text = bullet.split_whitespace().collect::<Vec<_>>().join(" ");
        let rooms = text
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|t| t.strip_prefix("src/"))
            .map(|t| t.trim_end_matches('/').trim_end_matches(".rs").to_string())
            .filter(|t| !t.contains('/'))
            .collect();
        out.push((rooms, text));
    }
    out
}

/// Where the code map is false: an arrow that runs up the list, a room on two lines, or
/// a line's claim of what it imports ("imports nothing of the crate", "beyond each other
/// and `sys`", "imports only the vocabulary") that its imports break.
fn map_violations(root: &Path) -> Vec<String> {
    let map = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let floors = floors(&map);
    let mut floor_of: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = Vec::new();
    for (i, (rooms, _)) in floors.iter().enumerate() {
        for r in rooms {
            if let Some(j) = floor_of.insert(r.clone(), i) {
                if j != i {
                    out.push(format!("{r} is on two lines of the map"));
                }
            }
        }
    }
    let vocabulary = floors
        .iter()
        .find(|(_, t)| t.contains("the vocabulary ("))
        .map(|(r, _)| r.clone())
        .unwrap_or_default();
    let src = root.join("src");
    let known = modules(&src);
    let room = |m: &str| m.split("::").next().unwrap_or("").to_string();
    for (m, p) in &known {
        let from = room(m);
        let Some(&at) = floor_of.get(&from) else {
            continue; // lib.rs and main.rs, and a room off the map (its own test)
        };
        let (rooms, text) = &floors[at];
        let allowed: Option<BTreeSet<String>> = if text.contains("imports nothing of the crate.") {
            Some(BTreeSet::new())
        } else if text.contains("nothing of the crate beyond each other and `sys`") {
            Some(rooms.iter().cloned().chain(["sys".to_string()]).collect())
        } else if text.contains("imports only the vocabulary") {
            Some(vocabulary.clone())
        } else {
            None
        };
        for to in arrows(m, &std::fs::read_to_string(p).unwrap(), &known) {
            let to = room(&to);
            if to == from {
                continue;
            }
            match floor_of.get(&to) {
                Some(&there) if there > at => out.push(format!("{m} -> {to}: runs up the map")),
                _ => {}
            }
            if allowed.as_ref().is_some_and(|a| !a.contains(&to)) {
                out.push(format!(
                    "{m} -> {to}: the map says {from} does not import it"
                ));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// ARCHITECTURE.md stays true (issue 58, item 6): its list's order and its claims of
/// what each room imports are held to the imports.
#[test]
fn the_map_is_true() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    none(map_violations(root), "ARCHITECTURE.md's code map is false");
}

/// The check sees an arrow up the list and a claim an import breaks, on a scratch map.
#[test]
fn the_check_catches_a_false_map() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(
        dir.join("ARCHITECTURE.md"),
        "## Code map\n\n- `src/a.rs`: the ground. It imports nothing of the crate.\n\
         - `src/b.rs`, `src/c.rs`: the vocabulary (words). They import nothing of the crate\n  \
         beyond each other and `sys`.\n- `src/d.rs`: above. It imports only the vocabulary.\n\
         \n## Invariants\n",
    );
    put(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\nmod d;\n");
    put(src.join("a.rs"), "fn f() { crate::b::g() }\n");
    put(src.join("b.rs"), "pub fn g() { crate::c::h() }\n");
    put(src.join("c.rs"), "pub fn h() {}\n");
    put(
        src.join("d.rs"),
        "fn k() { crate::a::f(); crate::b::g() }\n",
    );
    let found = map_violations(&dir);
    assert_eq!(
        found,
        [
            "a -> b: runs up the map",
            "a -> b: the map says a does not import it",
            "d -> a: the map says d does not import it",
        ]
    );
}

/// What may print below `report/` and `cmd/` (ARCHITECTURE.md, "Invariants"): progress
/// lines through `progress` itself, and the lab's note that an interrupt is stopping its
/// processes.
const PRINTERS: [&str; 2] = ["progress.rs", "lab/mod.rs"];

/// The files under `src` outside `report/` and `cmd/` that print: a `progress::note`,
/// or stdout or stderr locked for writing.
fn printers(src: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for p in modules(src).values() {
        let rel = p.strip_prefix(src).unwrap();
        if rel.starts_with("report") || rel.starts_with("cmd") {
            continue;
        }
        let code = code(&std::fs::read_to_string(p).unwrap());
        let prints = ["progress::note(", "stdout().lock()", "stderr().lock()"]
            .iter()
            .any(|w| code.contains(w))
            || (rel.ends_with("progress.rs") && code.contains("fn note("));
        if prints {
            out.push(rel.display().to_string());
        }
    }
    out.sort();
    out
}

#[test]
fn nothing_prints_below_the_commands_but_progress() {
    let src = src_dir();
    let mut found = printers(&src);
    found.retain(|f| !PRINTERS.contains(&f.as_str()));
    assert!(
        found.is_empty(),
        "printing below report/ and cmd/ (hand the lines to the command): {found:?}"
    );
    // The exceptions are said where a newcomer reads the rule.
    let map =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
            .unwrap();
    for p in PRINTERS {
        assert!(map.contains(&format!("`{p}`")), "ARCHITECTURE.md names {p}");
    }
}

/// The check sees a note and a locked stdout, and not a terminal's width read.
#[test]
fn the_check_catches_a_print_below_the_commands() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\nmod cmd;\n");
    put(
        src.join("a.rs"),
        "fn f() { crate::progress::note(\"x\") }\n",
    );
    put(
        src.join("b.rs"),
        "fn f() { let _ = writeln!(std::io::stdout().lock(), \"x\"); }\n",
    );
    put(
        src.join("c.rs"),
        "fn w() { let _ = std::io::stdout().is_terminal(); }\n",
    );
    put(
        src.join("cmd/mod.rs"),
        "fn f() { crate::progress::note(\"x\") }\n",
    );
    let found = printers(&src);
    assert_eq!(found, ["a.rs", "b.rs"]);
}

/// The files under `rooms` whose code (outside tests) reads the environment.
fn environment_readers(src: &Path, rooms: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (m, p) in modules(src) {
        let room = m.split("::").next().unwrap_or("");
        if !rooms.contains(&room) {
            continue;
        }
        let code = code(&std::fs::read_to_string(&p).unwrap());
        if code.contains("env::var") {
            out.push(m);
        }
    }
    out
}

/// Arguments are resolved once (issue 58, item 3): the engine, the plans it runs and the
/// protocols read no environment; `config` reads it into the plan (`HANDSHAKE_H1_TASKS`).
#[test]
fn the_engine_reads_no_environment() {
    let src = src_dir();
    none(
        environment_readers(&src, &["engine", "plan", "proto", "stats", "probe"]),
        "read the environment in config",
    );
}

#[test]
fn the_check_catches_the_engine_reading_the_environment() {
    let dir = Scratch::new();
    let src = dir.join("src");
    put(src.join("lib.rs"), "mod config;\nmod engine;\n");
    put(
        src.join("engine/mod.rs"),
        "fn f() -> bool { std::env::var_os(\"X\").is_some() }\n",
    );
    put(src.join("config.rs"), "fn f() { std::env::var(\"X\"); }\n");
    let found = environment_readers(&src, &["engine"]);
    assert_eq!(found, ["engine"]);
}

/// The most test binaries: each links the whole crate again (tests/README.md).
const MOST_TEST_BINARIES: usize = 12;

/// What is false of the tests folder under `tests`: more binaries than
/// `MOST_TEST_BINARIES`; a binary or a module its `main.rs` declares that the index
/// (`README.md`'s table, a row per binary with its modules) leaves out; a `.rs` file no
/// binary declares (a test that never runs); a lock of a module's own (`serial()` in
/// `common` is the one).
fn test_index_violations(tests: &Path) -> Vec<String> {
    let index = std::fs::read_to_string(tests.join("README.md")).unwrap_or_default();
    let row = |name: &str| {
        index
            .lines()
            .find(|l| l.starts_with(&format!("| `{name}`")))
            .map(str::to_owned)
    };
    let mut found = Vec::new();
    let mut binaries = 0;
    let mut entries: Vec<_> = std::fs::read_dir(tests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let main = path.join("main.rs");
        if path.extension().is_some_and(|e| e == "rs") {
            binaries += 1;
            if row(&name).is_none() {
                found.push(format!("{name}: not in the index"));
            }
        } else if main.is_file() {
            binaries += 1;
            let Some(row) = row(&name) else {
                found.push(format!("{name}: not in the index"));
                continue;
            };
            let text = std::fs::read_to_string(&main).unwrap();
            // Each module and the file it is read from (`#[path]` or its name).
            let mut declared = BTreeSet::new();
            let mut at = None;
            for l in text.lines() {
                if let Some(p) = l.strip_prefix("#[path = \"") {
                    at = p.strip_suffix("\"]").map(str::to_owned);
                } else if let Some(m) = l.strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                    declared.insert(at.take().unwrap_or(format!("{m}.rs")));
                    if m != "common" && !row.contains(&format!("`{m}`")) {
                        found.push(format!("{name}::{m}: not in the index"));
                    }
                }
            }
            for f in std::fs::read_dir(&path).unwrap() {
                let f = f.unwrap().file_name().to_string_lossy().into_owned();
                if f.ends_with(".rs") && f != "main.rs" && !declared.contains(&f) {
                    found.push(format!("{name}/{f}: no binary declares it"));
                }
            }
        } else if name != "common" && path.is_dir() && has_rust(&path) {
            found.push(format!("{name}/: Rust files without a main.rs"));
        }
    }
    if binaries > MOST_TEST_BINARIES {
        found.push(format!(
            "{binaries} test binaries, more than {MOST_TEST_BINARIES}"
        ));
    }
    for f in rust_files(tests) {
        let text = without_comments_and_strings(&std::fs::read_to_string(&f).unwrap());
        let rel = f.strip_prefix(tests).unwrap().display().to_string();
        if rel.starts_with("common/") || !rel.contains('/') {
            continue;
        }
        if text.contains("Mutex<()>") || text.contains("RwLock<()>") {
            found.push(format!(
                "{rel}: a lock of its own (common::serial and common::shared are the one)"
            ));
        }
        for name in tests_without_the_machine(&text) {
            found.push(format!(
                "{rel}::{name}: takes neither serial() nor shared() first"
            ));
        }
    }
    found
}

/// The tests in `text` whose first line takes neither the machine alone
/// (`serial()`, or a helper named for it) nor a share of it (`shared()`): a test that only
/// runs a command is still load for one that times, so every test takes one.
fn tests_without_the_machine(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("#[test]") {
        rest = &rest[i + "#[test]".len()..];
        let (Some(f), Some(open)) = (rest.find("fn "), rest.find('{')) else {
            break;
        };
        let name: String = rest[f + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let first: String = rest[open + 1..]
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_string();
        if !first.contains("serial") && !first.contains("shared()") {
            out.push(name);
        }
    }
    out
}

/// Whether `dir` holds a `.rs` file.
fn has_rust(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .unwrap()
        .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "rs"))
}

/// The `.rs` files under `dir`, at any depth (`node_modules` left out).
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() && !p.ends_with("node_modules") {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

#[test]
fn the_tests_folder_is_as_its_index_says() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    none(
        test_index_violations(&tests),
        "tests/README.md and the test binaries disagree",
    );
}

/// The check sees a binary and a module the index leaves out, a file no binary
/// declares, a lock of a module's own, a test that takes no share of the machine, and
/// one binary too many, on a scratch folder.
#[test]
fn the_check_catches_a_test_the_index_does_not_know() {
    let dir = Scratch::new();
    let mut table = String::from("| Binary | What | Modules |\n|---|---|---|\n");
    for k in 0..MOST_TEST_BINARIES {
        put(dir.join(format!("t{k}.rs")), "#[test]\nfn t() {}\n");
        table.push_str(&format!("| `t{k}` | one | - |\n"));
    }
    table.push_str("| `bench` | bench | `h2` |\n");
    put(dir.join("README.md"), table);
    put(
        dir.join("bench/main.rs"),
        "#[path = \"../common/mod.rs\"]\nmod common;\n\nmod h2;\nmod h3;\n",
    );
    put(
        dir.join("bench/h2.rs"),
        "static L: std::sync::Mutex<()> = todo!();\n",
    );
    put(
        dir.join("bench/h3.rs"),
        "#[test]\nfn alone() {\n    let _m = serial();\n}\n\n#[test]\nfn side_by_side() -> Result<(), String> {\n    let _m = shared();\n    Ok(())\n}\n\n#[test]\nfn loose() {\n    run();\n    let _m = serial();\n}\n",
    );
    put(
        dir.join("bench/forgotten.rs"),
        "#[test]\nfn never_runs() {\n    let _m = shared();\n}\n",
    );
    put(dir.join("common/mod.rs"), "pub fn serial() {}\n");
    put(dir.join("watch/main.rs"), "");
    assert_eq!(
        test_index_violations(&dir),
        [
            "bench::h3: not in the index",
            "bench/forgotten.rs: no binary declares it",
            "watch: not in the index",
            "14 test binaries, more than 12",
            "bench/h2.rs: a lock of its own (common::serial and common::shared are the one)",
            "bench/h3.rs::loose: takes neither serial() nor shared() first",
        ]
    );
}
