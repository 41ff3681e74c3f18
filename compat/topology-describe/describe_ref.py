#!/usr/bin/env python3
"""Reference implementation of Kafka Streams' TopologyDescription.toString() (4.1.x, no
named topologies), written from InternalTopologyBuilder's source to pin down the exact
ordering rules for a Rust port.

    python3 compat/topology-describe/describe_ref.py crates/kstreams-dsl/tests/fixtures/describe/papi_random.jsonl

checks every case of a RandomPapiTopologies.java JSONL file against the real Java output.

Model: a topology is the list of operations applied to InternalTopologyBuilder, in order
("ops": source / processor / sink / store; see RandomPapiTopologies.java). For the DSL, the
operation order is the order in which the DSL graph nodes were created (buildPriority),
i.e. the order of the .stream()/.filter()/.to()... calls; a repartition writes
filter, sink, source in that order.
"""
import json
import sys

# ---------------------------------------------------------------- java.util.HashMap order


def java_string_hash(s):
    """String.hashCode() over UTF-16 code units, as a 32-bit unsigned value."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h


def spread(h):
    """HashMap.hash(): h ^ (h >>> 16)."""
    return (h ^ (h >> 16)) & 0xFFFFFFFF


def grown_capacity(n):
    """Table size of a HashMap/HashSet created with the default constructor after n puts
    (resize when size exceeds 0.75 * capacity)."""
    cap = 16
    while n > cap * 3 // 4:
        cap *= 2
    return cap


def copy_capacity(n):
    """Table size of new HashSet<>(collection of n) = tableSizeFor(max((int)(n/.75f)+1, 16))."""
    want = max(int(n / 0.75) + 1, 16)
    cap = 1
    while cap < want:
        cap *= 2
    return cap


def hash_order(items, cap):
    """Iteration order of a java.util.HashMap/HashSet with table size `cap` whose keys were
    inserted in the order of `items` (no treeified bins): by bucket index, ties in insertion
    order (resizes preserve the relative order inside a bucket)."""
    return [x for _, _, x in sorted(
        (spread(java_string_hash(x)) & (cap - 1), i, x) for i, x in enumerate(items))]


def hashset_of(items):
    """new HashSet<>(items) where `items` is iterated in the given order."""
    return hash_order(items, copy_capacity(len(items)))


# ---------------------------------------------------------------- java.util.TreeMap insert

RED, BLACK = False, True


class _Entry:
    __slots__ = ("key", "left", "right", "parent", "color")

    def __init__(self, key, parent):
        self.key, self.left, self.right, self.parent, self.color = key, None, None, parent, BLACK


class JavaTreeSet:
    """java.util.TreeSet (red-black TreeMap, CLR algorithm as in OpenJDK 17) with a comparator
    that is evaluated at insertion time. Needed because Kafka's node comparator reads a
    mutable `size` field: elements keep the position they got when inserted."""

    def __init__(self, cmp):
        self.cmp, self.root = cmp, None

    def add(self, key):
        t = self.root
        if t is None:
            self.root = _Entry(key, None)
            return True
        while True:
            parent = t
            c = self.cmp(key, t.key)
            if c < 0:
                t = t.left
            elif c > 0:
                t = t.right
            else:
                return False
            if t is None:
                break
        e = _Entry(key, parent)
        if c < 0:
            parent.left = e
        else:
            parent.right = e
        self._fix_after_insertion(e)
        return True

    def __iter__(self):
        out, stack, n = [], [], self.root
        while stack or n is not None:
            while n is not None:
                stack.append(n)
                n = n.left
            n = stack.pop()
            out.append(n.key)
            n = n.right
        return iter(out)

    def __len__(self):
        return sum(1 for _ in self)

    @staticmethod
    def _color(p):
        return BLACK if p is None else p.color

    @staticmethod
    def _parent(p):
        return None if p is None else p.parent

    @staticmethod
    def _set_color(p, c):
        if p is not None:
            p.color = c

    @staticmethod
    def _left(p):
        return None if p is None else p.left

    @staticmethod
    def _right(p):
        return None if p is None else p.right

    def _rotate_left(self, p):
        if p is not None:
            r = p.right
            p.right = r.left
            if r.left is not None:
                r.left.parent = p
            r.parent = p.parent
            if p.parent is None:
                self.root = r
            elif p.parent.left is p:
                p.parent.left = r
            else:
                p.parent.right = r
            r.left = p
            p.parent = r

    def _rotate_right(self, p):
        if p is not None:
            l = p.left
            p.left = l.right
            if l.right is not None:
                l.right.parent = p
            l.parent = p.parent
            if p.parent is None:
                self.root = l
            elif p.parent.right is p:
                p.parent.right = l
            else:
                p.parent.left = l
            l.right = p
            p.parent = l

    def _fix_after_insertion(self, x):
        P, L, R, C, S = self._parent, self._left, self._right, self._color, self._set_color
        x.color = RED
        while x is not None and x is not self.root and x.parent.color == RED:
            if P(x) is L(P(P(x))):
                y = R(P(P(x)))
                if C(y) == RED:
                    S(P(x), BLACK)
                    S(y, BLACK)
                    S(P(P(x)), RED)
                    x = P(P(x))
                else:
                    if x is R(P(x)):
                        x = P(x)
                        self._rotate_left(x)
                    S(P(x), BLACK)
                    S(P(P(x)), RED)
                    self._rotate_right(P(P(x)))
            else:
                y = L(P(P(x)))
                if C(y) == RED:
                    S(P(x), BLACK)
                    S(y, BLACK)
                    S(P(P(x)), RED)
                    x = P(P(x))
                else:
                    if x is L(P(x)):
                        x = P(x)
                        self._rotate_right(x)
                    S(P(x), BLACK)
                    S(P(P(x)), RED)
                    self._rotate_left(P(P(x)))
        self.root.color = BLACK


def java_string_compare(a, b):
    """String.compareTo: lexicographic over UTF-16 code units."""
    ea, eb = a.encode("utf-16-be"), b.encode("utf-16-be")
    ua = [(ea[i] << 8) | ea[i + 1] for i in range(0, len(ea), 2)]
    ub = [(eb[i] << 8) | eb[i + 1] for i in range(0, len(eb), 2)]
    return (ua > ub) - (ua < ub)


# ---------------------------------------------------------------- the builder


class Builder:
    def __init__(self):
        self.order = []      # node names in nodeFactories (LinkedHashMap) order
        self.kind = {}       # name -> "source" | "processor" | "sink"
        self.parents = {}    # name -> predecessor names, as given
        self.topics = {}     # source name -> list of topics (or None)
        self.pattern = {}    # source name -> pattern string
        self.sink_text = {}  # sink name -> "topic: X" or "extractor class: ..."
        self.stores = {}     # processor name -> store names in connect order (deduplicated)
        self.uf = {}         # QuickUnion parent map
        self.store_users = {}  # store -> processors connected (in order)
        self.global_sources = set()  # sources of global stores

    # QuickUnion: root(), unite(id1, id2...) -> parent[root(id1)] = root(id2)
    def _root(self, x):
        cur, parent = x, self.uf[x]
        while parent != cur:
            grand = self.uf[parent]
            self.uf[cur] = grand
            cur, parent = parent, grand
        return cur

    def _unite(self, a, others):
        for b in others:
            ra, rb = self._root(a), self._root(b)
            if ra != rb:
                self.uf[ra] = rb

    def _add(self, name, kind, parents):
        self.order.append(name)
        self.kind[name] = kind
        self.parents[name] = list(parents)
        self.uf[name] = name
        self._unite(name, parents)

    def add_source(self, name, topics=None, pattern=None, global_=False):
        self._add(name, "source", [])
        self.topics[name] = topics
        self.pattern[name] = pattern
        if global_:
            self.global_sources.add(name)

    def add_processor(self, name, parents):
        self._add(name, "processor", parents)
        self.stores[name] = []

    def add_sink(self, name, parents, topic=None, extractor=None):
        self._add(name, "sink", parents)
        self.sink_text[name] = ("topic: " + topic) if topic is not None else ("extractor class: " + extractor)

    def add_state_store(self, store, processors):
        users = self.store_users.setdefault(store, [])
        for p in processors:
            if users:
                self._unite(users[0], [p])
            users.append(p)
            if store not in self.stores[p]:
                self.stores[p].append(store)

    # makeNodeGroups(): ids in order of each group's first node in nodeFactories order
    def node_groups(self):
        groups, by_root = [], {}
        for n in self.order:
            r = self._root(n)
            if r not in by_root:
                by_root[r] = []
                groups.append(by_root[r])
            by_root[r].append(n)
        return groups

    def describe(self):
        # A group holding a global source is a global store ({source, processor}); its id is
        # taken like any other. toString() walks ids 0, 1, ... while both kinds remain and
        # prints the sub-topology if its id is the expected one, else the next global store.
        subtopologies, global_stores = [], []
        for gid, members in enumerate(self.node_groups()):
            source = next((n for n in members if n in self.global_sources), None)
            if source is None:
                subtopologies.append((gid, self._describe_subtopology(gid, members)))
            else:
                global_stores.append((gid, self._describe_global_store(gid, source, members)))
        out = ["Topologies:\n "]
        expected = 0
        while subtopologies and global_stores:
            out.append("  ")
            if subtopologies[0][0] == expected:
                out.append(subtopologies.pop(0)[1])
            else:
                out.append(global_stores.pop(0)[1])
            expected += 1
        for _, text in subtopologies + global_stores:
            out.append("  ")
            out.append(text)
        return "".join(out)

    def _describe_global_store(self, gid, source, members):
        processor = next(n for n in members if n != source)
        return ("Sub-topology: %d for global store (will not generate tasks)\n"
                "    Source: %s (topics: [%s])\n      --> %s\n"
                "    Processor: %s (stores: [%s])\n      --> none\n      <-- %s\n"
                % (gid, source, self.topics[source][0], processor,
                   processor, self.stores[processor][0], source))

    def _describe_subtopology(self, gid, members):
        # nodesByName.values() iteration order (HashSet -> HashMap, same table size)
        iteration = hash_order(members, grown_capacity(len(members)))
        size = {n: 1 for n in members}

        def cmp(a, b):
            if a == b:
                return 0
            if size[a] != size[b]:
                return size[b] - size[a]
            return java_string_compare(a, b)

        preds = {n: JavaTreeSet(cmp) for n in members}
        succs = {n: JavaTreeSet(cmp) for n in members}

        def update_size(n, delta):
            size[n] += delta
            for p in preds[n]:
                update_size(p, delta)

        for node in iteration:
            for p in self.parents[node]:
                preds[node].add(p)
                succs[p].add(node)
                update_size(p, size[node])

        ordered = sorted(members, key=lambda n: (-size[n], _JavaKey(n)))

        def names(ts):
            lst = list(ts)
            return ", ".join(lst) if lst else "none"

        lines = []
        for n in ordered:
            k = self.kind[n]
            if k == "source":
                if self.topics[n] is not None:
                    t = "[" + ", ".join(hashset_of(self.topics[n])) + "]"
                else:
                    t = self.pattern[n]
                lines.append("    Source: %s (topics: %s)\n      --> %s\n" % (n, t, names(succs[n])))
            elif k == "processor":
                st = self.stores[n]
                # ProcessorNodeFactory.stateStoreNames is a HashSet (default ctor); describe() copies it
                st = hashset_of(hash_order(st, grown_capacity(len(st))))
                lines.append("    Processor: %s (stores: [%s])\n      --> %s\n      <-- %s\n"
                             % (n, ", ".join(st), names(succs[n]), names(preds[n])))
            else:
                lines.append("    Sink: %s (%s)\n      <-- %s\n" % (n, self.sink_text[n], names(preds[n])))
        return "Sub-topology: %d\n%s\n" % (gid, "".join(lines))


class _JavaKey:
    __slots__ = ("s",)

    def __init__(self, s):
        self.s = s

    def __lt__(self, other):
        return java_string_compare(self.s, other.s) < 0


def build(ops):
    b = Builder()
    for op in ops:
        kind = op["op"]
        if kind == "source":
            b.add_source(op["name"], topics=op.get("topics"), pattern=op.get("pattern"),
                         global_=op.get("global", False))
        elif kind == "processor":
            b.add_processor(op["name"], op["parents"])
        elif kind == "sink":
            b.add_sink(op["name"], op["parents"], topic=op.get("topic"), extractor=op.get("extractor"))
        elif kind == "store":
            b.add_state_store(op["store"], op["processors"])
        else:
            raise ValueError(kind)
    return b


def main(path):
    total = bad = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            case = json.loads(line)
            total += 1
            got = build(case["ops"]).describe()
            if got != case["describe"]:
                bad += 1
                if bad <= 3:
                    print("MISMATCH case %d\n--- expected\n%s--- got\n%s" % (case["case"], case["describe"], got))
    print("%d passed, %d failed" % (total - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
