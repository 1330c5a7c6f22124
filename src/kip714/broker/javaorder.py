"""Iteration order of Java's ``HashSet<String>`` and ``ConcurrentHashMap<String, V>``, reproduced in Python.

An Apache Kafka broker computes a client's SubscriptionId over ``HashSet.toString()`` of the requested
metrics, and that set is filled by iterating a ``ConcurrentHashMap`` of subscriptions. To give the same
id as a Java broker for the same configuration history, kip714 has to put the names in the same order:

* :class:`JavaConcurrentHashMap` is the broker's ``subscriptionMap``: keep one, keyed by subscription
  name, and apply every configuration change to it in the order the broker saw them (``put`` / ``remove``);
  ``values()`` then comes out in Java's order.
* :meth:`JavaHashSet.from_collection` is each subscription's ``new HashSet<>(metricsList)``;
  the initial capacity differs between JDK 17 (``jdk=17``, the default) and JDK 19+ (``jdk=19``).
* :func:`resolve_order` is the union the broker builds for one client (``new HashSet<>()`` + ``addAll``
  of every matched subscription in map order, collapsed to ``["*"]``), returned as a list ready for
  :func:`kip714._crc.compute_subscription_id` and for the response's ``RequestedMetrics``.

What is modelled (checked against a real JDK 17 by ``tests/test_javaorder_jdk.py``):

* ``String.hashCode`` over UTF-16 code units; keys are compared as Java does (``equals`` / ``compareTo``
  on UTF-16 code units), so a surrogate pair and the astral character it encodes are the same key.
* ``HashMap``: ``hash = h ^ (h >>> 16)``, append to the bucket, resize when ``++size > 0.75 * capacity``
  with the order-preserving lo/hi split, iteration bucket 0..capacity-1.
* ``ConcurrentHashMap``: ``spread = (h ^ (h >>> 16)) & 0x7fffffff``, table 16, append to the bin tail,
  replacing a value keeps the node, resize when the count reaches ``0.75 * n``; ``transfer()`` keeps
  each bin's trailing "lastRun" in place and prepends the earlier nodes (reversing them).
* Long bins. Treeification is *not* order-neutral, so it is modelled rather than ignored. A bin that
  would grow to 9 nodes first makes a small table (below 64) grow instead (``HashMap.resize()`` once;
  ``ConcurrentHashMap.tryPresize(2n)``, which takes a 16-bin table straight to 128). In a table of 64 or
  more the bin becomes a red-black tree, and then:
  ``HashMap`` links a new node right after its tree parent and moves the tree root to the front of the
  bin (so the order depends on the tree's shape), and splits a tree on resize keeping list order
  (back to a plain list at 6 nodes or fewer, otherwise re-treeified, which moves the new root to the
  front); a ``ConcurrentHashMap`` tree bin keeps its list order but *prepends* new nodes, and turns back
  into a plain bin on removal when the tree is "too small" (a test on the tree's shape).
  Ordinary metric names and subscription names almost never reach this (it needs nine names that land
  in one bucket), but a configuration can be written to do it, so the red-black trees are reproduced
  (the CLR algorithms Java uses, down to the successor swap on deletion).

Not modelled: concurrent modification (the broker serialises configuration changes), tables beyond
2**30 entries, and ``HashSet.remove`` (the broker never removes from these sets).

Everything here is pure Python: it runs on configuration changes only and its user caches results.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator
from functools import lru_cache
from typing import Generic, TypeVar, overload

__all__ = [
    "java_string_hash",
    "JavaHashSet",
    "JavaConcurrentHashMap",
    "resolve_order",
    "to_i32",
]

V = TypeVar("V")
_D = TypeVar("_D")
_T = TypeVar("_T")  # a node's value: V in a map, None in a set

_TREEIFY_THRESHOLD = 8  # a bin that reaches 9 nodes is treeified (or the table grows)
_UNTREEIFY_THRESHOLD = 6  # a split half of 6 nodes or fewer goes back to a plain list
_MIN_TREEIFY_CAPACITY = 64
_MAX_CAPACITY = 1 << 30
_NATIVE_UTF16 = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


# ------------------------------------------------------------------------------------------ hashing


def _utf16_key(s: str) -> bytes:
    """The UTF-16 code units of ``s``, big-endian: equal iff Java's ``String.equals``, and byte order
    is ``String.compareTo`` order."""
    return s.encode("utf-16-be", "surrogatepass")


@lru_cache(maxsize=8192)
def _hash_u32(s: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value (cached: the same names come back on every
    configuration change)."""
    h = 0
    for unit in array("H", s.encode(_NATIVE_UTF16, "surrogatepass")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def to_i32(x: int) -> int:
    """The low 32 bits of ``x`` as a Java ``int`` (two's complement)."""
    x &= 0xFFFFFFFF
    return x - 0x100000000 if x & 0x80000000 else x


def java_string_hash(s: str) -> int:
    """``java.lang.String.hashCode()`` (signed int32) over the UTF-16 code units of ``s``."""
    return to_i32(_hash_u32(s))


def _table_size_for(c: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= c (at least 1, at most 2**30)."""
    n = 1
    while n < c and n < _MAX_CAPACITY:
        n <<= 1
    return n


def _f32(x: float) -> float:
    rounded: float = struct.unpack("f", struct.pack("f", x))[0]
    return rounded


def _hashset_capacity(n: int, jdk: int) -> int:
    """Initial table size of ``new HashSet<>(collection)`` for a collection of ``n`` elements."""
    if jdk >= 19:  # HashMap.newHashMap(max(n, 12)) -> calculateHashMapCapacity: ceil(n / 0.75) in double
        need = -(-max(n, 12) * 4 // 3)
    else:  # new HashMap<>(max((int) (n / .75f) + 1, 16)), the division in float
        need = max(int(_f32(_f32(float(n)) / 0.75)) + 1, 16)
    return _table_size_for(need)


# ----------------------------------------------------------------------- red-black trees (as in Java)


class _Node(Generic[_T]):
    """One map entry. ``hash`` is the spread hash as Java's signed int; ``ukey`` the UTF-16 key; ``value``
    the map's value (None in a :class:`JavaHashSet`). The tree links are used only while the node's bin is
    a tree."""

    __slots__ = ("hash", "key", "left", "parent", "red", "right", "ukey", "value")

    def __init__(self, hash_: int, key: str, ukey: bytes, value: _T) -> None:
        self.hash = hash_
        self.key = key
        self.ukey = ukey
        self.value = value
        self.left: _Node[_T] | None = None
        self.right: _Node[_T] | None = None
        self.parent: _Node[_T] | None = None
        self.red = False


def _goes_left(x: _Node[_T], p: _Node[_T]) -> bool:
    """Java's tree walk for distinct String keys: hash (signed) first, then ``compareTo``.
    (``tieBreakOrder`` is never reached: distinct Strings never compare equal.)"""
    if p.hash != x.hash:
        return p.hash > x.hash
    return x.ukey < p.ukey


def _rotate_left(root: _Node[_T] | None, p: _Node[_T] | None) -> _Node[_T] | None:
    if p is not None and p.right is not None:
        r = p.right
        p.right = r.left
        if r.left is not None:
            r.left.parent = p
        r.parent = p.parent
        if r.parent is None:
            root = r
            r.red = False
        elif r.parent.left is p:
            r.parent.left = r
        else:
            r.parent.right = r
        r.left = p
        p.parent = r
    return root


def _rotate_right(root: _Node[_T] | None, p: _Node[_T] | None) -> _Node[_T] | None:
    if p is not None and p.left is not None:
        lft = p.left
        p.left = lft.right
        if lft.right is not None:
            lft.right.parent = p
        lft.parent = p.parent
        if lft.parent is None:
            root = lft
            lft.red = False
        elif lft.parent.right is p:
            lft.parent.right = lft
        else:
            lft.parent.left = lft
        lft.right = p
        p.parent = lft
    return root


def _balance_insertion(root: _Node[_T] | None, x: _Node[_T]) -> _Node[_T]:
    x.red = True
    while True:
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        xpp = xp.parent
        if not xp.red or xpp is None:
            return root  # type: ignore[return-value]
        # xp a left child (Java's first branch) or a right one (its mirror image): one path, ``left`` says which
        left = xp is xpp.left
        uncle = xpp.right if left else xpp.left
        if uncle is not None and uncle.red:
            uncle.red = xp.red = False
            xpp.red = True
            x = xpp
            continue
        if x is (xp.right if left else xp.left):
            x = xp
            root = _rotate_left(root, x) if left else _rotate_right(root, x)
            xp = x.parent
            xpp = xp.parent if xp is not None else None
        if xp is not None:
            xp.red = False
            if xpp is not None:
                xpp.red = True
                root = _rotate_right(root, xpp) if left else _rotate_left(root, xpp)


def _is_red(n: _Node[_T] | None) -> bool:
    return n is not None and n.red


def _balance_deletion(root: _Node[_T] | None, x: _Node[_T] | None) -> _Node[_T] | None:
    while True:
        if x is None or x is root:
            return root
        xp = x.parent
        if xp is None:
            x.red = False
            return x
        if x.red:
            x.red = False
            return root
        if xp.left is x:
            sib = xp.right
            if sib is not None and sib.red:
                sib.red = False
                xp.red = True
                root = _rotate_left(root, xp)
                xp = x.parent
                sib = xp.right if xp is not None else None
            if sib is None:
                x = xp
                continue
            if not _is_red(sib.right) and not _is_red(sib.left):
                sib.red = True
                x = xp
                continue
            if not _is_red(sib.right):
                if sib.left is not None:
                    sib.left.red = False
                sib.red = True
                root = _rotate_right(root, sib)
                xp = x.parent
                sib = xp.right if xp is not None else None
            if sib is not None:
                sib.red = False if xp is None else xp.red
                if sib.right is not None:
                    sib.right.red = False
            if xp is not None:
                xp.red = False
                root = _rotate_left(root, xp)
            x = root
        else:  # mirror image
            sib = xp.left
            if sib is not None and sib.red:
                sib.red = False
                xp.red = True
                root = _rotate_right(root, xp)
                xp = x.parent
                sib = xp.left if xp is not None else None
            if sib is None:
                x = xp
                continue
            if not _is_red(sib.left) and not _is_red(sib.right):
                sib.red = True
                x = xp
                continue
            if not _is_red(sib.left):
                if sib.right is not None:
                    sib.right.red = False
                sib.red = True
                root = _rotate_left(root, sib)
                xp = x.parent
                sib = xp.left if xp is not None else None
            if sib is not None:
                sib.red = False if xp is None else xp.red
                if sib.left is not None:
                    sib.left.red = False
            if xp is not None:
                xp.red = False
                root = _rotate_right(root, xp)
            x = root


def _tree_attach(root: _Node[_T], x: _Node[_T]) -> tuple[_Node[_T], _Node[_T]]:
    """Walk down from ``root`` and hang ``x`` under a leaf. Returns (new root, x's parent)."""
    p = root
    while True:
        left = _goes_left(x, p)
        nxt = p.left if left else p.right
        if nxt is None:
            x.parent = p
            if left:
                p.left = x
            else:
                p.right = x
            return _balance_insertion(root, x), p
        p = nxt


def _tree_build(nodes: list[_Node[_T]]) -> _Node[_T]:
    """Insert ``nodes`` one by one in list order (``treeify`` / the ``TreeBin`` constructor)."""
    root: _Node[_T] | None = None
    for x in nodes:
        x.left = x.right = None
        if root is None:
            x.parent = None
            x.red = False
            root = x
        else:
            root, _ = _tree_attach(root, x)
    assert root is not None
    return root


def _tree_too_small(root: _Node[_T] | None) -> bool:
    """``removeTreeNode``'s test for turning a tree bin back into a list (before the node is removed)."""
    return root is None or root.right is None or root.left is None or root.left.left is None


def _tree_delete(root: _Node[_T], p: _Node[_T]) -> _Node[_T] | None:
    """Unlink ``p`` from the tree the way ``removeTreeNode`` does; returns the new root."""
    r: _Node[_T] | None = root
    pl, pr = p.left, p.right
    if pl is not None and pr is not None:
        s = pr
        while s.left is not None:  # successor
            s = s.left
        s.red, p.red = p.red, s.red
        sr = s.right
        pp = p.parent
        if s is pr:  # p was s's direct parent
            p.parent = s
            s.right = p
        else:
            sp = s.parent
            p.parent = sp
            if sp is not None:
                if s is sp.left:
                    sp.left = p
                else:
                    sp.right = p
            s.right = pr
            pr.parent = s
        p.left = None
        p.right = sr
        if sr is not None:
            sr.parent = p
        s.left = pl
        pl.parent = s
        s.parent = pp
        if pp is None:
            r = s
        elif p is pp.left:
            pp.left = s
        else:
            pp.right = s
        replacement = sr if sr is not None else p
    elif pl is not None:
        replacement = pl
    elif pr is not None:
        replacement = pr
    else:
        replacement = p
    if replacement is not p:
        pp = replacement.parent = p.parent
        if pp is None:
            r = replacement
        elif p is pp.left:
            pp.left = replacement
        else:
            pp.right = replacement
        p.left = p.right = p.parent = None
    r = r if p.red else _balance_deletion(r, replacement)
    if p is replacement:  # detach
        pp = p.parent
        if pp is not None:
            if p is pp.left:
                pp.left = None
            elif p is pp.right:
                pp.right = None
            p.parent = None
    return r


# --------------------------------------------------------------------------------------------- HashSet


class JavaHashSet:
    """``java.util.HashSet<String>``: the same iteration order as Java for the same sequence of adds.

    ``JavaHashSet()`` is ``new HashSet<>()``; ``JavaHashSet(capacity)`` is ``new HashSet<>(capacity)``;
    :meth:`from_collection` is ``new HashSet<>(collection)``.
    """

    __slots__ = ("_bins", "_cap", "_index", "_roots")

    def __init__(self, capacity: int = 16) -> None:
        if capacity < 0:
            raise ValueError(f"illegal initial capacity: {capacity}")
        self._cap = _table_size_for(capacity)
        self._bins: list[list[_Node[None]]] = [[] for _ in range(self._cap)]
        self._roots: dict[int, _Node[None]] = {}  # bin index -> tree root, for tree bins
        self._index: dict[bytes, _Node[None]] = {}

    @classmethod
    def from_collection(cls, items: Iterable[str], jdk: int = 17) -> JavaHashSet:
        """``new HashSet<>(items)`` on the given JDK (17 and 18 size the table differently from 19+).

        The size counts duplicates, as Java's ``Collection.size()`` of the config list does.
        """
        items = list(items)
        s = cls(_hashset_capacity(len(items), jdk))
        s.add_all(items)
        return s

    # -- Java operations

    def add(self, key: str) -> bool:
        """``HashSet.add``: False (and no change in order) when ``key`` is already present."""
        if not isinstance(key, str):
            raise TypeError(f"JavaHashSet holds str, got {type(key).__name__}")
        ukey = _utf16_key(key)
        if ukey in self._index:
            return False
        h = _hash_u32(key)
        node = _Node(to_i32(h ^ (h >> 16)), key, ukey, None)
        self._index[ukey] = node
        i = node.hash & (self._cap - 1)
        chain = self._bins[i]
        root = self._roots.get(i)
        if root is not None:  # putTreeVal: link after the tree parent, root to the front
            root, parent = _tree_attach(root, node)
            chain.insert(chain.index(parent) + 1, node)
            self._root_to_front(i, root)
        else:
            chain.append(node)
            if len(chain) > _TREEIFY_THRESHOLD:
                self._treeify_bin(i)
        if len(self._index) > self._threshold():
            self._resize()
        return True

    def add_all(self, items: Iterable[str]) -> bool:
        """``addAll``: ``add`` for each item in the iteration order of ``items``."""
        changed = False
        for item in items:
            changed = self.add(item) or changed
        return changed

    def java_to_string(self) -> str:
        """``AbstractCollection.toString()``: ``"[a, b]"``, ``"[]"`` when empty."""
        return "[" + ", ".join(self) + "]"

    # -- Python protocol

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _utf16_key(key) in self._index

    def __iter__(self) -> Iterator[str]:
        for chain in self._bins:
            for node in chain:
                yield node.key

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"JavaHashSet({list(self)!r}, capacity={self._cap})"

    @property
    def capacity(self) -> int:
        """The current table length (a power of two)."""
        return self._cap

    # -- internals

    def _threshold(self) -> int:
        return int(self._cap * 0.75)

    def _root_to_front(self, i: int, root: _Node[None]) -> None:
        chain = self._bins[i]
        if chain[0] is not root:
            chain.remove(root)
            chain.insert(0, root)
        self._roots[i] = root

    def _treeify_bin(self, i: int) -> None:
        if self._cap < _MIN_TREEIFY_CAPACITY:
            self._resize()
        else:
            self._root_to_front(i, _tree_build(self._bins[i]))

    def _resize(self) -> None:
        if self._cap >= _MAX_CAPACITY:
            return
        old, old_roots, bit = self._bins, self._roots, self._cap
        self._cap *= 2
        self._bins = [[] for _ in range(self._cap)]
        self._roots = {}
        for j, chain in enumerate(old):
            lo = [n for n in chain if not n.hash & bit]
            hi = [n for n in chain if n.hash & bit]
            self._bins[j], self._bins[j + bit] = lo, hi
            if j not in old_roots:
                continue
            # TreeNode.split: halves keep list order; small halves become lists, others (re)treeify
            for idx, half, other in ((j, lo, hi), (j + bit, hi, lo)):
                if len(half) > _UNTREEIFY_THRESHOLD:
                    if other:
                        self._root_to_front(idx, _tree_build(half))
                    else:
                        self._roots[idx] = old_roots[j]  # the whole tree moved; root is still first


# ----------------------------------------------------------------------------------- ConcurrentHashMap


class JavaConcurrentHashMap(Generic[V]):
    """``java.util.concurrent.ConcurrentHashMap<String, V>`` (default constructor), single-threaded:
    ``values()``, ``keys()`` and ``items()`` come out in Java's iteration order."""

    __slots__ = ("_bins", "_index", "_n", "_roots", "_size_ctl")

    def __init__(self) -> None:
        self._n = 16
        self._size_ctl = 12
        self._bins: list[list[_Node[V]]] = [[] for _ in range(16)]
        self._roots: dict[int, _Node[V]] = {}  # bin index -> TreeBin root (its list order is the bin)
        self._index: dict[bytes, _Node[V]] = {}

    # -- Java operations

    def put(self, key: str, value: V) -> V | None:
        """``put``: a new key goes to its bin's tail (head for a tree bin); an existing key keeps its
        place. Returns the previous value or None."""
        if not isinstance(key, str):
            raise TypeError(f"JavaConcurrentHashMap keys are str, got {type(key).__name__}")
        if value is None:
            raise TypeError("ConcurrentHashMap does not hold None values")
        ukey = _utf16_key(key)
        node = self._index.get(ukey)
        if node is not None:
            old = node.value
            node.value = value
            i = node.hash & (self._n - 1)
            # putVal counts the nodes it walked; from the 8th node on it calls treeifyBin
            if i not in self._roots and self._bins[i].index(node) + 1 >= _TREEIFY_THRESHOLD:
                self._treeify_bin(i)
            return old
        h = _hash_u32(key)
        node = _Node((h ^ (h >> 16)) & 0x7FFFFFFF, key, ukey, value)
        self._index[ukey] = node
        i = node.hash & (self._n - 1)
        chain = self._bins[i]
        root = self._roots.get(i)
        if root is not None:  # TreeBin.putTreeVal: new nodes go first
            chain.insert(0, node)
            self._roots[i], _ = _tree_attach(root, node)
        else:
            walked = len(chain)
            chain.append(node)
            if walked >= _TREEIFY_THRESHOLD:
                self._treeify_bin(i)
        while len(self._index) >= self._size_ctl and self._n < _MAX_CAPACITY:  # addCount
            self._transfer()
        return None

    def remove(self, key: str) -> V | None:
        """``remove``: returns the removed value or None. The order of the others does not change."""
        ukey = _utf16_key(key) if isinstance(key, str) else None
        node = self._index.pop(ukey, None) if ukey is not None else None
        if node is None:
            return None
        i = node.hash & (self._n - 1)
        chain = self._bins[i]
        chain.remove(node)
        root = self._roots.get(i)
        if root is not None:  # TreeBin.removeTreeNode
            if not chain or _tree_too_small(root):
                del self._roots[i]  # untreeify: a plain bin in the same order
            else:
                self._roots[i] = _tree_delete(root, node)  # type: ignore[assignment]
        return node.value

    @overload
    def get(self, key: str) -> V | None: ...

    @overload
    def get(self, key: str, default: V | _D) -> V | _D: ...

    def get(self, key: str, default: object = None) -> object:
        node = self._index.get(_utf16_key(key)) if isinstance(key, str) else None
        return default if node is None else node.value

    def keys(self) -> Iterator[str]:
        for chain in self._bins:
            for node in chain:
                yield node.key

    def values(self) -> Iterator[V]:
        for chain in self._bins:
            for node in chain:
                yield node.value

    def items(self) -> Iterator[tuple[str, V]]:
        for chain in self._bins:
            for node in chain:
                yield node.key, node.value

    # -- Python protocol

    def __getitem__(self, key: str) -> V:
        node = self._index.get(_utf16_key(key)) if isinstance(key, str) else None
        if node is None:
            raise KeyError(key)
        return node.value

    def __setitem__(self, key: str, value: V) -> None:
        self.put(key, value)

    def __delitem__(self, key: str) -> None:
        if isinstance(key, str) and _utf16_key(key) in self._index:
            self.remove(key)
        else:
            raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and _utf16_key(key) in self._index

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return f"JavaConcurrentHashMap({dict(self.items())!r}, table={self._n})"

    @property
    def table_length(self) -> int:
        return self._n

    # -- internals

    def _treeify_bin(self, i: int) -> None:
        if self._n < _MIN_TREEIFY_CAPACITY:
            self._try_presize(self._n << 1)
        elif i not in self._roots:
            self._roots[i] = _tree_build(self._bins[i])

    def _try_presize(self, size: int) -> None:
        c = _MAX_CAPACITY if size >= (_MAX_CAPACITY >> 1) else _table_size_for(size + (size >> 1) + 1)
        while not (c <= self._size_ctl or self._n >= _MAX_CAPACITY):
            self._transfer()

    def _transfer(self) -> None:
        n = self._n
        bins: list[list[_Node[V]]] = [[] for _ in range(2 * n)]
        roots: dict[int, _Node[V]] = {}
        for i, chain in enumerate(self._bins):
            if not chain:
                continue
            if i in self._roots:  # TreeBin: both halves keep list order
                lo = [x for x in chain if not x.hash & n]
                hi = [x for x in chain if x.hash & n]
                for idx, half, other in ((i, lo, hi), (i + n, hi, lo)):
                    if len(half) > _UNTREEIFY_THRESHOLD:
                        roots[idx] = _tree_build(half) if other else self._roots[i]
                bins[i], bins[i + n] = lo, hi
                continue
            # plain bin: the trailing run of same-side nodes moves as is, the rest is prepended
            last_run = len(chain) - 1
            bit = chain[last_run].hash & n
            while last_run > 0 and (chain[last_run - 1].hash & n) == bit:
                last_run -= 1
            lo = chain[last_run:] if bit == 0 else []
            hi = chain[last_run:] if bit != 0 else []
            for x in chain[:last_run]:
                (hi if x.hash & n else lo).insert(0, x)
            bins[i], bins[i + n] = lo, hi
        self._bins, self._roots, self._n = bins, roots, 2 * n
        self._size_ctl = 2 * n - (n >> 1)


# ------------------------------------------------------------------------------------------- union


def resolve_order(matched_metric_sets: Iterable[Iterable[str]]) -> list[str]:
    """The broker's requested-metrics list for one client, in Java order.

    ``matched_metric_sets`` are the metric sets of the subscriptions that match the client, in
    ``ConcurrentHashMap.values()`` order (each normally a :class:`JavaHashSet` built with
    :meth:`JavaHashSet.from_collection`, so it iterates in Java order too). They are ``addAll``-ed into a
    ``new HashSet<>()``; if any of them contains ``"*"`` the answer is ``["*"]``. No match gives ``[]``.
    """
    out = JavaHashSet()
    star = False
    for metrics in matched_metric_sets:
        if not star and "*" in metrics:
            star = True
        if not star:
            out.add_all(metrics)
    return ["*"] if star else list(out)
