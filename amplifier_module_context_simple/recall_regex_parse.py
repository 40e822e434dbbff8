"""The pattern side of ``context_recall``'s regular expressions (recall_regex.py): the parser of the
supported syntax, the Thompson program it compiles to, and the literal every match holds. Moved out of
recall_regex.py (issue 38), which keeps the automaton that runs the program."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

_CHAR, _SPLIT, _JUMP, _ASSERT, _MATCH = range(5)
_BOL, _EOL, _WORD_EDGE, _NOT_WORD_EDGE = range(4)
_OCTAL = frozenset("01234567")  # a set: "" in a string is always true
_SIMPLE_ESCAPES = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}

Matcher = Callable[[str], bool]
Node = tuple  # ("lit", ch) | ("set", matcher) | ("assert", kind) | ("cat", [nodes]) | ("alt", [nodes])
# | ("rep", node, min, max or None)


class UnsupportedPattern(ValueError):
    """A pattern this engine does not run; the message names the construct (one line)."""


def _is_word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


_CATEGORIES: dict[str, Matcher] = {"d": str.isdecimal, "w": _is_word, "s": str.isspace}


def _folded(contains: Matcher) -> Matcher:
    """A class test that also accepts a character whose lower or upper form the class holds."""

    def match(ch: str) -> bool:
        if contains(ch):
            return True
        lower, upper = ch.lower(), ch.upper()
        return (len(lower) == 1 and contains(lower)) or (len(upper) == 1 and contains(upper))

    return match


def _literal(ch: str) -> Matcher:
    lowered = ch.lower()
    return lambda c: c.lower() == lowered


def _not_newline(ch: str) -> bool:
    return ch != "\n"


class _Parser:
    """Recursive descent over a pattern ``re.compile`` already accepted (so only the subset is checked)."""

    def __init__(self, pattern: str) -> None:
        self.text, self.at = pattern, 0
        self.anchors_line_start = False
        self.uses_word_edges = False

    def peek(self, ahead: int = 0) -> str:
        index = self.at + ahead
        return self.text[index] if index < len(self.text) else ""

    def take(self) -> str:
        ch = self.peek()
        self.at += 1
        return ch

    def alternation(self) -> Node:
        branches = [self.concatenation()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.concatenation())
        return branches[0] if len(branches) == 1 else ("alt", branches)

    def concatenation(self) -> Node:
        items: list[Node] = []
        while self.peek() not in ("", "|", ")"):
            atom = self.atom()
            if atom is not None:
                items.append(self.quantified(atom))
        return ("cat", items)

    def quantified(self, atom: Node) -> Node:
        bounds = self.quantifier()
        if bounds is None:
            return atom
        if self.peek() == "+":
            raise UnsupportedPattern("possessive quantifiers (*+, ++, ?+) are not supported")
        if self.peek() == "?":
            self.at += 1  # lazy: the same lines match
        return ("rep", atom, *bounds)

    def quantifier(self) -> tuple[int, int | None] | None:
        ch = self.peek()
        if ch in ("*", "+", "?"):
            self.at += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[ch]
        match = re.match(r"\{(\d*)(,?)(\d*)\}", self.text[self.at :]) if ch == "{" else None
        if match is None or match.group() == "{}":
            return None  # not a repetition: "{" is a literal (as in re)
        self.at += match.end()
        low = int(match.group(1) or 0)
        if not match.group(2):
            return low, low
        return low, int(match.group(3)) if match.group(3) else None

    def atom(self) -> Node | None:
        ch = self.take()
        if ch == "(":
            return self.group()
        if ch == "[":
            return ("set", self.char_class())
        if ch == ".":
            return ("set", _not_newline)
        if ch == "^":
            self.anchors_line_start = True
            return ("assert", _BOL)
        if ch == "$":
            return ("assert", _EOL)
        if ch == "\\":
            return self.escape()
        return ("lit", ch)

    def group(self) -> Node | None:
        if self.peek() != "?":
            return self.closed(self.alternation())
        self.at += 1
        kind = self.take()
        if kind == ":":
            return self.closed(self.alternation())
        if kind == "P" and self.peek() == "<":
            self.at = self.text.index(">", self.at) + 1
            return self.closed(self.alternation())
        if kind == "P":
            raise UnsupportedPattern("backreferences are not supported")
        if kind == "#":
            self.at = self.text.index(")", self.at) + 1
            return None
        if kind in ("=", "!", "<"):
            raise UnsupportedPattern("lookahead and lookbehind are not supported")
        if kind == "(":
            raise UnsupportedPattern("conditional groups are not supported")
        if kind == ">":
            raise UnsupportedPattern("atomic groups are not supported")
        return self.flags(kind)

    def flags(self, first: str) -> Node | None:
        end = min(i for i in (self.text.find(")", self.at), self.text.find(":", self.at)) if i >= 0)
        letters = first + self.text[self.at : end]
        self.at = end + 1
        if not set(letters) <= set("imsu"):
            raise UnsupportedPattern(f"the flags (?{letters}) are not supported (only i, m, s and u)")
        return None if self.text[end] == ")" else self.closed(self.alternation())

    def closed(self, node: Node) -> Node:
        self.take()  # the ")" re.compile already checked
        return node

    def escape(self) -> Node:
        ch = self.take()
        if ch.lower() in _CATEGORIES:
            return ("set", self.category(ch))
        if ch in ("b", "B"):
            self.uses_word_edges = True
            return ("assert", _WORD_EDGE if ch == "b" else _NOT_WORD_EDGE)
        if ch == "A":
            self.anchors_line_start = True
            return ("assert", _BOL)
        if ch == "Z":
            return ("assert", _EOL)
        if ch in frozenset("123456789") and not (ch in _OCTAL and self.peek() in _OCTAL and self.peek(1) in _OCTAL):
            raise UnsupportedPattern("backreferences are not supported")
        return ("lit", self.escaped_char(ch))

    @staticmethod
    def category(ch: str) -> Matcher:
        test = _CATEGORIES[ch.lower()]
        return test if ch.islower() else (lambda c: not test(c))

    def escaped_char(self, ch: str) -> str:
        """The character of an escape whose letter ``ch`` was just read (outside or inside a class)."""
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch]
        if ch in _OCTAL:
            digits = ch
            while len(digits) < 3 and self.peek() in _OCTAL:
                digits += self.take()
            return chr(int(digits, 8))
        width = {"x": 2, "u": 4, "U": 8}.get(ch)
        if width is not None:
            digits = self.text[self.at : self.at + width]
            self.at += width
            return chr(int(digits, 16))
        if ch == "N":
            end = self.text.index("}", self.at)
            name, self.at = self.text[self.at + 1 : end], end + 1
            return unicodedata.lookup(name)
        return ch

    def char_class(self) -> Matcher:
        negate = self.peek() == "^"
        self.at += negate
        chars: set[str] = set()
        ranges: list[tuple[str, str]] = []
        tests: list[Matcher] = []
        first = True
        while True:
            ch = self.take()
            if ch == "]" and not first:
                break
            first = False
            if ch == "\\" and self.peek().lower() in _CATEGORIES:
                tests.append(self.category(self.take()))
                continue
            low = self.class_char(ch)
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.at += 1
                ranges.append((low, self.class_char(self.take())))
            else:
                chars.add(low)

        def contains(c: str) -> bool:
            return c in chars or any(a <= c <= b for a, b in ranges) or any(test(c) for test in tests)

        folded = _folded(contains)
        return (lambda c: not folded(c)) if negate else folded

    def class_char(self, ch: str) -> str:
        if ch != "\\":
            return ch
        ch = self.take()
        return "\b" if ch == "b" else self.escaped_char(ch)


def _size(node: Node) -> int:
    tag = node[0]
    if tag == "cat":
        return sum(map(_size, node[1]))
    if tag == "alt":
        return sum(map(_size, node[1])) + 2 * (len(node[1]) - 1)
    if tag == "rep":
        inner, low, high = _size(node[1]), node[2], node[3]
        return inner * low + (inner + 2 if high is None else (inner + 1) * (high - low))
    return 1


def _emit(node: Node, program: list[tuple]) -> None:
    """Append ``node``'s instructions; a character instruction continues at the next one."""
    tag = node[0]
    if tag == "lit":
        program.append((_CHAR, _literal(node[1])))
    elif tag == "set":
        program.append((_CHAR, node[1]))
    elif tag == "assert":
        program.append((_ASSERT, node[1]))
    elif tag == "cat":
        for item in node[1]:
            _emit(item, program)
    elif tag == "alt":
        jumps = []
        for branch in node[1][:-1]:
            split = len(program)
            program.append(())
            _emit(branch, program)
            jumps.append(len(program))
            program.append(())
            program[split] = (_SPLIT, split + 1, len(program))
        _emit(node[1][-1], program)
        for jump in jumps:
            program[jump] = (_JUMP, len(program))
    else:
        _emit_repeat(node, program)


def _emit_repeat(node: Node, program: list[tuple]) -> None:
    _, child, low, high = node
    for _ in range(low):
        _emit(child, program)
    if high is None:
        loop = len(program)
        program.append(())
        _emit(child, program)
        program.append((_JUMP, loop))
        program[loop] = (_SPLIT, loop + 1, len(program))
        return
    holes = []
    for _ in range(high - low):
        holes.append(len(program))
        program.append(())
        _emit(child, program)
    for hole in holes:
        program[hole] = (_SPLIT, hole + 1, len(program))


def required_literal(node: Node) -> str:
    """The longest lowercase ASCII string every match holds ("" when none): lines without it are skipped
    before the automaton reads them. ASCII only: ``text.lower()`` lowers an ASCII letter as this engine
    does, so the skip never loses a match."""
    tag = node[0]
    if tag == "rep":
        return required_literal(node[1]) if node[2] >= 1 else ""
    if tag != "cat":
        return node[1].lower() if tag == "lit" and node[1].isascii() else ""
    best, run = "", ""
    for item in node[1]:
        if item[0] == "lit" and item[1].isascii():
            run += item[1].lower()
            continue
        best = max(best, run, required_literal(item), key=len)
        run = ""
    return max(best, run, key=len)
