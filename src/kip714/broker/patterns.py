"""Bounded-time matching of subscription ``match`` patterns (the one deliberate difference from
``java.util.regex``).

Regular-expression complexity (the one deliberate difference from ``java.util.regex``). Client attributes
are chosen by clients (a client id may be 32767 bytes), and a backtracking matcher such as Python's ``re``
(or Java's) can take exponential time on patterns like ``(a+)+$`` or polynomial time on ``.*a.*a.*b``;
``re`` has no timeout, so one such match would stall the broker. Apache Kafka moved to RE2/J for this
reason. kip714 does the same thing in pure Python: ``match`` patterns are parsed with ``re``'s own parser
and compiled to a Thompson NFA (:class:`SafePattern`), which is run as a lazily built, size-capped DFA.
Matching takes time linear in the attribute length whatever the pattern (each character is one cached
transition; a cache miss costs at most the size of the compiled program). Single-character tests
(literals, classes, ``.``, ``\\d``/``\\w``/``\\s``) and anchors (``^ $ \\A \\Z \\b \\B``) are evaluated
by ``re`` itself with the pattern's flags, so every pattern that is accepted matches exactly what
``re.fullmatch`` would match. Like RE2, the defence refuses at config time (INVALID_CONFIG, "Illegal client
matching pattern") what no linear-time matcher can run: backreferences, lookahead/lookbehind, conditional
groups, atomic groups and possessive quantifiers; and programs over :data:`MAX_PATTERN_PROGRAM`
instructions (counted repetitions are expanded, so ``.{0,100000}`` is refused).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from typing import Any

from ..errors import UnsafePatternError

__all__ = ["MAX_PATTERN_PROGRAM", "SafePattern", "UnsafePatternError"]


# the parser re.compile uses (Python 3.11+ names: importing sre_parse there warns; then 3.10's)
if sys.version_info >= (3, 11):
    # typeshed has no stubs for these private modules: they are sre_constants/sre_parse under new names
    from re import _constants as _sre_c  # type: ignore[attr-defined]
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover - Python 3.10
    import sre_constants as _sre_c
    import sre_parse as _sre_parse

#: The largest compiled match program (NFA instructions, counted repetitions expanded) accepted.
MAX_PATTERN_PROGRAM = 2000
_MAX_TRANSITIONS = 8192  # cached DFA transitions per pattern (the cache is dropped when full)
_MAX_SIGNATURES = 4096  # cached character classifications per pattern

_CHAR, _SPLIT, _ASSERT, _MATCH = 0, 1, 2, 3
_FLAG_MASK = re.IGNORECASE | re.ASCII | re.DOTALL | re.MULTILINE
_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}
_ANCHORS = {
    "AT_BEGINNING": "^",
    "AT_BEGINNING_STRING": r"\A",
    "AT_END": "$",
    "AT_END_STRING": r"\Z",
    "AT_BOUNDARY": r"\b",
    "AT_NON_BOUNDARY": r"\B",
}
_UNSUPPORTED = {
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditional groups",
    "ASSERT": "lookaround",
    "ASSERT_NOT": "lookaround",
    "ATOMIC_GROUP": "atomic groups",
    "POSSESSIVE_REPEAT": "possessive quantifiers",
}


# An instruction is ``[kind, a, b]``: _CHAR (predicate index, next pc), _SPLIT (pc, pc; a loop's first is
# patched in after its body is compiled), _ASSERT (assert index, next pc), _MATCH (None, None). Which of
# int/None each slot holds depends on ``kind``, which mypy cannot follow: hence ``Any``.
_Op = list[Any]
#: The DFA's inputs: which anchors hold at a position (one bool per compiled assert).
_Ctx = tuple[bool, ...]


def _esc(c: int) -> str:
    return f"\\U{c:08x}"


class SafePattern:
    """A regular expression with ``re.fullmatch`` semantics, matched in time linear in the input.

    ``SafePattern(pattern, flags=0)`` parses ``pattern`` with ``re``'s parser and compiles it to a Thompson
    NFA. ``fullmatch(text)`` simulates the NFA as a lazily built DFA whose states are sets of NFA
    positions: per character one dictionary lookup once the transition is cached, at most one pass over
    the program when it is not. Character tests and anchors are compiled one by one with ``re`` (same
    flags), so the result is the one ``re.fullmatch`` gives. Raises :class:`UnsafePatternError` for
    constructs with no linear-time algorithm (backreferences, lookaround, conditionals, atomic groups,
    possessive quantifiers) and for programs over :data:`MAX_PATTERN_PROGRAM` instructions, and
    ``re.error`` for bad syntax."""

    __slots__ = (
        "_assert_ids",
        "_asserts",
        "_match",
        "_ops",
        "_pred_ids",
        "_preds",
        "_sig",
        "_start",
        "_starts",
        "_trans",
        "flags",
        "pattern",
    )

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        parsed = _sre_parse.parse(pattern, flags)
        self.flags = parsed.state.flags
        self._ops: list[_Op] = []
        self._preds: list[re.Pattern[str]] = []
        self._pred_ids: dict[tuple[str, int], int] = {}
        self._asserts: list[re.Pattern[str]] = []
        self._assert_ids: dict[tuple[str, int], int] = {}
        self._match = self._add(_MATCH, None, None)
        self._start = self._seq(parsed.data, self.flags, self._match)
        self._sig: dict[str, frozenset[int]] = {}
        self._trans: dict[tuple[tuple[int, ...], frozenset[int], _Ctx], tuple[int, ...]] = {}
        self._starts: dict[_Ctx, tuple[int, ...]] = {}

    def __repr__(self) -> str:
        return f"SafePattern({self.pattern!r}, program={len(self._ops)})"

    @property
    def program_size(self) -> int:
        return len(self._ops)

    # --------------------------------------------------------------------------- compilation

    def _add(self, kind: int, a: int | None, b: int | None) -> int:
        if len(self._ops) >= MAX_PATTERN_PROGRAM:
            raise UnsafePatternError(f"pattern too complex (over {MAX_PATTERN_PROGRAM} program instructions)")
        self._ops.append([kind, a, b])
        return len(self._ops) - 1

    def _pred(self, text: str, flags: int) -> int:
        key = (text, flags & _FLAG_MASK)
        idx = self._pred_ids.get(key)
        if idx is None:
            idx = self._pred_ids[key] = len(self._preds)
            self._preds.append(re.compile(text, key[1]))
        return idx

    # ``items`` and ``av`` are re's parse tree: an operand's shape depends on its opcode (typeshed types it
    # as a union mypy cannot narrow by opcode), hence ``Any``.
    def _seq(self, items: Iterable[tuple[Any, Any]], flags: int, nxt: int) -> int:
        for op, av in reversed(list(items)):
            nxt = self._node(str(op), av, flags, nxt)
        return nxt

    def _node(self, op: str, av: Any, flags: int, nxt: int) -> int:
        if op == "LITERAL":
            return self._add(_CHAR, self._pred(_esc(av), flags), nxt)
        if op == "NOT_LITERAL":
            return self._add(_CHAR, self._pred("[^" + _esc(av) + "]", flags), nxt)
        if op == "ANY":
            return self._add(_CHAR, self._pred(".", flags), nxt)
        if op == "IN":
            parts: list[str] = []
            for iop, iav in av:
                iop = str(iop)
                if iop == "NEGATE":
                    parts.insert(0, "^")
                elif iop == "LITERAL":
                    parts.append(_esc(iav))
                elif iop == "RANGE":
                    parts.append(_esc(iav[0]) + "-" + _esc(iav[1]))
                elif iop == "CATEGORY" and str(iav) in _CATEGORIES:
                    parts.append(_CATEGORIES[str(iav)])
                else:
                    raise UnsafePatternError(f"unsupported character class item {iop}")
            return self._add(_CHAR, self._pred("[" + "".join(parts) + "]", flags), nxt)
        if op == "CATEGORY" and str(av) in _CATEGORIES:
            return self._add(_CHAR, self._pred(_CATEGORIES[str(av)], flags), nxt)
        if op == "BRANCH":
            starts = [self._seq(alt, flags, nxt) for alt in av[1]]
            start = starts[-1]
            for s in reversed(starts[:-1]):
                start = self._add(_SPLIT, s, start)
            return start
        if op == "SUBPATTERN":
            _group, add, remove, sub = av
            return self._seq(sub, (flags | add) & ~remove, nxt)
        if op in ("MAX_REPEAT", "MIN_REPEAT"):  # laziness does not change what fullmatch accepts
            lo, hi, sub = av
            if hi == _sre_c.MAXREPEAT:
                loop = self._add(_SPLIT, None, nxt)
                self._ops[loop][1] = self._seq(sub, flags, loop)
                tail = loop
            else:
                if hi - lo > MAX_PATTERN_PROGRAM:
                    raise UnsafePatternError(f"repetition {{{lo},{hi}}} is too large")
                tail = nxt
                for _ in range(hi - lo):
                    tail = self._add(_SPLIT, self._seq(sub, flags, tail), nxt)
            if lo > MAX_PATTERN_PROGRAM:
                raise UnsafePatternError(f"repetition {{{lo},}} is too large")
            for _ in range(lo):
                tail = self._seq(sub, flags, tail)
            return tail
        if op == "AT" and str(av) in _ANCHORS:
            key = (_ANCHORS[str(av)], flags & _FLAG_MASK)
            idx = self._assert_ids.get(key)
            if idx is None:
                idx = self._assert_ids[key] = len(self._asserts)
                self._asserts.append(re.compile(key[0], key[1]))
            return self._add(_ASSERT, idx, nxt)
        raise UnsafePatternError(f"{_UNSUPPORTED.get(op, op)} cannot be matched in bounded time")

    # ------------------------------------------------------------------------------- matching

    def _closure(self, pcs: Iterable[int], ctx: _Ctx) -> tuple[int, ...]:
        ops = self._ops
        out = set()
        seen = set()
        stack = list(pcs)
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            kind, a, b = ops[pc]
            if kind == _SPLIT:
                stack.append(b)
                stack.append(a)
            elif kind == _ASSERT:
                if ctx[a]:
                    stack.append(b)
            else:
                out.add(pc)
        return tuple(sorted(out))

    def _signature(self, ch: str) -> frozenset[int]:
        sig = frozenset(i for i, p in enumerate(self._preds) if p.fullmatch(ch) is not None)
        if len(self._sig) >= _MAX_SIGNATURES:
            self._sig.clear()
        self._sig[ch] = sig
        return sig

    def fullmatch(self, text: str) -> bool | None:
        """True when the whole of ``text`` matches (as ``re.fullmatch``), else None."""
        asserts = self._asserts
        ctx: _Ctx = tuple(a.match(text, 0) is not None for a in asserts) if asserts else ()
        cur = self._starts.get(ctx)
        if cur is None:
            cur = self._starts[ctx] = self._closure((self._start,), ctx)
        sigs, trans, ops = self._sig, self._trans, self._ops
        for i, ch in enumerate(text, 1):  # i: the position after ch, where the lookaround asserts look
            if not cur:
                return None
            sig = sigs.get(ch)
            if sig is None:
                sig = self._signature(ch)
            if asserts:
                ctx = tuple(a.match(text, i) is not None for a in asserts)
            key = (cur, sig, ctx)
            nxt = trans.get(key)
            if nxt is None:
                step = [ops[pc][2] for pc in cur if ops[pc][0] == _CHAR and ops[pc][1] in sig]
                nxt = self._closure(step, ctx)
                if len(trans) >= _MAX_TRANSITIONS:
                    trans.clear()
                trans[key] = nxt
            cur = nxt
        return True if self._match in cur else None
