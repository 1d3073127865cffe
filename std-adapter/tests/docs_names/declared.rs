//! What the crates' sources declare, read as text (grep-level, rustfmt's layout), and the check
//! of one Rust path against it: the half of the docs-name check that knows Rust.

use super::{is_ident, walk, SOURCES};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// What the sources declare, read as text.
#[derive(Default)]
pub(super) struct Declared {
    /// Every declared name (items, methods, variants, fields, modules).
    pub(super) names: BTreeSet<String>,
    /// Module name -> names declared or re-exported in it (and its submodules' names).
    pub(super) modules: BTreeMap<String, BTreeSet<String>>,
    /// Type or trait name -> its methods, constants, associated types, variants and fields.
    members: BTreeMap<String, BTreeSet<String>>,
}

/// The name a declaration line introduces: `pub(crate) fn foo<T>(` is `("fn", "foo")`.
fn declaration(line: &str) -> Option<(&str, &str)> {
    let mut text = line.trim();
    if let Some(rest) = text.strip_prefix("pub") {
        text = match rest.strip_prefix('(') {
            Some(restricted) => restricted.split_once(')')?.1,
            None => rest,
        }
        .trim_start();
    }
    for qualifier in
        ["const fn ", "unsafe fn ", "extern \"C\" fn ", "unsafe extern \"C\" fn ", "unsafe trait "]
    {
        if let Some(rest) = text.strip_prefix(qualifier) {
            let kind = qualifier.trim().rsplit(' ').next().unwrap();
            return Some((kind, ident_prefix(rest)?));
        }
    }
    for kind in ["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "union", "macro_rules!"] {
        if let Some(rest) = text.strip_prefix(kind).and_then(|rest| rest.strip_prefix(' ')) {
            let rest = rest.trim_start_matches("mut ");
            return Some((kind, ident_prefix(rest)?));
        }
    }
    None
}

fn ident_prefix(text: &str) -> Option<&str> {
    let end = text.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(text.len());
    let name = &text[..end];
    is_ident(name).then_some(name)
}

/// The type or trait an `impl`/`trait`/`struct`/`enum` header line opens, if any.
fn block_owner(line: &str) -> Option<String> {
    let trimmed = line.trim();
    if !trimmed.ends_with('{') {
        return None;
    }
    if let Some((kind, name)) = declaration(trimmed) {
        return matches!(kind, "trait" | "struct" | "enum" | "union").then(|| name.to_owned());
    }
    let text = trimmed.strip_prefix("unsafe ").unwrap_or(trimmed).strip_prefix("impl")?;
    let mut plain = String::new();
    let mut depth = 0;
    for c in text.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            _ if depth == 0 => plain.push(c),
            _ => {}
        }
    }
    let plain = plain.split(" where").next().unwrap().trim_end_matches('{').trim();
    let target = plain.rsplit(" for ").next().unwrap().trim();
    let last = target.rsplit("::").next().unwrap();
    ident_prefix(last.trim_start_matches('&').trim_start_matches("mut ")).map(str::to_owned)
}

pub(super) fn read_sources(root: &Path) -> Declared {
    let mut declared = Declared::default();
    let mut files = Vec::new();
    for dir in SOURCES {
        walk(&root.join(dir), &mut files);
    }
    for file in files.iter().filter(|f| f.extension().is_some_and(|e| e == "rs")) {
        let source = std::fs::read_to_string(file).unwrap();
        // The modules this file belongs to: every folder below `src` and the file's own name.
        let modules: Vec<String> = file
            .components()
            .map(|c| c.as_os_str().to_string_lossy().trim_end_matches(".rs").to_owned())
            .filter(|name| {
                !matches!(name.as_str(), "mod" | "lib" | "main" | "src" | "tests") && is_ident(name)
            })
            .collect();
        let mut blocks: Vec<(usize, String)> = Vec::new();
        let mut use_text: Option<String> = None;
        for line in source.lines() {
            let trimmed = line.trim();
            let depth = line.len() - line.trim_start().len();
            if trimmed.starts_with("//") {
                continue;
            }
            if trimmed.starts_with('}') {
                while blocks.last().is_some_and(|(at, _)| *at >= depth) {
                    blocks.pop();
                }
            }
            // `pub use a::{B, c as d};`: the names it brings into the module.
            if trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ") || use_text.is_some()
            {
                let text = use_text.take().unwrap_or_default() + " " + trimmed;
                if !trimmed.ends_with(';') {
                    use_text = Some(text);
                    continue;
                }
                for piece in text.split([',', '{', '}', ';']) {
                    let name =
                        piece.rsplit(" as ").next().unwrap().trim().rsplit("::").next().unwrap().trim();
                    if is_ident(name) {
                        for module in &modules {
                            declared.modules.entry(module.clone()).or_default().insert(name.to_owned());
                        }
                    }
                }
                continue;
            }
            if let Some((kind, name)) = declaration(line) {
                declared.names.insert(name.to_owned());
                for module in &modules {
                    declared.modules.entry(module.clone()).or_default().insert(name.to_owned());
                }
                if kind == "mod" {
                    declared.modules.entry(name.to_owned()).or_default();
                }
                if let Some((_, owner)) = blocks.last() {
                    declared.members.entry(owner.clone()).or_default().insert(name.to_owned());
                }
            } else if let Some((_, owner)) = blocks.last() {
                // An enum variant (`Name,`, `Name(..)`, `Name {`) or a field (`name: T,`).
                let name = ident_prefix(trimmed.trim_start_matches("pub ")).unwrap_or("");
                let after = trimmed.trim_start_matches("pub ")[name.len()..].chars().next();
                if !name.is_empty() && matches!(after, Some(',' | '(' | ' ' | ':') | None) {
                    declared.names.insert(name.to_owned());
                    declared.members.entry(owner.clone()).or_default().insert(name.to_owned());
                }
            }
            if let Some(owner) = block_owner(line) {
                blocks.push((depth, owner));
            }
        }
        for module in &modules {
            declared.modules.entry(module.clone()).or_default();
        }
        for pair in modules.windows(2) {
            declared.modules.get_mut(&pair[0]).unwrap().insert(pair[1].clone());
        }
    }
    declared
}

/// The step at which a Rust path names nothing and why, or `None` when every step is found.
pub(super) fn check_path<'a>(declared: &Declared, steps: &[&'a str]) -> Option<(&'a str, String)> {
    let crate_roots = ["hostcall", "hostcall_core", "crate", "hostcall_capi", "hsa_sys"];
    let mut previous: Option<&str> = None;
    for &step in steps {
        let found = match previous {
            None => {
                crate_roots.contains(&step)
                    || declared.names.contains(step)
                    || declared.modules.contains_key(step)
            }
            Some(root) if crate_roots.contains(&root) => {
                declared.names.contains(step) || declared.modules.contains_key(step)
            }
            Some(owner) if owner.starts_with(|c: char| c.is_ascii_uppercase()) => {
                declared.members.get(owner).is_some_and(|members| members.contains(step))
            }
            Some(module) => declared.modules.get(module).is_some_and(|names| names.contains(step)),
        };
        if !found {
            return Some((
                step,
                match previous {
                    None => format!("`{step}` is declared nowhere"),
                    Some(parent) => format!("`{parent}` has no `{step}`"),
                },
            ));
        }
        previous = Some(step);
    }
    None
}
