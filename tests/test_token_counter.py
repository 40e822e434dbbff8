"""Tests of the pluggable per-message token counters."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import token_counter as tc
from amplifier_module_context_simple.token_counter import (
    COUNTER_CONTENT,
    COUNTER_ESTIMATE,
    DEFAULT_IMAGE_TOKENS,
    MESSAGE_OVERHEAD_TOKENS,
    TOOL_CALL_OVERHEAD_TOKENS,
    Counter,
    content_count,
    estimate_count,
    resolve_counter,
    tiktoken_counter,
)

DATA = Path(__file__).resolve().parent / "data"
TIKTOKEN_CACHE = Path(__file__).resolve().parent.parent / "evaluation" / "tiktoken_cache"
O200K = "o200k_base"


@pytest.fixture(autouse=True)
def _offline_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test loads o200k from the repository's copy, never from the network or /work/shared."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE))


@pytest.fixture
def o200k() -> Counter:
    return tiktoken_counter(O200K)


def user(text: Any) -> dict[str, Any]:
    return {"role": "user", "content": text}


def png_message(base64_len: int) -> dict[str, Any]:
    url = "data:image/png;base64," + "iVBORw0KGgo" * (base64_len // 11)
    return user([{"type": "text", "text": "Describe the picture."}, {"type": "image_url", "image_url": {"url": url}}])


TOOL_CALL_MESSAGE = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
        }
    ],
}
TOOL_RESULT_MESSAGE = {"role": "tool", "tool_call_id": "call_1", "content": "ok"}


# --- estimate -------------------------------------------------------------------------------------


def test_estimate_is_quarter_of_repr_length() -> None:
    message = {"role": "user", "content": "hello"}
    assert str(message) == "{'role': 'user', 'content': 'hello'}"
    assert estimate_count(message) == 36 // 4 == 9
    for message in (TOOL_CALL_MESSAGE, TOOL_RESULT_MESSAGE, user(None), user(7)):
        assert estimate_count(message) == len(str(message)) // 4


def test_no_counter_grows_with_an_images_base64(o200k: Counter) -> None:
    small, large = png_message(1_000), png_message(400_000)
    assert len(str(large)) // 4 - len(str(small)) // 4 > 90_000  # what the original estimator claimed
    assert estimate_count(small) == estimate_count(large) < 1_700
    assert content_count(small) == content_count(large)
    assert o200k(small) == o200k(large)


def test_no_counter_counts_a_call_stored_twice_twice(o200k: Counter) -> None:
    """Amplifier's orchestrators store each call in ``tool_calls`` and again as a content block with the
    same id; a provider is sent it once, so every counter counts it once (the estimator counted both)."""
    command = "python -m pytest tests/test_job.py -q -x " * 40
    once = {
        "role": "assistant",
        "content": [{"type": "text", "text": "Running the tests."}],
        "tool_calls": [{"id": "c1", "tool": "bash", "arguments": {"command": command}}],
    }
    block = {"type": "tool_call", "id": "c1", "name": "bash", "input": {"command": command}}
    twice = {**once, "content": [*once["content"], block]}
    other = {**once, "content": [*once["content"], {**block, "id": "c2"}]}  # another call: counted
    for count in (estimate_count, content_count, o200k):
        assert count(twice) == count(once) < count(other), count
    assert len(str(twice)) // 4 > estimate_count(once) + 100  # what the original estimator claimed


# --- known counts ---------------------------------------------------------------------------------


def test_plain_text(o200k: Counter) -> None:
    message = user("the cat sat on the mat")  # six one-token words, plus "user"
    assert o200k(message) == MESSAGE_OVERHEAD_TOKENS + 1 + 6 == 10
    assert content_count(message) == 10


def test_assistant_with_tool_calls(o200k: Counter) -> None:
    # o200k: "assistant" 1, "read_file" 2, '{"path": "a.py"}' 7
    assert o200k(TOOL_CALL_MESSAGE) == MESSAGE_OVERHEAD_TOKENS + TOOL_CALL_OVERHEAD_TOKENS + 1 + 2 + 7 == 16
    assert content_count(TOOL_CALL_MESSAGE) == 17


def test_flat_tool_call_shape_counts_like_openai_shape(o200k: Counter) -> None:
    flat = {
        **TOOL_CALL_MESSAGE,
        "tool_calls": [{"id": "call_1", "name": "read_file", "input": {"path": "a.py"}}],
    }
    assert o200k(flat) == o200k(TOOL_CALL_MESSAGE)
    assert content_count(flat) == content_count(TOOL_CALL_MESSAGE)


def test_tool_result(o200k: Counter) -> None:
    assert o200k(TOOL_RESULT_MESSAGE) == MESSAGE_OVERHEAD_TOKENS + 1 + 1 == 5
    assert content_count(TOOL_RESULT_MESSAGE) == 5


def test_base64_image_costs_a_fixed_amount(o200k: Counter) -> None:
    # "user" 1 + "Describe the picture." 4 + the image
    assert o200k(png_message(50_000)) == MESSAGE_OVERHEAD_TOKENS + 1 + 4 + DEFAULT_IMAGE_TOKENS == 1608
    assert content_count(png_message(50_000)) == 1609


def test_image_by_url_and_anthropic_shape_cost_the_same(o200k: Counter) -> None:
    by_url = user(
        [
            {"type": "text", "text": "Describe the picture."},
            {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}},
        ]
    )
    anthropic = user(
        [
            {"type": "text", "text": "Describe the picture."},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "A" * 9000}},
        ]
    )
    for counter in (o200k, content_count):
        assert counter(by_url) == counter(anthropic) == counter(png_message(20_000))


def test_none_content(o200k: Counter) -> None:
    message = {"role": "assistant", "content": None}
    assert o200k(message) == MESSAGE_OVERHEAD_TOKENS + 1 == 4
    assert content_count(message) == 5  # "assistant" is 9 letters: estimated a little over one token


def test_non_str_content_counts_its_json_text(o200k: Counter) -> None:
    assert o200k(user(42)) == o200k(user("42")) == MESSAGE_OVERHEAD_TOKENS + 1 + 1
    as_dict = user({"k": 1})
    assert o200k(as_dict) == MESSAGE_OVERHEAD_TOKENS + 1 + 6  # '{"k": 1}'
    assert content_count(as_dict) >= MESSAGE_OVERHEAD_TOKENS + 1


def test_metadata_and_ids_are_not_billed(o200k: Counter) -> None:
    tagged = {
        **TOOL_RESULT_MESSAGE,
        "tool_call_id": "call_" + "x" * 200,
        "metadata": {"_seq": 7, "k": "v" * 500},
    }
    assert o200k(tagged) == o200k(TOOL_RESULT_MESSAGE)
    assert content_count(tagged) == content_count(TOOL_RESULT_MESSAGE)
    assert estimate_count(tagged) > estimate_count(TOOL_RESULT_MESSAGE)


def test_other_block_kinds(o200k: Counter) -> None:
    thinking = {
        "role": "assistant",
        "content": [{"type": "thinking", "thinking": "thinking about it", "signature": "s" * 300}],
    }
    assert o200k(thinking) == MESSAGE_OVERHEAD_TOKENS + 1 + 3
    nested = user([{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "hello world"}]}])
    assert o200k(nested) == MESSAGE_OVERHEAD_TOKENS + 1 + 2
    amplifier_result = user([{"type": "tool_result", "tool_call_id": "t1", "output": "hello world"}])
    assert o200k(amplifier_result) == o200k(nested)
    unknown = user([{"type": "custom", "value": 1}])
    assert o200k(unknown) == MESSAGE_OVERHEAD_TOKENS + 1 + len(
        tc._load_encoding(O200K).encode(json.dumps(unknown["content"][0]))
    )


@pytest.mark.parametrize(
    "text",
    [
        "我们今天去公园散步，然后吃晚饭。",
        "Привет, как дела? Это тест русского текста.",
        "def parse(self, text: str) -> list[Token]:\n    return [t for t in self._lex(text) if t]\n",
        "ERROR: COUNCILMAN VOTED AYE ON MOTION 12-B",
    ],
)
def test_content_tracks_o200k_on_varied_text(o200k: Counter, text: str) -> None:
    assert 0.7 <= content_count(user(text)) / o200k(user(text)) <= 1.4


def test_content_tracks_o200k_on_a_real_session(o200k: Counter) -> None:
    path = DATA / "workloads" / "taubench__airline__task003__trial0.jsonl"
    messages = [json.loads(line) for line in path.read_text().splitlines()]
    ratio = sum(map(content_count, messages)) / sum(map(o200k, messages))
    assert 0.9 <= ratio <= 1.15


def test_counts_are_never_negative(o200k: Counter) -> None:
    for message in ({}, {"role": None}, user([]), user(["bare string", 3, None]), {"tool_calls": "junk"}):
        for counter in (estimate_count, content_count, o200k):
            assert counter(message) >= 0


# --- tiktoken loading -----------------------------------------------------------------------------


def test_tiktoken_encoding_is_cached() -> None:
    first, second = tiktoken_counter(O200K), tiktoken_counter(O200K)
    assert first.name == second.name == "tiktoken:o200k_base"
    assert tc._load_encoding(O200K) is tc._load_encoding(O200K)


def test_unknown_encoding_gives_clear_error() -> None:
    with pytest.raises(ValueError) as info:
        tiktoken_counter("no_such_encoding")
    message = str(info.value)
    assert "no_such_encoding" in message and "pip install tiktoken" in message and "TIKTOKEN_CACHE_DIR" in message


def test_missing_tiktoken_gives_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` raise ImportError
    with pytest.raises(ValueError, match="tiktoken is not installed") as info:
        tiktoken_counter("cl100k_base")
    assert "'cl100k_base'" in str(info.value) and "TIKTOKEN_CACHE_DIR" in str(info.value)


# --- resolve_counter ------------------------------------------------------------------------------


def test_resolve_builtin_forms() -> None:
    assert resolve_counter(None).name == resolve_counter(COUNTER_ESTIMATE).name == "estimate"
    assert resolve_counter(None)(TOOL_RESULT_MESSAGE) == estimate_count(TOOL_RESULT_MESSAGE)
    content = resolve_counter(COUNTER_CONTENT)
    assert content.name == "content" and content(TOOL_RESULT_MESSAGE) == content_count(TOOL_RESULT_MESSAGE)
    exact = resolve_counter("tiktoken:o200k_base")
    assert exact.name == "tiktoken:o200k_base" and exact(TOOL_RESULT_MESSAGE) == 5
    assert resolve_counter(content) is content


def test_resolve_tiktoken_with_bad_name_raises() -> None:
    with pytest.raises(ValueError, match="nope_base"):
        resolve_counter("tiktoken:nope_base")


def my_counter(message: dict[str, Any]) -> int:
    return 11


def test_resolve_callable_is_wrapped_with_its_qualname() -> None:
    counter = resolve_counter(my_counter)
    assert counter.name == "callable:my_counter" and counter(TOOL_RESULT_MESSAGE) == 11
    assert resolve_counter(lambda m: 0)(TOOL_RESULT_MESSAGE) == 0
    assert resolve_counter(lambda m: 0).name.startswith("callable:") and "<lambda>" in resolve_counter(lambda m: 0).name


@pytest.mark.parametrize("bad", [-1, 1.5, True, False, "3", None, [1]])
def test_callable_returning_bad_value_raises_type_error(bad: Any) -> None:
    counter = resolve_counter(lambda message: bad)
    with pytest.raises(TypeError) as info:
        counter(TOOL_RESULT_MESSAGE)
    assert repr(bad) in str(info.value) and counter.name in str(info.value)


@pytest.mark.parametrize(
    "spec", ["", "Estimate", "tiktoken:", "tiktoken:  ", "tiktoken", "len/4", 42, b"content", ["content"]]
)
def test_resolve_refuses_other_values(spec: Any) -> None:
    with pytest.raises(ValueError) as info:
        resolve_counter(spec)
    message = str(info.value)
    assert repr(spec) in message
    assert all(form in message for form in ("'estimate'", "'content'", "tiktoken:", "callable"))
