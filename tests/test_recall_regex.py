"""recall_regex: the linear-time matcher behind context_recall's regular expressions (issue 30, point 8)."""

from __future__ import annotations

import random
import re
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from amplifier_module_context_simple import recall_regex
from amplifier_module_context_simple.recall_regex import MAX_STATES, STEP_CHARS, Pattern, UnsupportedPattern


def matching_line_numbers(pattern: str, text: str) -> list[int]:
    spans = [span for span in Pattern(pattern).matching_lines(text) if span is not None]
    return [text.count("\n", 0, start) for start, _end in spans]


def python_line_numbers(pattern: str, text: str) -> list[int]:
    compiled = re.compile(pattern, re.IGNORECASE)
    return [i for i, line in enumerate(text.split("\n")) if compiled.search(line)]


# ----- the same lines as Python's re, on patterns re can run quickly -----------------------------------

ATOMS = ["a", "b", "A", "-", " ", ".", r"\d", r"\w", r"\s", r"\W", "[ab]", "[^a]", "[A-b]", "[a-]", "é", "É", "1"]
QUANTIFIERS = ["*", "+", "?", "{2}", "{1,2}", "{,2}", "{2,}", "*?", "+?"]


def patterns() -> st.SearchStrategy[str]:
    atoms = st.sampled_from(ATOMS)
    return st.recursive(
        atoms,
        lambda inner: st.one_of(
            st.lists(inner, min_size=1, max_size=3).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda parts: "(" + "|".join(parts) + ")"),
            st.tuples(st.sampled_from(["^", "$", r"\b", r"\B"]), inner).map("".join),
            st.tuples(inner, st.sampled_from(QUANTIFIERS)).map(lambda pq: f"(?:{pq[0]}){pq[1]}"),
        ),
        max_leaves=6,
    )


LINES = st.lists(st.text(alphabet="ab A-1_ éÉ.x", max_size=8), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(patterns(), LINES)
def test_the_same_lines_match_as_with_python_re(pattern: str, lines: list[str]) -> None:
    if r"\B" in pattern:  # Python before 3.14 never matches \B on an empty string; an empty line is one
        lines = [line or "x" for line in lines]
    text = "\n".join(lines)
    assert matching_line_numbers(pattern, text) == python_line_numbers(pattern, text)


@pytest.mark.parametrize(
    ("pattern", "text", "lines"),
    [
        (r"\w+:", "abc def:\nxyz\nfoo: bar", [0, 2]),
        (r"port=80(0[5-6])", "x port=8005\nport=8007", [0]),
        (r"^$", "a\n\nb\n", [1, 3]),
        (r"\bfoo\b", "foo\nafoo\nfoo_bar\nx foo.", [0, 3]),
        ("[^a-c]x", "ax\nAx\ndx", [2]),
        (r"\d{3}-\d{2,}", "123-45\n12-345\n999-1", [0]),
        ("(?i)AbC", "abc", [0]),
        (r"(?P<n>ab)+c(?#a comment)", "ababc", [0]),
        (r"\x41\u0042\N{LATIN SMALL LETTER C}\101", "abca", [0]),
        ("[]a]", "]", [0]),
        (r"[\]\-]", "-", [0]),
        ("a{2}?b", "aab", [0]),
        ("é", "É", [0]),
        ("x{,2}y|{", "{", [0]),
    ],
)
def test_the_supported_syntax(pattern: str, text: str, lines: list[int]) -> None:
    assert matching_line_numbers(pattern, text) == lines == python_line_numbers(pattern, text)


# ----- the patterns, answered without backtracking --------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "lines"),
    [
        ("((a)+)+$", "a" * 26 + "!", []),  # 11.9 s in Python's re
        ("((a)+)+$", "a" * 27, [0]),
        ("(?:(?:a)+)+$", "a" * 40 + "!", []),
        (".*a.*a.*a.*c", "a" * 900 + "\n" + "a" * 899 + "c", [1]),
        ("(a+)(a+)(a+)(a+)c", "a" * 900 + "\n" + "a" * 899 + "c", [1]),
        (r"\w+:", ("a" * 1_000 + "\n") * 3_000, []),  # 20.7 s in Python's re over these 3 MB
    ],
)
def test_catastrophic_patterns_for_python_re_are_answered_exactly(pattern: str, text: str, lines: list[int]) -> None:
    assert matching_line_numbers(pattern, text) == lines


@pytest.mark.parametrize(
    ("pattern", "says"),
    [
        (r"(\w)\1", "backreferences are not supported"),
        (r"(?P<n>a)(?P=n)", "backreferences are not supported"),
        ("(?=a)", "lookahead and lookbehind are not supported"),
        ("(?<!a)b", "lookahead and lookbehind are not supported"),
        ("a*+", "possessive quantifiers"),
        ("(?>a)", "atomic groups are not supported"),
        ("(?x)a", "the flags (?x) are not supported"),
        ("(?-i:a)", "the flags (?-i) are not supported"),
        ("(unclosed", "bad regular expression"),
        ("(a{100}){100}", "use smaller counts"),
    ],
)
def test_what_is_not_regular_is_refused_in_one_line(pattern: str, says: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(UnsupportedPattern, match=re.escape(says)) as caught:
            Pattern(pattern)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        (r"port=\d+", "port="),
        (r"\w+:", ":"),
        (r"(error|fail).*PY:\d+", "py:"),
        ("(abc)+x", "abc"),
        ("a?bc", "bc"),
        (r"\d{4}", ""),
        ("é+tat", "tat"),  # only ASCII: text.lower() lowers it as the matcher does
    ],
)
def test_the_literal_every_match_holds(pattern: str, literal: str) -> None:
    assert Pattern(pattern).literal == literal


# ----- bounded steps: a caller can stop between them -------------------------------------------------


def test_reading_comes_in_bounded_steps() -> None:
    text = "a" * (5 * STEP_CHARS) + "\n" + "b" * STEP_CHARS
    marks = list(Pattern("[a-z]+[0-9]").matching_lines(text))
    assert marks.count(None) >= 6 and all(mark is None for mark in marks)


def test_state_blow_up_stays_bounded_and_still_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    # "an a 12 characters from the end" needs up to 2**13 automaton states: the table is rebuilt past
    # MAX_STATES, and building states (each visits the program) comes in steps of MISS_WORK visits
    monkeypatch.setattr(recall_regex, "MAX_STATES", 256)
    monkeypatch.setattr(recall_regex, "MISS_WORK", 200)
    rebuilds = []
    reset = Pattern._reset_states
    monkeypatch.setattr(Pattern, "_reset_states", lambda self: rebuilds.append(1) or reset(self))
    rng = random.Random(5)
    lines = ["".join(rng.choice("ab") for _ in range(60)) for _ in range(40)]
    text = "\n".join(lines)
    pattern = Pattern("a[ab]{12}$")
    marks = list(pattern.matching_lines(text))
    found = [text.count("\n", 0, mark[0]) for mark in marks if mark is not None]
    assert found == python_line_numbers("a[ab]{12}$", text)
    assert len(rebuilds) > 1 and len(pattern._states) <= 256 <= MAX_STATES
    assert marks.count(None) > 2 * len(found) + 10
