//! Names across files: following imports, re-exports and star imports to
//! the function or class they name, and methods through a class's bases.

use super::*;

impl ProjectIndex {
    /// Follows import aliases (re-exports) until a defined name is found.
    pub(super) fn canonical(&self, name: &str) -> String {
        self.canonical_str(name).to_string()
    }

    /// [`ProjectIndex::canonical`] without allocating: the name itself or
    /// an alias target the index holds.
    pub(super) fn canonical_str<'a>(&'a self, name: &'a str) -> &'a str {
        if !self.last_segments.is_empty() && !self.last_segments.contains(&build::last_segment_hash(name)) {
            return name;
        }
        let found = self.follow_aliases(name);
        if self.is_defined(found) {
            return found;
        }
        // A name through a namespace package (`util.util.f` for the
        // function `f` of `util/util.py`, a directory without
        // `__init__.py`, whose module path is the script's, `util`): the
        // same name with leading segments dropped, when that is defined.
        let mut rest = name;
        while let Some((_, tail)) = rest.split_once('.') {
            if !tail.contains('.') {
                break;
            }
            rest = tail;
            let found = self.follow_aliases(rest);
            if self.is_defined(found) {
                return found;
            }
        }
        if self.stars.is_empty() || !found.rsplit_once('.').is_some_and(|(m, _)| self.stars.contains_key(m)) {
            return found;
        }

        // Each name is followed through the star imports once: a package
        // whose `__init__` star-imports hundreds of modules (transformers'
        // type-checking imports) would be searched again at every query.
        let cached = self.star_cache.read().ok().and_then(|c| c.get(found).cloned());
        let target = match cached {
            Some(t) => t,
            None => {
                let t: Option<Box<str>> = self.through_stars(found, 4).map(Into::into);
                if let Ok(mut c) = self.star_cache.write() {
                    c.insert(found.into(), t.clone());
                }
                t
            }
        };
        let Some(target) = target else { return found };
        match self.functions.get_key_value(&*target) {
            Some((k, _)) => k.as_str(),
            None => self.classes.get_key_value(&*target).map_or(found, |(k, _)| k.as_str()),
        }
    }

    /// A name of a module that star-imports others (`train.f` with `from
    /// utils import *` in `train`): the definition the first of them that
    /// defines it holds (`utils.f`), through `depth` levels of star imports.
    fn through_stars(&self, name: &str, depth: usize) -> Option<&str> {
        if depth == 0 || self.stars.is_empty() {
            return None;
        }
        let (module, last) = name.rsplit_once('.')?;
        for target in self.stars.get(module)? {
            let candidate = format!("{target}.{last}");
            let found = self.follow_aliases(&candidate);
            if let Some((key, _)) = self.functions.get_key_value(found) {
                return Some(key.as_str());
            }
            if let Some((key, _)) = self.classes.get_key_value(found) {
                return Some(key.as_str());
            }
            if let Some(deeper) = self.through_stars(found, depth - 1) {
                return Some(deeper);
            }
        }
        None
    }

    /// What a module's star imports bind `name` to when a module it
    /// star-imports (through up to four levels) imports it: `torch` for
    /// `torch` in a file whose `from utils import *` brings the `import
    /// torch` of `utils`.
    pub fn star_imported_alias(&self, module: &str, name: &str) -> Option<&str> {
        let reach = self.star_reach.get(module)?;
        let mut key = String::new();
        reach.iter().find_map(|target| {
            key.clear();
            key.push_str(target);
            key.push('.');
            key.push_str(name);
            self.aliases.get(&key).map(String::as_str)
        })
    }

    /// Whether `module` star-imports (through up to four levels) a module
    /// of the run that imports torch: `from module import *` brings its
    /// `import torch as t`.
    pub fn star_imports_torch(&self, module: &str) -> bool {
        !self.star_torch.is_empty()
            && self.star_reach.get(module).is_some_and(|reach| reach.iter().any(|t| self.star_torch.contains(t.as_str())))
    }

    /// Follows import aliases (re-exports) from `name` while no function or
    /// class of that name is defined.
    fn follow_aliases<'a>(&'a self, name: &'a str) -> &'a str {
        let mut cur = name;
        for _ in 0..8 {
            if self.is_defined(cur) {
                return cur;
            }
            match self.aliases.get(cur) {
                Some(next) if next != cur => cur = next,
                _ => break,
            }
        }
        cur
    }

    fn is_defined(&self, name: &str) -> bool {
        self.functions.contains_key(name) || self.classes.contains_key(name)
    }

    /// The qualified name of the project function `name` refers to: a
    /// function, a method through the class's project bases, or a class
    /// (its `__init__` is not followed; a class used as a context manager
    /// is answered by [`ProjectIndex::disables_grad`]).
    pub fn resolve_function(&self, name: &str) -> Option<String> {
        let c = self.canonical_str(name);
        if self.functions.contains_key(c) {
            return Some(c.to_string());
        }
        // `module.Class.method` where the method is inherited.
        let (class, method) = c.rsplit_once('.')?;
        self.method_of(self.canonical_str(class), method)
    }

    /// Finds `method` on the project bases of `class` (what `super().method`
    /// calls), not on the class itself.
    pub fn method_of_bases(&self, class: &str, method: &str) -> Option<String> {
        let cs = self.classes.get(self.canonical_str(class))?;
        cs.bases.iter().find_map(|b| self.method_of(self.canonical_str(b), method))
    }

    /// Finds `method` on `class` or its project bases.
    pub fn method_of(&self, class: &str, method: &str) -> Option<String> {
        use std::hash::BuildHasher;
        let hash = rustc_hash::FxBuildHasher.hash_one((class, method));
        let eq = |(c, m, _): &(Box<str>, Box<str>, Option<String>)| &**c == class && &**m == method;
        if let Ok(cache) = self.method_cache.read() {
            if let Some((_, _, found)) = cache.find(hash, eq) {
                return found.clone();
            }
        }
        let found = self.find_method(class, method);
        if let Ok(mut cache) = self.method_cache.write() {
            if cache.find(hash, eq).is_none() {
                cache.insert_unique(hash, (class.into(), method.into(), found.clone()), |(c, m, _)| {
                    rustc_hash::FxBuildHasher.hash_one((&**c, &**m))
                });
            }
        }
        found
    }

    /// [`ProjectIndex::method_of`], walking the bases.
    pub(super) fn find_method(&self, class: &str, method: &str) -> Option<String> {
        let mut q = String::new();
        self.class_and_bases(class).find_map(|c| {
            q.clear();
            q.push_str(c);
            q.push('.');
            q.push_str(method);
            self.functions.contains_key(q.as_str()).then(|| q.clone())
        })
    }

    /// `class`, then every name reached through the project bases (through
    /// re-exports), depth first, each once.
    pub(super) fn class_and_bases<'a>(&'a self, class: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        let mut seen: Vec<&str> = Vec::new();
        let mut stack: Vec<&str> = vec![class];
        std::iter::from_fn(move || {
            while let Some(c) = stack.pop() {
                if seen.contains(&c) {
                    continue;
                }
                seen.push(c);
                if let Some(cs) = self.classes.get(c) {
                    stack.extend(cs.bases.iter().map(|b| self.canonical_str(b)));
                }
                return Some(c);
            }
            None
        })
    }

    /// The project classes `class` derives from, directly or not (itself excluded).
    pub(super) fn ancestors<'a>(&'a self, class: &'a str) -> Vec<&'a str> {
        self.class_and_bases(class).skip(1).filter(|c| self.classes.contains_key(*c)).collect()
    }
}

/// The modules `module`'s star imports reach through up to `depth`
/// levels, each once, in the order a depth-first search of
/// `from m import *` edges first meets them. A module met again is
/// expanded again only when it is met with more levels left than a
/// finished expansion of it had: a package `__init__` that star-imports
/// hundreds of modules which star-import the same helpers is not searched
/// once per path, and the first module of that order that binds a name is
/// the one the search by paths finds first.
pub(super) fn star_order(stars: &HashMap<String, Vec<String>>, module: &str, depth: usize) -> Box<[String]> {
    fn rec<'a>(
        stars: &'a HashMap<String, Vec<String>>,
        module: &str,
        depth: usize,
        out: &mut Vec<String>,
        seen: &mut HashSet<&'a str>,
        done: &mut HashMap<&'a str, usize>,
    ) {
        let Some(targets) = stars.get(module) else { return };
        for t in targets {
            if seen.insert(t.as_str()) {
                out.push(t.clone());
            }
            if depth > 1 && done.get(t.as_str()).is_none_or(|&d| d < depth - 1) {
                rec(stars, t, depth - 1, out, seen, done);
                let d = done.entry(t.as_str()).or_insert(0);
                *d = (*d).max(depth - 1);
            }
        }
    }
    let mut out = Vec::new();
    rec(stars, module, depth, &mut out, &mut HashSet::default(), &mut HashMap::default());
    out.into_boxed_slice()
}
