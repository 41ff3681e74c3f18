//! `cargo xtask module-cycles`: import cycles between the modules of each
//! crate. A cycle (config → local_metadata → app → config) means no part of
//! it can be read, tested or changed alone; issue 45 removes the ones the
//! runtime has, and this keeps new ones out.
//!
//! A module is a file (`src/a/b.rs` or `src/a/b/mod.rs` is `a::b`). It
//! depends on another when it names it, or an item in it, through a
//! `crate::`, `super::` or `self::` path, in a `use` or in code. A name
//! re-exported by a `pub use` counts as the module that defines it, so
//! `use super::StreamsConfig` in `kafka/app.rs` depends on `kafka/config.rs`.
//! A module naming its own descendants is not counted (it declares them and
//! re-exports them; that is the tree, not a cycle), nor are the paths in
//! its `#[cfg(test)]` inline modules (its tests). Comments are left out;
//! macros and strings that spell paths are read as code.
//!
//! Any cycle fails: there were four when the check came in (the runtime's
//! joined 21 modules through `StreamsConfig`, which carried the instance's
//! running state), and issue 45 removed them.
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{exit_code, Args};
use crate::paths;

pub(crate) fn cli(args: Args) -> Result<ExitCode> {
    args.finish()?;
    Ok(exit_code(check()?))
}

/// Whether no crate has an import cycle; prints each one found.
pub(crate) fn check() -> Result<bool> {
    let root = paths::repo_root();
    let mut found = 0;
    for source in crate_sources(&root)? {
        let name = source
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        for cycle in CrateModules::read(&source)?.cycles() {
            eprintln!("module-cycles: {name}: import cycle {cycle}");
            found += 1;
        }
    }
    if found == 0 {
        eprintln!("module-cycles: no import cycle between the modules of any crate");
    }
    Ok(found == 0)
}

/// The `src` directory of every crate of the workspace with one.
fn crate_sources(root: &Path) -> Result<Vec<PathBuf>> {
    let mut sources = Vec::new();
    for parent in ["crates", "."] {
        let dir = root.join(parent);
        for entry in fs::read_dir(&dir).with_context(|| format!("cannot read {}", dir.display()))? {
            let src = entry?.path().join("src");
            if src.join("lib.rs").is_file() || src.join("main.rs").is_file() {
                sources.push(src);
            }
        }
    }
    sources.sort();
    Ok(sources)
}

/// A module's path from the crate root (empty for the root).
type ModulePath = Vec<String>;

/// One crate's modules: each one's source, and its dependencies.
struct CrateModules {
    /// Module → its code, comments removed.
    code: BTreeMap<ModulePath, String>,
    /// Module → the names it re-exports (`pub use x::y::Name`) → the full
    /// path they stand for.
    reexports: BTreeMap<ModulePath, BTreeMap<String, Vec<String>>>,
}

impl CrateModules {
    fn read(src: &Path) -> Result<CrateModules> {
        let mut code = BTreeMap::new();
        collect_files(src, src, &mut code)?;
        let mut reexports = BTreeMap::new();
        for (module, text) in &code {
            let inline = inline_modules(text);
            let mut names = BTreeMap::new();
            for statement in use_statements(text).filter(|s| s.public) {
                let (depth, _) = depth_at(&inline, statement.at);
                if depth > 0 {
                    continue; // an inline module's, not this module's
                }
                for path in expand_use_tree(&statement.tree) {
                    let absolute = absolute(&code, module, depth, &path);
                    if let (Some(absolute), Some(last)) = (absolute, path.last()) {
                        names.insert(last.clone(), absolute);
                    }
                }
            }
            reexports.insert(module.clone(), names);
        }
        Ok(CrateModules { code, reexports })
    }

    /// The module (file) that `path`, absolute from the crate root, lands
    /// in: its longest prefix that is a module, through re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> ModulePath {
        let mut module: ModulePath = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let mut next = module.clone();
            next.push(segment.clone());
            if self.code.contains_key(&next) {
                module = next;
                continue;
            }
            // An item of `module`, or a name it re-exports from elsewhere.
            if depth < 8 {
                if let Some(target) = self.reexports.get(&module).and_then(|r| r.get(segment)) {
                    let mut full = target.clone();
                    full.extend_from_slice(&path[i + 1..]);
                    if full != path {
                        return self.resolve(&full, depth + 1);
                    }
                }
            }
            break;
        }
        module
    }

    /// Each module's dependencies on others of the crate.
    fn edges(&self) -> BTreeMap<&ModulePath, BTreeSet<ModulePath>> {
        let mut edges = BTreeMap::new();
        for (module, text) in &self.code {
            let inline = inline_modules(text);
            let mut targets = BTreeSet::new();
            let mut paths: Vec<(Vec<String>, usize)> = use_statements(text)
                .flat_map(|statement| {
                    let at = statement.at;
                    expand_use_tree(&statement.tree)
                        .into_iter()
                        .map(move |path| (path, at))
                })
                .collect();
            paths.extend(inline_paths(text));
            for (path, at) in paths {
                let (depth, test) = depth_at(&inline, at);
                if test {
                    continue;
                }
                let Some(absolute) = absolute(&self.code, module, depth, &path) else {
                    continue;
                };
                let target = self.resolve(&absolute, 0);
                // Itself, or a descendant: the module tree, not a cycle.
                if !target.starts_with(module) {
                    targets.insert(target);
                }
            }
            edges.insert(module, targets);
        }
        edges
    }

    /// Every strongly connected set of two or more modules, each written
    /// as one cycle through it (`a -> b -> a`), from its first module.
    fn cycles(&self) -> Vec<String> {
        let edges = self.edges();
        let nodes: Vec<&ModulePath> = edges.keys().copied().collect();
        let mut cycles = Vec::new();
        for component in strongly_connected(&nodes, &edges) {
            if component.len() < 2 {
                continue;
            }
            let names: Vec<String> = component.iter().map(display).collect();
            cycles.push(names.join(" <-> "));
        }
        cycles
    }
}

fn display(module: &ModulePath) -> String {
    if module.is_empty() {
        "crate".to_owned()
    } else {
        module.join("::")
    }
}

/// Tarjan's algorithm, iteratively: each component sorted.
fn strongly_connected(
    nodes: &[&ModulePath],
    edges: &BTreeMap<&ModulePath, BTreeSet<ModulePath>>,
) -> Vec<Vec<ModulePath>> {
    let index_of: BTreeMap<&ModulePath, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let successors: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            edges[n]
                .iter()
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    let n = nodes.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut components, mut next_index) = (Vec::new(), Vec::new(), 0);
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        // (node, next successor to visit)
        let mut work = vec![(start, 0)];
        index[start] = next_index;
        low[start] = next_index;
        next_index += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (node, ref mut next)) = work.last_mut() {
            if let Some(&succ) = successors[node].get(*next) {
                *next += 1;
                if index[succ] == usize::MAX {
                    index[succ] = next_index;
                    low[succ] = next_index;
                    next_index += 1;
                    stack.push(succ);
                    on_stack[succ] = true;
                    work.push((succ, 0));
                } else if on_stack[succ] {
                    low[node] = low[node].min(index[succ]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(nodes[member].clone());
                    if member == node {
                        break;
                    }
                }
                component.sort();
                components.push(component);
            }
        }
    }
    components.sort();
    components
}

/// Every `.rs` file under `dir`, by module path.
fn collect_files(src: &Path, dir: &Path, out: &mut BTreeMap<ModulePath, String>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(src, &path, out)?;
            continue;
        }
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let relative = path.strip_prefix(src).expect("under src");
        let mut module: ModulePath = relative
            .with_extension("")
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if matches!(
            module.last().map(String::as_str),
            Some("mod" | "lib" | "main")
        ) {
            module.pop();
        }
        let text =
            fs::read_to_string(&path).with_context(|| format!("cannot read {}", path.display()))?;
        out.insert(module, strip_comments(&text));
    }
    Ok(())
}

/// `text` without `//` and `/* */` comments (strings kept as they are, a
/// `//` inside one cut short: harmless for finding paths).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |end| &after[end..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
        } else {
            let c = rest.chars().next().expect("not empty");
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// A `use` statement: whether it re-exports, its tree's text, and where
/// it is in the module's code.
struct UseStatement {
    public: bool,
    tree: String,
    at: usize,
}

/// The `use` statements of a module's code.
fn use_statements(text: &str) -> impl Iterator<Item = UseStatement> + '_ {
    let mut from = 0;
    std::iter::from_fn(move || loop {
        let at = from + find_word(&text[from..], "use")?;
        let before = text[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let after = &text[at + 3..];
        let end = after.find(';')?;
        let tree = after[..end].trim().to_owned();
        from = at + 3 + end;
        if !tree.is_empty() {
            return Some(UseStatement { public, tree, at });
        }
    })
}

/// Where `word` stands alone in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        if !is_ident(before) && !is_ident(after) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

/// The paths a use tree names (`a::{b, c::d as e}` is `a::b` and `a::c::d`;
/// `self` in a group is the group's prefix; globs end at their prefix).
fn expand_use_tree(tree: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    expand_into(tree.trim(), &[], &mut out);
    out
}

fn expand_into(tree: &str, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let tree = tree.trim();
    if let Some(open) = tree.find('{') {
        let head: Vec<String> = segments(&tree[..open]);
        let mut base = prefix.to_vec();
        base.extend(head);
        // A `use` in a string may have no closing brace, or one before.
        let close = tree.rfind('}').filter(|&c| c > open).unwrap_or(tree.len());
        for part in split_top_level(&tree[open + 1..close]) {
            expand_into(part, &base, out);
        }
        return;
    }
    let tree = tree.split(" as ").next().unwrap_or(tree);
    let mut path = prefix.to_vec();
    for segment in segments(tree) {
        if segment == "self" && !path.is_empty() {
            continue;
        }
        path.push(segment);
    }
    if !path.is_empty() {
        out.push(path);
    }
}

fn segments(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty() && *s != "*")
        .map(str::to_owned)
        .collect()
}

/// `a, b::{c, d}, e` split at its top-level commas.
fn split_top_level(text: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// Paths in code that start at `crate`, `super` or `self`.
fn inline_paths(text: &str) -> Vec<(Vec<String>, usize)> {
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(found) = text[from..].find(root) {
            let at = from + found;
            from = at + root.len();
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let path_text: String = text[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            out.push((segments(&path_text), at));
        }
    }
    out
}

/// `path` (as written in `module`, inside `inline` inline modules of its
/// file) from the crate root; `None` for paths into other crates. A path
/// may also start at a child module (`use app::KafkaStreams` in `kafka`).
fn absolute(
    modules: &BTreeMap<ModulePath, String>,
    module: &ModulePath,
    inline: usize,
    path: &[String],
) -> Option<Vec<String>> {
    let mut base = module.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            // The first `super`s leave the inline modules, in the same file.
            let mut inline = inline;
            while rest.first().map(String::as_str) == Some("super") {
                if inline > 0 {
                    inline -= 1;
                } else {
                    base.pop()?;
                }
                rest = &rest[1..];
            }
        }
        Some(first) => {
            let mut child = module.clone();
            child.push(first.to_owned());
            if !modules.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

/// The inline modules (`mod name { ... }`) of a file's text.
fn inline_modules(text: &str) -> Vec<InlineModule> {
    let mut ranges = Vec::new();
    let mut from = 0;
    while let Some(found) = find_word(&text[from..], "mod") {
        let at = from + found;
        from = at + 3;
        let after = &text[at + 3..];
        let name_len = after
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .count();
        let skipped = after.len() - after.trim_start().len();
        let after_name = after[skipped + name_len..].trim_start();
        if name_len == 0 || !after_name.starts_with('{') {
            continue;
        }
        let open = text.len() - after_name.len();
        let mut depth = 0;
        for (i, c) in text[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        let attributes = text[..at].trim_end();
                        let test = attributes.ends_with("#[cfg(test)]");
                        ranges.push(InlineModule {
                            start: open,
                            end: open + i,
                            test,
                        });
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    ranges
}

/// An inline module's body in its file's text, and whether it is a
/// `#[cfg(test)]` one.
struct InlineModule {
    start: usize,
    end: usize,
    test: bool,
}

/// How many inline modules hold offset `at`, and whether one of them is
/// for tests (a module's tests are not its dependencies).
fn depth_at(modules: &[InlineModule], at: usize) -> (usize, bool) {
    let holding = modules.iter().filter(|m| m.start <= at && at <= m.end);
    holding.fold((0, false), |(depth, test), m| (depth + 1, test || m.test))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(paths: &[&str]) -> Vec<Vec<String>> {
        paths.iter().map(|p| segments(p)).collect()
    }

    #[test]
    fn use_trees_expand_to_every_path_they_name() {
        assert_eq!(
            expand_use_tree("super::{config::{self, StreamsConfig as C}, app::*, Error}"),
            strings(&[
                "super::config",
                "super::config::StreamsConfig",
                "super::app",
                "super::Error"
            ])
        );
        assert_eq!(expand_use_tree("crate::a::b"), strings(&["crate::a::b"]));
    }

    /// A crate of files in a temporary directory, read as the check reads one.
    fn crate_of(name: &str, files: &[(&str, &str)]) -> CrateModules {
        let dir = std::env::temp_dir().join(format!("module-cycles-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        for (path, text) in files {
            let path = dir.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let modules = CrateModules::read(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        modules
    }

    #[test]
    fn a_cycle_through_a_reexport_is_found_and_tests_and_comments_are_not_edges() {
        let modules = crate_of(
            "reexport",
            &[
                ("lib.rs", "mod kafka;"),
                (
                    "kafka/mod.rs",
                    "mod app; mod config; mod queries; pub use config::StreamsConfig;",
                ),
                // Through the re-export in kafka/mod.rs: config.
                ("kafka/app.rs", "use super::StreamsConfig; fn f() {}"),
                // A path in code, not in a use.
                (
                    "kafka/queries.rs",
                    "fn q() -> super::app::Handle { todo!() }",
                ),
                (
                    "kafka/config.rs",
                    "pub struct StreamsConfig { r: crate::kafka::queries::Router }\n\
                 // crate::kafka::app is only in a comment\n\
                 #[cfg(test)] mod tests { use super::StreamsConfig; }",
                ),
            ],
        );
        assert_eq!(
            modules.cycles(),
            vec!["kafka::app <-> kafka::config <-> kafka::queries".to_owned()]
        );
    }

    #[test]
    fn a_modules_tests_are_not_its_dependencies() {
        let modules = crate_of(
            "tests",
            &[
                ("lib.rs", "mod a; mod b;"),
                ("a.rs", "use crate::b::X; pub struct Y(X);"),
                (
                    "b.rs",
                    "pub struct X;\n#[cfg(test)]\nmod tests { use crate::a::Y; }",
                ),
            ],
        );
        assert!(modules.cycles().is_empty());
    }

    #[test]
    fn a_parent_naming_its_children_is_no_cycle() {
        let modules = crate_of(
            "parent",
            &[
                ("lib.rs", "mod a; pub use a::Thing; pub struct Root;"),
                ("a.rs", "pub struct Thing(crate::Root);"),
            ],
        );
        assert!(modules.cycles().is_empty());
    }
}
