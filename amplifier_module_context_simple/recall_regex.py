"""A linear-time regular-expression matcher for ``context_recall``: a lazy DFA over Thompson's NFA.

Python's ``re`` backtracks: ``((a)+)+$`` takes seconds on 27 characters, and a running match cannot be
interrupted (it holds the GIL, so a thread does not help). This engine never backtracks. It decides
which lines of a text match, reading each character once: a character costs one dict lookup once the
automaton state it leaves is built, and building a state costs at most the program's size. Work comes
in bounded steps (``STEP_CHARS`` characters, ``MISS_WORK`` program visits), so a caller can stop at a
deadline and give the event loop its turn between steps.

Lines are matched one by one, case-insensitively (a character matches a pattern character when their
lowercase forms are equal; a class also accepts a character whose upper or lower form it holds).
Supported: literals, ``.``, classes (``[a-z]``, ``[^...]``, ``\\d \\w \\s`` and their negations),
groups (``(...)``, ``(?:...)``, ``(?P<name>...)``), alternation, the quantifiers ``* + ? {m} {m,}
{,n} {m,n}`` and their lazy forms (only *whether* a line matches is decided, so laziness changes
nothing), ``^ $ \\A \\Z \\b \\B`` and the flags ``(?i) (?m) (?s) (?u)`` (no-ops here). Refused with a
message: backreferences, lookaround, conditionals, atomic groups and possessive quantifiers (they are
not regular), verbose, ASCII or scoped flags.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator

from .recall_regex_parse import (
    _ASSERT,
    _BOL,
    _CHAR,
    _EOL,
    _JUMP,
    _MATCH,
    _SPLIT,
    _WORD_EDGE,
    UnsupportedPattern,
    _emit,
    _is_word,
    _Parser,
    _size,
    required_literal,
)

MAX_PROGRAM = 5_000  # instructions; counted repetitions are expanded (``a{1000}`` is 1,000)
MAX_STATES = 4_096  # automaton states kept; past it the table is rebuilt (memory stays bounded)
STEP_CHARS = 32_768  # characters read between two checkpoints
MISS_WORK = 50_000  # program instructions visited building states between two checkpoints


class _StateInfo:
    __slots__ = ("kernel", "at_start", "prev_word", "matches")

    def __init__(self, kernel: frozenset[int], at_start: bool, prev_word: bool) -> None:
        self.kernel, self.at_start, self.prev_word = kernel, at_start, prev_word
        self.matches: set[str] = set()  # characters before which a match ends


class Pattern:
    """A compiled pattern: ``matching_lines(text)`` finds the lines of ``text`` that hold a match.

    A state is a plain dict (character -> next state) for the speed of the inner loop; its program
    positions live in ``_info``. A transition that ends a match is never stored, so it surfaces as a
    KeyError and the loop stays one lookup per character.
    """

    def __init__(self, source: str) -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                re.compile(source)
        except re.error as exc:
            raise UnsupportedPattern(f"bad regular expression: {exc}") from None
        parser = _Parser(source)
        tree = parser.alternation()
        if _size(tree) + 1 > MAX_PROGRAM:
            raise UnsupportedPattern(f"the pattern expands to more than {MAX_PROGRAM:,} steps; use smaller counts")
        self._program: list[tuple] = []
        _emit(tree, self._program)
        self._program.append((_MATCH,))
        self.literal = required_literal(tree)
        self._anchored = parser.anchors_line_start
        self._word_edges = parser.uses_word_edges
        self._miss_limit = max(1, MISS_WORK // len(self._program))
        self._reset_states()

    def _reset_states(self) -> None:
        self._states: dict[tuple[frozenset[int], bool, bool], dict[str, dict]] = {}
        self._info: dict[int, _StateInfo] = {}
        self._line_start = self._state(frozenset(), self._anchored, False)

    def _state(self, kernel: frozenset[int], at_start: bool, prev_word: bool) -> dict[str, dict]:
        key = (kernel, at_start, prev_word)
        state = self._states.get(key)
        if state is None:
            if len(self._states) >= MAX_STATES:
                for old in self._states.values():
                    old.clear()  # a stale state that is still held misses and is never looked up again
                self._reset_states()
            state = self._states[key] = {}
            self._info[id(state)] = _StateInfo(kernel, at_start, prev_word)
        return state

    def _closure(self, info: _StateInfo, next_word: bool, at_end: bool) -> tuple[list[int], bool]:
        """(character instructions reachable before the next character, whether a match ends here)."""
        program, stack, seen, chars = self._program, [0, *info.kernel], set(), []
        while stack:
            pc = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            step = program[pc]
            op = step[0]
            if op == _CHAR:
                chars.append(pc)
            elif op == _SPLIT:
                stack += (step[1], step[2])
            elif op == _JUMP:
                stack.append(step[1])
            elif op == _ASSERT:
                kind = step[1]
                holds = (
                    info.at_start
                    if kind == _BOL
                    else at_end
                    if kind == _EOL
                    else (info.prev_word != next_word) == (kind == _WORD_EDGE)
                )
                if holds:
                    stack.append(pc + 1)
            else:
                return chars, True
        return chars, False

    def _transition(self, state: dict[str, dict], ch: str) -> dict[str, dict] | None:
        """The state after ``ch`` (stored in ``state``), or None when a match ends before ``ch``."""
        info = self._info[id(state)]
        if ch in info.matches:
            return None
        at_end = ch == "\n"
        word = self._word_edges and not at_end and _is_word(ch)
        chars, matched = self._closure(info, word, at_end)
        if matched:
            info.matches.add(ch)
            return None
        if at_end:
            following = self._line_start
        else:
            program = self._program
            kernel = frozenset(pc + 1 for pc in chars if program[pc][1](ch))
            following = self._state(kernel, False, word)
        state[ch] = following
        return following

    def _run(self, state: dict, text: str, start: int, stop: int) -> tuple[dict, int, int]:
        """Read ``text[start:stop]`` until a match ends, the miss budget runs out, or ``stop``:
        (state, where reading stopped, where a match ended or -1)."""
        chars = iter(text[start:stop])
        misses = 0
        while True:
            try:
                for ch in chars:
                    state = state[ch]
                return state, stop, -1
            except KeyError:
                at = stop - chars.__length_hint__() - 1
                following = self._transition(state, ch)
                if following is None:
                    return state, at, at
                state = following
                misses += 1
                if misses >= self._miss_limit:
                    return state, at + 1, -1

    def matching_lines(self, text: str) -> Iterator[tuple[int, int] | None]:
        """For each line of ``text`` holding a match, in order, ``(line start, where the match ends)``;
        ``None`` at each checkpoint (bounded work since the last one)."""
        state, at, size = self._line_start, 0, len(text)
        while at < size:
            state, at, end = self._run(state, text, at, min(size, at + STEP_CHARS))
            if end >= 0:
                yield text.rfind("\n", 0, end) + 1, end
                newline = text.find("\n", end)
                if newline < 0:
                    return
                state, at = self._line_start, newline + 1
            yield None
        if self._transition(state, "\n") is None:  # the last line, at the end of the text
            yield text.rfind("\n") + 1, size
