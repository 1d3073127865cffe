//! Every type, trait, function and constant of `hostcall` has one public path (the rule of the
//! crate's front page): this test reads the crate's lines of `tests/public_items.txt` (which
//! `public_items.rs` keeps equal to the sources), walks the public modules from the root (`pub
//! mod` declarations, and `pub use` re-exports followed to what they name), and fails when one
//! item is reachable at two paths. The prelude is the one exception: it re-exports traits (only
//! traits) that have their one path elsewhere, so that `use hostcall::prelude::*` brings their
//! methods into scope.
//!
//! Items are told apart by where they are declared, not by name, so two distinct items that share
//! a name (`observe::Stats` and a `Stats` of another module) are two items; and a re-export of an
//! item of `hostcall_core` counts as a path of that item. No public module may be named like a
//! built-in crate (`core`, `alloc`, `std`): it would shadow that crate in a user's paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The kinds of declaration that are items a user names by path.
const ITEM_KINDS: [&str; 9] = ["struct", "enum", "trait", "fn", "const", "static", "type", "union", "macro"];

/// Names a public module must not have.
const BUILT_IN_CRATES: [&str; 3] = ["core", "alloc", "std"];

/// What a path names.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Target {
    /// A module of this crate, by its path from `crate`.
    Module(String),
    /// An item of this crate, by the module that declares it and its name, with its kind.
    Item(String, &'static str),
    /// Something of another crate, by its path.
    External(String),
}

#[derive(Default)]
struct Surface {
    /// Every module of the crate that the list shows (public or not).
    modules: BTreeSet<String>,
    /// Per module: the children it declares `pub mod`.
    public_children: BTreeMap<String, BTreeSet<String>>,
    /// Per module: its items, name to kind.
    items: BTreeMap<String, BTreeMap<String, &'static str>>,
    /// Per module: its `pub use` bindings, the name bound to the path it names.
    uses: BTreeMap<String, Vec<(String, String)>>,
}

fn parent(module: &str) -> String {
    module.rsplit_once("::").map_or("crate", |(parent, _)| parent).to_owned()
}

/// `a::{b, c::{d as e, self}}` as `(bound name, path)` pairs.
fn expand(prefix: &str, tree: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').expect("a use group closes")];
        let prefix = join(prefix, head);
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&prefix, &inner[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        expand(&prefix, &inner[start..], out);
        return;
    }
    if tree.is_empty() {
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((path, alias)) => (path.trim(), Some(alias.trim())),
        None => (tree, None),
    };
    assert!(!path.ends_with('*'), "a glob re-export (`{prefix}::{path}`): name what it re-exports");
    let path = if path == "self" { prefix.to_owned() } else { join(prefix, path) };
    let name = alias.unwrap_or_else(|| path.rsplit("::").next().unwrap()).to_owned();
    out.push((name, path));
}

fn join(prefix: &str, rest: &str) -> String {
    match (prefix.is_empty(), rest.is_empty()) {
        (true, _) => rest.to_owned(),
        (_, true) => prefix.to_owned(),
        _ => format!("{prefix}::{rest}"),
    }
}

impl Surface {
    /// The lines of `list` that belong to `crate_name`.
    fn parse(list: &str, crate_name: &str) -> Self {
        let mut surface = Surface::default();
        let lines: Vec<(&str, &str)> = list
            .lines()
            .filter_map(|line| line.strip_prefix(crate_name)?.strip_prefix(' ')?.split_once(' '))
            .collect();
        for (module, _) in &lines {
            let mut module = module.to_string();
            loop {
                surface.modules.insert(module.clone());
                if module == "crate" {
                    break;
                }
                module = parent(&module);
            }
        }
        for (module, rest) in &lines {
            if let Some(child) = rest.strip_prefix("mod ") {
                surface.modules.insert(format!("{module}::{child}"));
                surface.public_children.entry(module.to_string()).or_default().insert(child.to_owned());
            }
        }
        for (module, rest) in &lines {
            if let Some(tree) = rest.strip_prefix("use ") {
                let mut bound = Vec::new();
                expand("", tree.trim_end_matches(';'), &mut bound);
                surface.uses.entry(module.to_string()).or_default().extend(bound);
                continue;
            }
            let Some((kind, name)) = rest.split_once(' ') else { continue };
            let Some(&kind) = ITEM_KINDS.iter().find(|&&k| k == kind) else { continue };
            // `fn Type::method` is a method; `const slot::PC` an item of the inline module `slot`.
            let (module, name) = match name.split_once("::") {
                Some((inner, name)) if surface.modules.contains(&format!("{module}::{inner}")) => {
                    (format!("{module}::{inner}"), name)
                }
                Some(_) => continue,
                None => (module.to_string(), name),
            };
            surface.items.entry(module).or_default().insert(name.to_owned(), kind);
        }
        surface
    }

    /// What `name` names inside `module`: a child module, an item, or a re-export.
    fn lookup(&self, module: &str, name: &str, depth: usize) -> Option<Target> {
        let child = format!("{module}::{name}");
        if self.modules.contains(&child) {
            return Some(Target::Module(child));
        }
        if let Some(&kind) = self.items.get(module).and_then(|items| items.get(name)) {
            return Some(Target::Item(child, kind));
        }
        let (_, path) = self.uses.get(module)?.iter().find(|(bound, _)| bound == name)?;
        Some(self.resolve(module, path, depth + 1))
    }

    /// What `path`, written in `module`, names (Rust 2018 paths: `crate::`, `self::`, `super::`,
    /// a name of the module, or another crate).
    fn resolve(&self, module: &str, path: &str, depth: usize) -> Target {
        assert!(depth < 32, "re-exports in a cycle at `{module}`: `{path}`");
        let segments: Vec<&str> = path.split("::").collect();
        let (mut at, rest) = match segments[0] {
            "crate" => (Target::Module("crate".into()), &segments[1..]),
            "self" => (Target::Module(module.into()), &segments[1..]),
            "super" => (Target::Module(parent(module)), &segments[1..]),
            first => match self.lookup(module, first, depth) {
                Some(target) => (target, &segments[1..]),
                None => (Target::External(first.to_owned()), &segments[1..]),
            },
        };
        for segment in rest {
            at = match at {
                Target::Module(inner) => self
                    .lookup(&inner, segment, depth)
                    .unwrap_or_else(|| panic!("`{path}` (in `{module}`): `{inner}` has no `{segment}`")),
                Target::External(outer) => Target::External(format!("{outer}::{segment}")),
                // `Enum::Variant`: the variant goes with its enum.
                Target::Item(item, kind) => Target::Item(format!("{item}::{segment}"), kind),
            };
        }
        at
    }

    /// Every public path (from `root`) of everything reachable, by what it names.
    fn paths(&self, root: &str) -> BTreeMap<Target, BTreeSet<String>> {
        let mut paths = BTreeMap::new();
        let mut walking = BTreeSet::new();
        self.walk("crate", root, &mut paths, &mut walking);
        paths
    }

    fn walk(
        &self,
        module: &str,
        public: &str,
        paths: &mut BTreeMap<Target, BTreeSet<String>>,
        walking: &mut BTreeSet<String>,
    ) {
        if !walking.insert(public.to_owned()) {
            return;
        }
        let mut add = |target: Target, path: String| paths.entry(target).or_default().insert(path);
        for (name, &kind) in self.items.get(module).into_iter().flatten() {
            add(Target::Item(format!("{module}::{name}"), kind), format!("{public}::{name}"));
        }
        let mut modules = Vec::new();
        for child in self.public_children.get(module).into_iter().flatten() {
            modules.push((format!("{module}::{child}"), format!("{public}::{child}")));
        }
        for (bound, path) in self.uses.get(module).into_iter().flatten() {
            match self.resolve(module, path, 0) {
                Target::Module(inner) => modules.push((inner, format!("{public}::{bound}"))),
                target => {
                    add(target, format!("{public}::{bound}"));
                }
            }
        }
        for (inner, path) in modules {
            paths.entry(Target::Module(inner.clone())).or_default().insert(path.clone());
            self.walk(&inner, &path, paths, walking);
        }
    }
}

/// What breaks the rule, one line each (empty: none does).
fn violations(surface: &Surface, root: &str, allowed: &[(&str, &str)]) -> Vec<String> {
    let prelude = format!("{root}::prelude::");
    let mut found = Vec::new();
    for (target, paths) in surface.paths(root) {
        let (in_prelude, outside): (Vec<&String>, Vec<&String>) =
            paths.iter().partition(|p| p.starts_with(&prelude));
        for path in &in_prelude {
            if !matches!(target, Target::Item(_, "trait")) {
                found.push(format!("`{path}` is in the prelude, which holds traits only ({target:?})"));
            } else if outside.is_empty() {
                found.push(format!("`{path}` has no path outside the prelude"));
            }
        }
        let allowed_here = outside.iter().all(|p| allowed.iter().any(|(path, _)| p == path));
        if outside.len() > 1 && !allowed_here {
            let list: Vec<&str> = outside.iter().map(|p| p.as_str()).collect();
            found.push(format!("{target:?} has {} public paths: {}", list.len(), list.join(", ")));
        }
        for path in outside {
            if let Some(segment) = path.split("::").find(|segment| BUILT_IN_CRATES.contains(segment)) {
                found.push(format!("`{path}`: a public module named `{segment}` shadows the built-in crate"));
            }
        }
    }
    found
}

/// Paths that may name one item twice, each with the reason (none today).
const ALLOWED: [(&str, &str); 0] = [];

#[test]
#[cfg_attr(not(hostcall_workspace), ignore = "tests/public_items.txt lists the workspace's sources")]
fn every_item_of_hostcall_has_one_public_path() {
    let list = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/public_items.txt"))
        .unwrap();
    let surface = Surface::parse(&list, "hostcall");
    let paths = surface.paths("hostcall");
    assert!(
        paths.contains_key(&Target::Item("crate::threads::listener::Listener".into(), "struct")),
        "the walk reaches the crate's types"
    );
    let items = paths.keys().filter(|target| !matches!(target, Target::Module(_))).count();
    eprintln!(
        "hostcall: {items} items reachable, at {} paths",
        paths.values().map(BTreeSet::len).sum::<usize>()
    );
    let found = violations(&surface, "hostcall", &ALLOWED);
    assert!(
        found.is_empty(),
        "the rule \"every type has one public path\" is broken:\n  {}",
        found.join("\n  ")
    );
}

/// The same rule for `hostcall-core`. Its `__internal` module exists only under `--cfg loom`
/// (the text-based list shows it regardless): the loom models' access to internals, hidden and
/// not API, so it is left out of the walk.
#[test]
#[cfg_attr(not(hostcall_workspace), ignore = "tests/public_items.txt lists the workspace's sources")]
fn every_item_of_hostcall_core_has_one_public_path() {
    let list = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/public_items.txt"))
        .unwrap();
    let mut surface = Surface::parse(&list, "hostcall-core");
    if let Some(children) = surface.public_children.get_mut("crate") {
        children.remove("__internal");
    }
    // `producer::handles!` declares each protocol's `Claimed`, `Submitted` and `Completed` aliases
    // in that protocol's `producer.rs`; the list sees its `pub type` lines where the macro is
    // written (and the generic structs of the same names there).
    for protocol in ["stack", "phase", "line", "rpc"] {
        surface.modules.insert(format!("crate::{protocol}::producer"));
        let items = surface.items.entry(format!("crate::{protocol}::producer")).or_default();
        for handle in ["Claimed", "Submitted", "Completed"] {
            items.insert(handle.to_owned(), "type");
        }
    }
    for handle in ["Claimed", "Submitted", "Completed"] {
        surface.items.get_mut("crate::producer").unwrap().insert(handle.to_owned(), "struct");
    }
    let paths = surface.paths("hostcall_core");
    assert!(
        paths.contains_key(&Target::Item("crate::poller::Poller".into(), "struct")),
        "the walk reaches the crate's types"
    );
    let items = paths.keys().filter(|target| !matches!(target, Target::Module(_))).count();
    eprintln!(
        "hostcall_core: {items} items reachable, at {} paths",
        paths.values().map(BTreeSet::len).sum::<usize>()
    );
    let found = violations(&surface, "hostcall_core", &[]);
    assert!(
        found.is_empty(),
        "the rule \"every type has one public path\" is broken in hostcall_core:\n  {}",
        found.join("\n  ")
    );
}

/// The walk sees a second path however it is made: a re-export at the root of a type of a public
/// module, a re-export of a re-export, a module re-exported under a second name, a non-trait in
/// the prelude, a module named `core`.
#[test]
fn a_second_path_is_found() {
    let list = "\
c crate mod shapes
c crate mod prelude
c crate use shapes::Circle;
c crate::shapes struct Circle
c crate::shapes trait Area
c crate::shapes struct Square
c crate::prelude use crate::shapes::{Area, Square};
c crate mod again
c crate::again use super::shapes::Square as Box;
c crate use shapes as figures;
c crate use other_crate as core;
c crate::hidden struct Alone
c crate use hidden::Alone;
";
    let found = violations(&Surface::parse(list, "c"), "c", &[]);
    let expected = [
        "Item(\"crate::shapes::Area\", \"trait\") has 2 public paths: c::figures::Area, c::shapes::Area",
        "Item(\"crate::shapes::Circle\", \"struct\") has 3 public paths: c::Circle, c::figures::Circle, c::shapes::Circle",
        "`c::prelude::Square` is in the prelude, which holds traits only (Item(\"crate::shapes::Square\", \"struct\"))",
        "Item(\"crate::shapes::Square\", \"struct\") has 3 public paths: c::again::Box, c::figures::Square, c::shapes::Square",
        "Module(\"crate::shapes\") has 2 public paths: c::figures, c::shapes",
        "`c::core`: a public module named `core` shadows the built-in crate",
    ];
    let mut found_sorted = found.clone();
    found_sorted.sort();
    let mut expected_sorted: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    expected_sorted.sort();
    assert_eq!(found_sorted, expected_sorted, "found: {found:#?}");
    // `Alone` (of a private module, re-exported once) keeps the rule; `Area`, a trait, breaks it
    // by `figures` alone, not by the prelude.
    assert!(!found.iter().any(|line| line.contains("Alone") || line.contains("prelude::Area")));
}
