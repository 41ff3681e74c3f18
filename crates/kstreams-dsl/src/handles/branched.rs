//! `BranchedKStream`: what `KStream::split` returns, and `Branched`, what
//! to do with each branch.

use std::collections::HashMap;
use std::sync::Arc;

use crate::handles::types::{BranchedKStream, KStream};
use crate::operators::stateless::{Branch, PassThrough};

impl<K: Clone + 'static, V: Clone + 'static> BranchedKStream<K, V> {
    /// Routes the records for which `predicate` holds (and no earlier
    /// branch's did) to a new branch.
    pub fn branch(
        mut self,
        predicate: impl Fn(&K, &V) -> bool + Send + Sync + 'static,
        branched: Branched<K, V>,
    ) -> Self {
        let index = self.next_index;
        self.next_index += 1;
        let child = self.add_branch(branched, index);
        let mut spec = self.spec.lock().unwrap_or_else(|p| p.into_inner());
        let mut branches: Vec<Branch<K, V>> =
            spec.branches.iter().map(Branch::clone_branch).collect();
        branches.push(Branch {
            predicate: Arc::new(predicate),
            child,
        });
        spec.branches = Arc::new(branches);
        drop(spec);
        self
    }

    /// Routes the records no predicate took to a last branch and returns
    /// the branches by name.
    pub fn default_branch(mut self, branched: Branched<K, V>) -> HashMap<String, KStream<K, V>> {
        // An unnamed default branch is suffixed 0, as in Kafka Streams.
        let child = self.add_branch(branched, 0);
        self.spec
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .default_child = Some(child);
        self.result
    }

    /// Drops the records no predicate took and returns the branches by name.
    pub fn no_default_branch(self) -> HashMap<String, KStream<K, V>> {
        self.result
    }

    fn add_branch(&mut self, branched: Branched<K, V>, index: usize) -> String {
        let child = match &branched.name {
            Some(name) => format!("{}{name}", self.prefix),
            None => format!("{}{index}", self.prefix),
        };
        let stream = {
            let mut state = self.split.state.borrow_mut();
            // Each branch draws an index, as in Kafka Streams.
            state.new_name("KSTREAM-BRANCH-");
            self.split
                .add_named::<K, V, _>(
                    &mut state,
                    child.clone(),
                    || PassThrough,
                    &[self.split.node.as_str()],
                )
                .like(&self.split)
        };
        let kept = match branched.chain {
            Some(chain) => chain(stream),
            None => Some(stream),
        };
        if let Some(kept) = kept {
            self.result.insert(child.clone(), kept);
        }
        child
    }
}

/// What to do with one branch of a `split`.
pub struct Branched<K, V> {
    pub(crate) name: Option<String>,
    pub(crate) chain: Option<BranchChain<K, V>>,
}

pub(crate) type BranchChain<K, V> = Box<dyn FnOnce(KStream<K, V>) -> Option<KStream<K, V>>>;

impl<K, V> Branched<K, V> {
    /// A branch with this name (appended to the split's prefix); it
    /// appears in the map `split` returns under the full name.
    pub fn named(name: impl Into<String>) -> Self {
        Self {
            name: Some(name.into()),
            chain: None,
        }
    }

    /// A branch handed to `consumer`; it is not in the returned map.
    pub fn with_consumer(consumer: impl FnOnce(KStream<K, V>) + 'static) -> Self {
        Self {
            name: None,
            chain: Some(Box::new(move |s| {
                consumer(s);
                None
            })),
        }
    }

    /// A branch transformed by `function`; the result is in the map.
    pub fn with_function(function: impl FnOnce(KStream<K, V>) -> KStream<K, V> + 'static) -> Self {
        Self {
            name: None,
            chain: Some(Box::new(move |s| Some(function(s)))),
        }
    }

    /// Names a branch built with `with_consumer` or `with_function`.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

impl<K, V> Default for Branched<K, V> {
    fn default() -> Self {
        Self {
            name: None,
            chain: None,
        }
    }
}
