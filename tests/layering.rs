//! The crate's layers point one way. Every `crate::` path (and every
//! `super::` path that climbs out of its top module) in the non-test code
//! of `src/` is held against the layer table at the top of `src/lib.rs`:
//! a module may name its own layer or a lower one, and the modules of one
//! layer may not name each other in a circle.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Where each top module stands: module -> (layer number, layer name).
type LayerTable = BTreeMap<String, (u8, String)>;

/// Reads the ```` ```text ```` block of `//! layer N  name  module module ...`
/// lines in lib.rs.
fn layer_table(lib_rs: &str) -> LayerTable {
    let mut table = LayerTable::new();
    for line in lib_rs.lines() {
        let Some(rest) = line.trim_start().strip_prefix("//! layer ") else { continue };
        let mut words = rest.split_whitespace();
        let number: u8 = words.next().and_then(|n| n.parse().ok()).expect("a layer line starts with its number");
        let name = words.next().expect("a layer line names its layer").to_string();
        for module in words {
            let before = table.insert(module.to_string(), (number, name.clone()));
            assert!(before.is_none(), "lib.rs puts module {module} in two layers");
        }
    }
    table
}

/// The top modules lib.rs declares.
fn declared_modules(lib_rs: &str) -> BTreeSet<String> {
    lib_rs
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod ").or_else(|| l.trim().strip_prefix("mod ")))
        .map(|l| l.trim_end_matches(';').trim().to_string())
        .collect()
}

/// `text` with comments, string and char literals blanked out (new lines
/// kept, so offsets still give line numbers).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = b.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = text[i..].find('\n').map_or(b.len(), |n| i + n);
                blank(&mut out, i, end);
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let end = text[i + 2..].find("*/").map_or(b.len(), |n| i + 2 + n + 2);
                blank(&mut out, i, end);
                i = end;
            }
            b'r' if (b.get(i + 1) == Some(&b'"') || b.get(i + 1) == Some(&b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close = format!("\"{}", "#".repeat(hashes));
                let start = i + 2 + hashes;
                let end = text[start..].find(&close).map_or(b.len(), |n| start + n + close.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                let end = (j + 1).min(b.len());
                blank(&mut out, i, end);
                i = end;
            }
            b'\'' => {
                // A char literal ('x', '\n', '\u{..}'); otherwise a lifetime.
                let end = if b.get(i + 1) == Some(&b'\\') {
                    text[i + 2..].find('\'').map(|n| i + 2 + n + 1)
                } else {
                    let ch = text[i + 1..].chars().next().map_or(0, char::len_utf8);
                    (b.get(i + 1 + ch) == Some(&b'\'')).then_some(i + 2 + ch)
                };
                match end {
                    Some(end) => {
                        blank(&mut out, i, end);
                        i = end;
                    }
                    None => i += 1,
                }
            }
            _ => i += 1,
        }
    }
    String::from_utf8(out).expect("blanking keeps UTF-8 (only ASCII bytes are replaced whole)")
}

/// `code` with every `#[cfg(test)]` item blanked out; also returns the
/// names of `#[cfg(test)] mod name;` files.
fn without_test_items(code: &str) -> (String, Vec<String>) {
    let b = code.as_bytes();
    let mut out = code.to_string().into_bytes();
    let mut test_files = Vec::new();
    let mut from = 0;
    while let Some(n) = code[from..].find("#[cfg(test)]") {
        let start = from + n;
        let mut i = start + "#[cfg(test)]".len();
        // The item ends at a `;` or at the brace closing its first `{`.
        let mut depth = 0usize;
        let mut end = b.len();
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
            i += 1;
        }
        let item = &code[start..end];
        let words: Vec<&str> =
            item.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        if let Some(at) = words.iter().position(|&w| w == "mod") {
            if item.trim_end().ends_with(';') {
                if let Some(name) = words.get(at + 1) {
                    test_files.push(name.to_string());
                }
            }
        }
        for c in &mut out[start..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        from = end;
    }
    (String::from_utf8(out).expect("ASCII blanking keeps UTF-8"), test_files)
}

/// One path that leaves its own top module.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reference {
    line: usize,
    target: String,
    text: String,
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// The top modules named by `crate::` paths, and by `super::` paths that
/// climb above the crate root's children, in `code` of the module `module`
/// (its path below the crate root; a `mod.rs` is its folder's module).
fn references(code: &str, module: &[String]) -> Vec<Reference> {
    let b = code.as_bytes();
    let line_of = |at: usize| code[..at].bytes().filter(|&c| c == b'\n').count() + 1;
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_alphabetic() || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b':')) {
            i += 1;
            continue;
        }
        let word_end = i + b[i..].iter().take_while(|&&c| is_ident(c)).count();
        let word = &code[i..word_end];
        if word != "crate" && word != "super" {
            i = word_end;
            continue;
        }
        // Walk `super::super::` up from the module; `crate` starts at the root.
        let mut depth = if word == "crate" { 0 } else { module.len().saturating_sub(1) };
        let mut at = word_end;
        while word == "super" && code[at..].starts_with("::super") {
            depth = depth.saturating_sub(1);
            at += "::super".len();
        }
        if depth > 0 || !code[at..].starts_with("::") {
            i = at;
            continue;
        }
        at += 2;
        let rest = code[at..].trim_start();
        let at = at + (code[at..].len() - rest.len());
        let targets: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            // `crate::{a::x, b}`: the first segment of each top-level item.
            let mut depth = 1;
            let mut items = vec![String::new()];
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            break;
                        }
                    }
                    ',' if depth == 1 => items.push(String::new()),
                    _ => {}
                }
                if depth >= 1 && !(c == ',' && depth == 1) {
                    items.last_mut().expect("one item at least").push(c);
                }
            }
            items
                .iter()
                .filter_map(|item| {
                    let first: String = item.trim().chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
                    (!first.is_empty()).then_some(first)
                })
                .collect()
        } else {
            let first: String = rest.chars().take_while(|&c| c.is_alphanumeric() || c == '_').collect();
            vec![first]
        };
        let text_end = code[at..].find([';', '\n']).map_or(b.len(), |n| at + n);
        for target in targets {
            if target.is_empty() || target == "self" {
                continue;
            }
            found.push(Reference { line: line_of(i), target, text: format!("{word}::{}", code[at..text_end].trim()) });
        }
        i = at;
    }
    found
}

/// A source file's module path below the crate root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    let last = parts.pop().expect("a file name");
    if last != "mod.rs" && last != "lib.rs" {
        parts.push(last.trim_end_matches(".rs").to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        fs::read_dir(dir).expect("a readable source folder").map(|e| e.expect("a folder entry").path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// What the check found wrong, one line each.
fn violations(src: &Path) -> Vec<String> {
    let lib_rs = fs::read_to_string(src.join("lib.rs")).expect("src/lib.rs");
    let table = layer_table(&lib_rs);
    let mut problems = Vec::new();
    for m in declared_modules(&lib_rs) {
        if !table.contains_key(&m) {
            problems.push(format!("src/lib.rs: module {m} stands in no layer of the table"));
        }
    }
    for m in table.keys() {
        if !declared_modules(&lib_rs).contains(m) {
            problems.push(format!("src/lib.rs: the layer table names {m}, which lib.rs does not declare"));
        }
    }

    let mut files = Vec::new();
    rust_files(src, &mut files);
    // Test-only files: declared `#[cfg(test)] mod name;`, and all below them.
    let mut test_roots: BTreeSet<PathBuf> = BTreeSet::new();
    let mut cleaned = BTreeMap::new();
    for f in &files {
        let text = fs::read_to_string(f).expect("a readable source file");
        let (code, test_mods) = without_test_items(&code_only(&text));
        let dir = if f.file_name().is_some_and(|n| n == "mod.rs" || n == "lib.rs") {
            f.parent().expect("a folder").to_path_buf()
        } else {
            f.with_extension("")
        };
        for m in test_mods {
            test_roots.insert(dir.join(format!("{m}.rs")));
            test_roots.insert(dir.join(&m));
        }
        cleaned.insert(f.clone(), code);
    }

    let mut edges: BTreeMap<(String, String), (String, usize)> = BTreeMap::new();
    for (f, code) in &cleaned {
        if f.file_name().is_some_and(|n| n == "main.rs") || test_roots.iter().any(|t| f.starts_with(t)) {
            continue;
        }
        let module = module_of(src, f);
        let Some(top) = module.first() else { continue };
        let Some(&(from_layer, ref from_name)) = table.get(top) else { continue };
        let shown = f.strip_prefix(src.parent().expect("the crate folder")).unwrap_or(f).display().to_string();
        for r in references(code, &module) {
            if &r.target == top {
                continue;
            }
            let Some((to_layer, to_name)) = table.get(&r.target) else { continue };
            if *to_layer > from_layer {
                problems.push(format!(
                    "{shown}:{}: {top} (layer {from_layer}, {from_name}) names {} (layer {to_layer}, {to_name}): {}",
                    r.line, r.target, r.text
                ));
            } else if *to_layer == from_layer {
                edges.entry((top.clone(), r.target.clone())).or_insert((shown.clone(), r.line));
            }
        }
    }
    // Circles within a layer: a depth-first search over the same-layer arrows.
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut reported = BTreeSet::new();
    for start in next.keys() {
        let mut stack = vec![(*start, vec![*start])];
        let mut seen = BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for &n in next.get(at).map(Vec::as_slice).unwrap_or(&[]) {
                if n == *start {
                    let mut circle: Vec<&str> = path.clone();
                    let lowest = circle.iter().enumerate().min_by_key(|(_, m)| **m).map_or(0, |(i, _)| i);
                    circle.rotate_left(lowest);
                    if reported.insert(circle.clone()) {
                        let hops: Vec<String> = circle
                            .iter()
                            .zip(circle.iter().cycle().skip(1))
                            .map(|(a, b)| {
                                let (file, line) = &edges[&(a.to_string(), b.to_string())];
                                format!("{a} -> {b} ({file}:{line})")
                            })
                            .collect();
                        problems.push(format!("import circle within a layer: {}", hops.join(", ")));
                    }
                } else if seen.insert(n) {
                    let mut p = path.clone();
                    p.push(n);
                    stack.push((n, p));
                }
            }
        }
    }
    problems
}

#[test]
fn no_module_names_a_higher_layer_or_a_circle_in_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let problems = violations(&src);
    assert!(
        problems.is_empty(),
        "{} arrow(s) against the layer table in src/lib.rs:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The check itself: it must see an upward `use`, grouped or inline, and
/// must not see one in a comment, a string or test code.
#[test]
fn the_check_sees_upward_paths_and_ignores_comments_strings_and_tests() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    fs::create_dir_all(src.join("low")).unwrap();
    fs::create_dir_all(src.join("high")).unwrap();
    fs::write(
        src.join("lib.rs"),
        "//! ```text\n//! layer 2  top   high\n//! layer 1  bottom  low\n//! ```\npub mod high;\npub mod low;\n",
    )
    .unwrap();
    fs::write(src.join("high/mod.rs"), "use crate::low::Thing;\n").unwrap();
    fs::write(
        src.join("low/mod.rs"),
        concat!(
            "// crate::high::Ignored in a comment\n",
            "const S: &str = \"crate::high::InAString\";\n",
            "use crate::{high::Grouped, low::Fine};\n",
            "fn f() { let _ = super::high::Climbed; let _ = crate::high::Inline::new(); }\n",
            "#[cfg(test)]\nmod tests { use crate::high::FromATest; }\n",
            "#[cfg(test)]\nmod more_tests;\n",
        ),
    )
    .unwrap();
    fs::write(src.join("low/more_tests.rs"), "use crate::high::FromATestFile;\n").unwrap();
    let problems = violations(&src);
    let lines: Vec<usize> =
        problems.iter().map(|p| p.split(':').nth(1).and_then(|n| n.parse().ok()).expect("file:line: ...")).collect();
    assert_eq!(lines, vec![3, 4, 4], "{problems:#?}");
    assert!(problems.iter().all(|p| p.contains("low (layer 1, bottom) names high (layer 2, top)")), "{problems:#?}");

    // Two modules of one layer that name each other form a circle.
    fs::write(src.join("lib.rs"), "//! ```text\n//! layer 1  bottom  low high\n//! ```\npub mod high;\npub mod low;\n")
        .unwrap();
    fs::write(src.join("low/mod.rs"), "use crate::high::Thing;\n").unwrap();
    let problems = violations(&src);
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].starts_with("import circle within a layer: high -> low"), "{problems:#?}");
}
