//! Orders that Kafka Streams' text inherits from Java collections.
//!
//! `TopologyDescription` prints topic and store lists in `HashSet`
//! iteration order and its arrow lists in `TreeSet` order under a
//! comparator that reads node sizes while they are still growing. To print
//! the same text we reproduce both: `String.hashCode` bucket order, and a
//! red-black tree insert whose shape (and so whose in-order walk) matches
//! `java.util.TreeMap`'s.

use std::cmp::Ordering;

/// `String.hashCode()` over UTF-16 code units.
fn java_string_hash(s: &str) -> u32 {
    s.encode_utf16().fold(0u32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(u32::from(unit))
    })
}

/// `HashMap.hash()`: the high half folded into the low half.
fn spread(h: u32) -> u32 {
    h ^ (h >> 16)
}

/// Table size of a default `HashMap` after `n` inserts.
pub(crate) fn grown_capacity(n: usize) -> usize {
    let mut cap = 16;
    while n > cap * 3 / 4 {
        cap *= 2;
    }
    cap
}

/// Table size of `new HashSet<>(collection of n)`.
fn copy_capacity(n: usize) -> usize {
    let want = ((n as f32 / 0.75) as usize + 1).max(16);
    want.next_power_of_two()
}

/// Iteration order of a Java hash table of size `cap` filled in the order
/// of `items`: by bucket, ties in insertion order.
pub(crate) fn hash_order<T: AsRef<str> + Clone>(items: &[T], cap: usize) -> Vec<T> {
    let mut keyed: Vec<(u32, usize, &T)> = items
        .iter()
        .enumerate()
        .map(|(i, x)| {
            (
                spread(java_string_hash(x.as_ref())) & (cap as u32 - 1),
                i,
                x,
            )
        })
        .collect();
    keyed.sort_by_key(|&(bucket, i, _)| (bucket, i));
    keyed.into_iter().map(|(_, _, x)| x.clone()).collect()
}

/// Iteration order of `new HashSet<>(items)`.
pub(crate) fn hash_set_order<T: AsRef<str> + Clone>(items: &[T]) -> Vec<T> {
    hash_order(items, copy_capacity(items.len()))
}

/// Iteration order of `new HashSet<>(sets)` for a collection of `n`
/// members holding `sets` (sets of strings, each hashing as
/// `AbstractSet.hashCode`: the sum of its members' hashes).
pub(crate) fn hash_set_of_sets_order(sets: Vec<Vec<String>>, n: usize) -> Vec<Vec<String>> {
    let cap = copy_capacity(n) as u32;
    let mut keyed: Vec<(u32, usize, Vec<String>)> = sets
        .into_iter()
        .enumerate()
        .map(|(i, set)| {
            let hash = set
                .iter()
                .fold(0u32, |sum, s| sum.wrapping_add(java_string_hash(s)));
            (spread(hash) & (cap - 1), i, set)
        })
        .collect();
    keyed.sort_by_key(|&(bucket, i, _)| (bucket, i));
    keyed.into_iter().map(|(_, _, set)| set).collect()
}

/// `String.compareTo`: lexicographic over UTF-16 code units.
pub(crate) fn java_string_compare(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Color {
    Red,
    Black,
}

struct Entry {
    key: usize,
    left: Option<usize>,
    right: Option<usize>,
    parent: Option<usize>,
    color: Color,
}

/// `java.util.TreeSet<Integer-like node ids>` with a comparator evaluated at
/// insertion time: entries keep the place they got when inserted.
#[derive(Default)]
pub(crate) struct JavaTreeSet {
    entries: Vec<Entry>,
    root: Option<usize>,
}

impl JavaTreeSet {
    /// Inserts `key` unless the comparator finds an equal entry.
    pub(crate) fn add(&mut self, key: usize, cmp: impl Fn(usize, usize) -> Ordering) {
        let Some(mut t) = self.root else {
            self.entries.push(Entry {
                key,
                left: None,
                right: None,
                parent: None,
                color: Color::Black,
            });
            self.root = Some(self.entries.len() - 1);
            return;
        };
        let (parent, went_left) = loop {
            let order = cmp(key, self.entries[t].key);
            let next = match order {
                Ordering::Less => self.entries[t].left,
                Ordering::Greater => self.entries[t].right,
                Ordering::Equal => return,
            };
            match next {
                Some(n) => t = n,
                None => break (t, order == Ordering::Less),
            }
        };
        let e = self.entries.len();
        self.entries.push(Entry {
            key,
            left: None,
            right: None,
            parent: Some(parent),
            color: Color::Black,
        });
        if went_left {
            self.entries[parent].left = Some(e);
        } else {
            self.entries[parent].right = Some(e);
        }
        self.fix_after_insertion(e);
    }

    /// The keys in tree order.
    pub(crate) fn keys(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.entries.len());
        let mut stack = Vec::new();
        let mut node = self.root;
        while node.is_some() || !stack.is_empty() {
            while let Some(n) = node {
                stack.push(n);
                node = self.entries[n].left;
            }
            if let Some(n) = stack.pop() {
                out.push(self.entries[n].key);
                node = self.entries[n].right;
            }
        }
        out
    }

    fn parent(&self, p: Option<usize>) -> Option<usize> {
        p.and_then(|p| self.entries[p].parent)
    }
    fn left(&self, p: Option<usize>) -> Option<usize> {
        p.and_then(|p| self.entries[p].left)
    }
    fn right(&self, p: Option<usize>) -> Option<usize> {
        p.and_then(|p| self.entries[p].right)
    }
    fn color(&self, p: Option<usize>) -> Color {
        p.map_or(Color::Black, |p| self.entries[p].color)
    }
    fn set_color(&mut self, p: Option<usize>, c: Color) {
        if let Some(p) = p {
            self.entries[p].color = c;
        }
    }

    fn rotate_left(&mut self, p: Option<usize>) {
        let Some(p) = p else { return };
        let Some(r) = self.entries[p].right else {
            return;
        };
        self.entries[p].right = self.entries[r].left;
        if let Some(rl) = self.entries[r].left {
            self.entries[rl].parent = Some(p);
        }
        self.entries[r].parent = self.entries[p].parent;
        match self.entries[p].parent {
            None => self.root = Some(r),
            Some(pp) if self.entries[pp].left == Some(p) => self.entries[pp].left = Some(r),
            Some(pp) => self.entries[pp].right = Some(r),
        }
        self.entries[r].left = Some(p);
        self.entries[p].parent = Some(r);
    }

    fn rotate_right(&mut self, p: Option<usize>) {
        let Some(p) = p else { return };
        let Some(l) = self.entries[p].left else {
            return;
        };
        self.entries[p].left = self.entries[l].right;
        if let Some(lr) = self.entries[l].right {
            self.entries[lr].parent = Some(p);
        }
        self.entries[l].parent = self.entries[p].parent;
        match self.entries[p].parent {
            None => self.root = Some(l),
            Some(pp) if self.entries[pp].right == Some(p) => self.entries[pp].right = Some(l),
            Some(pp) => self.entries[pp].left = Some(l),
        }
        self.entries[l].right = Some(p);
        self.entries[p].parent = Some(l);
    }

    /// The CLR fix-up, step for step as `TreeMap.fixAfterInsertion`.
    fn fix_after_insertion(&mut self, inserted: usize) {
        self.entries[inserted].color = Color::Red;
        let mut x = Some(inserted);
        while x.is_some() && x != self.root && self.color(self.parent(x)) == Color::Red {
            let grandparent = self.parent(self.parent(x));
            if self.parent(x) == self.left(grandparent) {
                let y = self.right(grandparent);
                if self.color(y) == Color::Red {
                    self.set_color(self.parent(x), Color::Black);
                    self.set_color(y, Color::Black);
                    self.set_color(grandparent, Color::Red);
                    x = grandparent;
                } else {
                    if x == self.right(self.parent(x)) {
                        x = self.parent(x);
                        self.rotate_left(x);
                    }
                    self.set_color(self.parent(x), Color::Black);
                    let gp = self.parent(self.parent(x));
                    self.set_color(gp, Color::Red);
                    self.rotate_right(gp);
                }
            } else {
                let y = self.left(grandparent);
                if self.color(y) == Color::Red {
                    self.set_color(self.parent(x), Color::Black);
                    self.set_color(y, Color::Black);
                    self.set_color(grandparent, Color::Red);
                    x = grandparent;
                } else {
                    if x == self.left(self.parent(x)) {
                        x = self.parent(x);
                        self.rotate_right(x);
                    }
                    self.set_color(self.parent(x), Color::Black);
                    let gp = self.parent(self.parent(x));
                    self.set_color(gp, Color::Red);
                    self.rotate_left(gp);
                }
            }
        }
        let root = self.root;
        self.set_color(root, Color::Black);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_hash_matches_known_values() {
        // "hello".hashCode() == 99162322 in Java.
        assert_eq!(java_string_hash("hello") as i32, 99_162_322);
        assert_eq!(java_string_hash(""), 0);
    }

    #[test]
    fn hash_set_order_matches_java_example() {
        // Seen from Java: new HashSet<>(List.of(zeta, alpha, input-b, input-a)).
        let got = hash_set_order(&["zeta", "alpha", "input-b", "input-a"]);
        assert_eq!(got, ["zeta", "alpha", "input-a", "input-b"]);
    }

    #[test]
    fn a_set_of_sets_orders_by_the_sum_of_member_hashes() {
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // Seen from Java: new HashSet<>(List.of(Set.of("b"), Set.of("a")))
        // prints [[a], [b]].
        let got = hash_set_of_sets_order(vec![set(&["b"]), set(&["a"])], 2);
        assert_eq!(got, vec![set(&["a"]), set(&["b"])]);
        // Twenty members: a table of 32 buckets; Java prints new
        // HashSet<>(app-topic-0 .. app-topic-19) in this order.
        let many: Vec<String> = (0..20).map(|i| format!("app-topic-{i}")).collect();
        let order = [
            0, 1, 19, 17, 18, 8, 9, 6, 7, 4, 5, 2, 3, 15, 16, 13, 14, 11, 12, 10,
        ];
        let expected: Vec<String> = order.iter().map(|i| format!("app-topic-{i}")).collect();
        assert_eq!(hash_set_order(&many), expected);
    }

    #[test]
    fn tree_set_with_fixed_order_is_sorted() {
        let mut t = JavaTreeSet::default();
        for k in [5, 3, 8, 1, 4, 7, 9, 2, 6, 0] {
            t.add(k, |a, b| a.cmp(&b));
        }
        t.add(4, |a, b| a.cmp(&b));
        assert_eq!(t.keys(), (0..10).collect::<Vec<_>>());
    }
}
