//! No module circle in fecq: every source file is a module (`src/x/mod.rs` is `x`, `src/x/y.rs`
//! is `x::y`), and a file that names another module's items (`crate::a::b`, `$crate::a`,
//! `super::a`, `self::a`, a child module `a::`, brace groups included; comments skipped) depends
//! on it. Those dependencies must form no cycle — not between top-level modules, nor between the
//! files of one directory (a child naming its parent's items while the parent names the child's).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Graph = BTreeMap<String, BTreeSet<String>>;

/// Every `.rs` file under `src` (but the binary's main.rs) as (module path, text).
fn sources(src: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            match parts.last().map(String::as_str) {
                Some("main") if parts.len() == 1 => continue,
                Some("lib") if parts.len() == 1 => parts.clear(),
                Some("mod") => {
                    parts.pop();
                }
                _ => {}
            }
            out.push((parts.join("::"), std::fs::read_to_string(&path).unwrap()));
        }
    }
    out
}

/// The text without comments (line comments and doc comments; no block comments in fecq).
fn code(text: &str) -> String {
    text.lines()
        .map(|line| {
            let mut in_str = false;
            let bytes = line.as_bytes();
            for i in 0..bytes.len() {
                match bytes[i] {
                    b'"' if i == 0 || bytes[i - 1] != b'\\' => in_str = !in_str,
                    b'/' if !in_str && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
                    _ => {}
                }
            }
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a brace group `{a, b::c, d::{e, f}, self, g as h}` names, `s[i]` being just after
/// its `{`, each as `prefix` + its segments (`self`: `prefix` itself); returns where it ends.
fn group(s: &[char], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    let mut current = prefix.to_vec();
    let mut ident = String::new();
    let mut alias = false;
    while i < s.len() {
        let c = s[i];
        if is_ident(c) {
            ident.push(c);
            i += 1;
            continue;
        }
        match std::mem::take(&mut ident).as_str() {
            "" => {}
            "as" => alias = true,
            "self" if !alias => out.push(prefix.to_vec()),
            name if !alias => current.push(name.to_string()),
            _ => {}
        }
        match c {
            '{' => {
                i = group(s, i + 1, &current, out);
                current.truncate(prefix.len());
            }
            ',' | '}' => {
                if current.len() > prefix.len() {
                    out.push(std::mem::replace(&mut current, prefix.to_vec()));
                }
                alias = false;
                if c == '}' {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// Every path in `text` that starts with `crate`, `$crate`, `super`, `self` or a bare identifier
/// followed by `::`, as segments (the first one included), brace groups expanded.
fn paths(text: &str) -> Vec<Vec<String>> {
    let s: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let starts = is_ident(s[i]) || s[i] == '$';
        let preceded = i > 0 && (is_ident(s[i - 1]) || s[i - 1] == ':' || s[i - 1] == '$');
        if !starts || preceded {
            i += 1;
            continue;
        }
        let mut segments = Vec::new();
        let mut j = i;
        loop {
            let begin = j;
            if j < s.len() && s[j] == '$' {
                j += 1;
            }
            while j < s.len() && is_ident(s[j]) {
                j += 1;
            }
            segments.push(s[begin..j].iter().collect::<String>());
            if j + 2 < s.len() && s[j] == ':' && s[j + 1] == ':' {
                j += 2;
                if s[j] == '{' {
                    j = group(&s, j + 1, &segments, &mut out);
                    segments.clear();
                    break;
                }
                if !(is_ident(s[j]) || s[j] == '$') {
                    break;
                }
            } else {
                break;
            }
        }
        if segments.len() > 1 {
            out.push(segments);
        }
        i = j.max(i + 1);
    }
    out
}

/// The module graph of `files` (module path, text): an edge from each module to every other
/// module whose items it names.
fn graph(files: &[(String, String)]) -> Graph {
    let modules: BTreeSet<String> = files.iter().map(|(m, _)| m.clone()).collect();
    let split = |m: &str| -> Vec<String> {
        if m.is_empty() {
            Vec::new()
        } else {
            m.split("::").map(String::from).collect()
        }
    };
    let mut g = Graph::new();
    for (module, text) in files {
        let here = split(module);
        let deps = g.entry(module.clone()).or_default();
        for path in paths(&code(text)) {
            let mut absolute = match path[0].as_str() {
                "crate" | "$crate" => Vec::new(),
                "self" => here.clone(),
                "super" => {
                    let mut up = here.clone();
                    let mut rest = &path[..];
                    while rest.first().is_some_and(|s| s == "super") {
                        up.pop();
                        rest = &rest[1..];
                    }
                    let mut p = up;
                    p.extend_from_slice(rest);
                    resolve(&modules, module, p, deps);
                    continue;
                }
                // A bare first segment: a child module of this one, or anything else (an extern
                // crate, a type, an enum's variants), which is no edge.
                _ => {
                    let mut child = here.clone();
                    child.push(path[0].clone());
                    if !modules.contains(&child.join("::")) {
                        continue;
                    }
                    here.clone()
                }
            };
            let skip = usize::from(matches!(path[0].as_str(), "crate" | "$crate" | "self"));
            absolute.extend_from_slice(&path[skip..]);
            resolve(&modules, module, absolute, deps);
        }
    }
    g
}

/// Add an edge to the longest prefix of `path` that is a module (not `from` itself, nor the
/// crate root).
fn resolve(modules: &BTreeSet<String>, from: &str, path: Vec<String>, deps: &mut BTreeSet<String>) {
    for n in (1..=path.len()).rev() {
        let candidate = path[..n].join("::");
        if modules.contains(&candidate) {
            if candidate != from {
                deps.insert(candidate);
            }
            return;
        }
    }
}

/// A cycle of `g`, if any, as the modules along it (the first repeated at the end).
fn find_cycle(g: &Graph) -> Option<Vec<String>> {
    fn visit(
        g: &Graph,
        node: &str,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(node).copied().unwrap_or(0) {
            1 => {
                let start = path.iter().position(|m| m == node).unwrap();
                let mut cycle = path[start..].to_vec();
                cycle.push(node.to_string());
                return Some(cycle);
            }
            2 => return None,
            _ => {}
        }
        state.insert(node.to_string(), 1);
        path.push(node.to_string());
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in g.keys() {
        if let Some(c) = visit(g, node, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn fecq_has_no_module_circle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&sources(&src));
    if let Some(cycle) = find_cycle(&g) {
        panic!("module circle: {}", cycle.join(" -> "));
    }
    // The graph is the real one (the parser found the seam's edges), not an empty one.
    let has = |from: &str, to: &str| g.get(from).is_some_and(|d| d.contains(to));
    assert!(
        has("run", "stack") && has("run", "app") && has("app", "app::transfer"),
        "{g:#?}"
    );
    assert!(has("quinn_stack", "quinn_stack::udp") && has("quinn_stack::udp", "socket"));
    assert!(has("noq_stack::udp", "noq_stack::paths") && has("layer", "layer::route"));
    assert!(has("layer::route", "layer::group") && has("options::transport", "options::config"));
    assert!(!has("socket", "quinn_stack") && !has("layer", "socket"));
    assert!(g.values().map(BTreeSet::len).sum::<usize>() > 80, "{g:#?}");
}

#[test]
fn the_check_sees_circles_through_crate_super_and_child_paths() {
    let files = |a: &str, b: &str| {
        vec![
            ("".to_string(), "pub mod a;\npub mod b;".to_string()),
            ("a".to_string(), a.to_string()),
            ("a::x".to_string(), String::new()),
            ("b".to_string(), b.to_string()),
        ]
    };
    let ab = "use crate::b::{self, Thing};";
    for b in [
        "use crate::a::Other;",
        "fn f() -> crate::a::T { todo!() }",
        "use crate::{a::Other, c};",
        "use super::a;",
        "macro_rules! m { () => { $crate::a::f() } }",
    ] {
        let cycle = find_cycle(&graph(&files(ab, b))).unwrap_or_else(|| panic!("{b}"));
        assert!(
            cycle.contains(&"a".to_string()) && cycle.len() >= 3,
            "{b}: {cycle:?}"
        );
    }
    // A parent naming its child while the child names the parent's items.
    let parent_child = vec![
        ("p".to_string(), "use child::T;\npub struct U;".to_string()),
        ("p::child".to_string(), "use super::U;".to_string()),
    ];
    assert!(find_cycle(&graph(&parent_child)).is_some());
    // No circle: comments, extern crates and a one-way dependency.
    let one_way = files(ab, "// crate::a::x\nuse quinn::a::Thing;\nuse std::fmt;");
    assert_eq!(find_cycle(&graph(&one_way)), None);
    // The longest module prefix of a path: an item of a::x is a dependency on a::x.
    let g = graph(&files("", "use crate::a::x::{T, U as V};"));
    assert_eq!(g["b"], BTreeSet::from(["a::x".to_string()]));
}
