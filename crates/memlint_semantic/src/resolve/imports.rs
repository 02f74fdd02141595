//! Import bindings: the per-scope map from local names to what they
//! import, and the imports of a whole file found by the pre-scan.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

/// What the pre-scan of a module finds: facts of the file alone (its
/// imports anywhere, its top-level definitions, the names of its
/// functions, the classes deriving from `nn.Module` within it). They do
/// not depend on the project index, so the first phase's pre-scan serves
/// the second walk of the same parsed module ([`ContextOptions::module_facts`]).
#[derive(Debug, Default)]
pub struct ModuleFacts {
    /// Names of functions defined anywhere in the file.
    pub(crate) functions: HashSet<String>,
    /// Top-level functions and classes: local name -> qualified.
    pub(crate) module_defs: HashMap<String, String>,
    /// Every qualified name each local name is imported as, anywhere;
    /// looked up by [`name_hash`] ([`ModuleFacts::import_targets`]).
    pub(crate) import_targets: hashbrown::HashTable<(String, Vec<String>)>,
    /// Classes deriving (within the file) from `nn.Module`.
    pub(crate) module_classes: HashSet<String>,
    /// Last segments of the models whose parameters some loop of the file
    /// freezes (`for p in self.ema.parameters(): p.requires_grad_(False)`
    /// gives `ema`).
    pub(crate) frozen_names: HashSet<String>,
    /// Top-level functions of the file that freeze some of their
    /// parameters ([`crate::facts::scan::frozen_params`]): name -> positions.
    pub(crate) freezers: HashMap<String, Vec<usize>>,
    /// Every module-level import of the file (top level and its `if`/`try`
    /// blocks), wherever it stands: a function body runs after the module
    /// was executed, so it sees an import written below it (`if __name__ ==
    /// "__main__": from apex import amp`).
    pub(crate) module_level_imports: ImportMap,
    /// The file imports torch (or tch) somewhere.
    pub(crate) torch_imported: bool,
}

impl ModuleFacts {
    /// The qualified names `name` is imported as anywhere in the file
    /// (`None`: no import binds it), by its [`name_hash`].
    pub(crate) fn import_targets(&self, hash: u64, name: &str) -> Option<&[String]> {
        self.import_targets.find(hash, |(k, _)| k == name).map(|(_, t)| t.as_slice())
    }
}

/// The hash of a name in an [`ImportMap`] and [`ModuleFacts`]' imports.
pub(crate) fn name_hash(name: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(name)
}

/// Local names to what they are bound to for import resolution: the
/// qualified name of an import, or `None` for a local that shadows one.
/// `Context::lookup_import` asks every scope for one name, so the name
/// is hashed once ([`name_hash`]) rather than once per scope.
#[derive(Debug, Default, Clone)]
pub(crate) struct ImportMap(hashbrown::HashTable<(String, Option<String>)>);

impl ImportMap {
    pub(crate) fn find(&self, hash: u64, name: &str) -> Option<&Option<String>> {
        if self.0.is_empty() {
            return None;
        }
        self.0.find(hash, |(k, _)| k == name).map(|(_, v)| v)
    }

    pub(crate) fn contains_key(&self, name: &str) -> bool {
        self.find(name_hash(name), name).is_some()
    }

    /// Binds `name` to `value`, replacing an earlier binding.
    pub(crate) fn insert(&mut self, name: String, value: Option<String>) {
        let hash = name_hash(&name);
        match self.0.entry(hash, |(k, _)| *k == name, |(k, _)| name_hash(k)) {
            hashbrown::hash_table::Entry::Occupied(mut e) => e.get_mut().1 = value,
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert((name, value));
            }
        }
    }

    /// Binds `name` to `value` unless it is bound already.
    pub(crate) fn insert_if_absent(&mut self, name: String, value: Option<String>) {
        let hash = name_hash(&name);
        if let hashbrown::hash_table::Entry::Vacant(e) = self.0.entry(hash, |(k, _)| *k == name, |(k, _)| name_hash(k)) {
            e.insert((name, value));
        }
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &Option<String>)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}
