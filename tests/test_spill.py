"""Spill to disk: content-addressed, idempotent, atomic, 0600/0700, symlinks refused, failures harmless.

Tests run as root, where chmod does not stop a write: failures are provoked with a path under a
regular file (ENOTDIR) or with a monkeypatched ``os.open``/``os.fdopen`` (EACCES, ENOSPC).
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import os
import re
import stat
import threading
from pathlib import Path
from typing import Any

import pytest

from amplifier_module_context_simple import SimpleContextManager
from amplifier_module_context_simple.tool_results import write_spill
from tests.conftest import FullDisk

TS = "2025-01-01T00:00:00.000+00:00"
LOGGER = "amplifier_module_context_simple"
BUDGET = 10_000  # with target_usage 0.8: the ladder truncates the oldest results and keeps them in the view
NAME_RE = re.compile(r"^tool-result-\d{6}-[0-9a-f]{16}\.txt$")


def output(i: int) -> str:
    return f"result {i}\n" + "x" * 3000 + f"\nend of result {i}"


def sha16(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def history(n: int = 12, name: str = "bash") -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go", "metadata": {"timestamp": TS}}]
    for i in range(n):
        spec = {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [spec], "metadata": {"timestamp": TS}})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": output(i), "metadata": {"timestamp": TS}})
    return messages


async def manager(spill_dir: Any, **config: Any) -> SimpleContextManager:
    cm = SimpleContextManager(tool_result_spill_dir=str(spill_dir), target_usage=0.8, **config)
    for message in history():
        await cm.add_message(message)
    return cm


async def view(cm: SimpleContextManager) -> list[dict[str, Any]]:
    return await cm.get_messages_for_request(token_budget=BUDGET)


def truncated(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found = [m for m in messages if m.get("_truncated")]
    assert found, "the budget must force truncation"
    return found


def pointer(spill_dir: Any, seq: int, content: str) -> str:
    """The replacement text, written out from the spec rather than computed by the module."""
    path = f"{spill_dir}/tool-result-{seq:06d}-{sha16(content)}.txt"
    return f"[truncated: ~{len(content) // 4:,} tokens - read {path} for the full result] {content[:250]}..."


def files(directory: Path) -> list[str]:
    return sorted(os.listdir(directory))


# ----- the happy path ----------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_spill_writes_the_full_original_and_points_at_it(tmp_path):
    spill = tmp_path / "a" / "spill"  # missing, with a missing parent
    cm = await manager(spill)
    results = truncated(await view(cm))
    stored = {m["tool_call_id"]: m for m in cm.messages if m["role"] == "tool"}
    for message in results:
        original = stored[message["tool_call_id"]]
        seq = original["metadata"]["_seq"]
        assert message["content"] == pointer(spill, seq, original["content"])
        path = spill / f"tool-result-{seq:06d}-{sha16(original['content'])}.txt"
        assert path.read_text(encoding="utf-8") == original["content"]
    assert all(NAME_RE.match(name) for name in files(spill))  # no temporary files left behind
    assert cm.fault_stats["spill_write_failures"] == 0


@pytest.mark.asyncio
async def test_created_directory_is_0700_and_files_are_0600(tmp_path):
    spill = tmp_path / "spill"
    truncated(await view(await manager(spill)))
    assert stat.S_IMODE(spill.stat().st_mode) == 0o700
    for name in files(spill):
        assert stat.S_IMODE((spill / name).stat().st_mode) == 0o600


@pytest.mark.asyncio
async def test_an_existing_directory_keeps_its_mode(tmp_path):
    spill = tmp_path / "spill"
    spill.mkdir(mode=0o755)
    spill.chmod(0o755)
    truncated(await view(await manager(spill)))
    assert stat.S_IMODE(spill.stat().st_mode) == 0o755  # the caller owns the directory
    assert files(spill)


@pytest.mark.asyncio
async def test_no_part_of_the_file_name_comes_from_tool_output_or_tool_names(tmp_path):
    spill = tmp_path / "spill"
    cm = SimpleContextManager(tool_result_spill_dir=str(spill), tool_result_budget_by_tool={"../../evil": 5})
    for message in history(name="../../evil"):
        if message["role"] == "tool":
            message = {**message, "content": "../../../etc/passwd\n" + message["content"], "name": "../../evil"}
        await cm.add_message(message)
    for message in cm.messages:
        if message["role"] == "tool":
            cm._truncate_tool_result(message)
    assert len(files(spill)) == 12 and all(NAME_RE.match(name) for name in files(spill))
    assert files(tmp_path) == ["spill"]


@pytest.mark.asyncio
async def test_a_message_without_seq_spills_under_its_hash_alone(tmp_path):
    cm = SimpleContextManager(tool_result_spill_dir=str(tmp_path))
    content = output(7)
    out = cm._truncate_tool_result({"role": "tool", "tool_call_id": "x", "content": content})
    assert f"read {tmp_path}/tool-result-{sha16(content)}.txt for the full result]" in out["content"]
    assert (tmp_path / f"tool-result-{sha16(content)}.txt").read_text() == content


@pytest.mark.asyncio
async def test_spill_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cm = SimpleContextManager(target_usage=0.8)
    for message in history():
        await cm.add_message(message)
    assert "call tool again if needed" in truncated(await view(cm))[0]["content"]
    assert files(tmp_path) == []


# ----- idempotency ---------------------------------------------------------------------------------


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    return {
        name: ((directory / name).stat().st_ino, (directory / name).stat().st_mtime_ns) for name in files(directory)
    }


@pytest.mark.asyncio
async def test_repeated_requests_write_once_and_send_the_same_bytes(tmp_path, monkeypatch):
    spill = tmp_path / "spill"
    cm = await manager(spill)
    first = await view(cm)
    before = snapshot(spill)
    calls = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda *a, **k: calls.append(a) or real_replace(*a, **k))
    for _ in range(5):
        assert await view(cm) == first
    assert calls == [] and snapshot(spill) == before


@pytest.mark.asyncio
@pytest.mark.parametrize("same_manager", [True, False])
async def test_resume_via_set_messages_points_at_the_same_files_without_rewriting(tmp_path, same_manager):
    spill = tmp_path / "spill"
    original = await manager(spill)
    first = await view(original)
    before = snapshot(spill)
    stored = await original.get_messages()
    resumed = original if same_manager else SimpleContextManager(tool_result_spill_dir=str(spill), target_usage=0.8)
    await resumed.set_messages(stored)
    assert await view(resumed) == first
    assert snapshot(spill) == before  # same inode and mtime: nothing rewritten


@pytest.mark.asyncio
async def test_clear_deletes_nothing(tmp_path):
    spill = tmp_path / "spill"
    cm = await manager(spill)
    truncated(await view(cm))
    before = snapshot(spill)
    await cm.clear()
    assert snapshot(spill) == before


# ----- failures: the pointer never changes ---------------------------------------------------------


@pytest.mark.asyncio
async def test_unwritable_path_still_emits_the_pointer_and_counts_the_failure(tmp_path, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    spill = blocker / "spill"  # ENOTDIR, even for root
    cm = await manager(spill)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = truncated(await view(cm))
    stored = {m["tool_call_id"]: m for m in cm.messages if m["role"] == "tool"}
    for message in results:
        original = stored[message["tool_call_id"]]
        assert message["content"] == pointer(spill, original["metadata"]["_seq"], original["content"])
    assert cm.fault_stats["spill_write_failures"] >= len(results)
    assert "cannot be used" in caplog.text  # said at construction; the failed writes are counted, not logged
    assert blocker.read_text() == "not a directory"


def _failing_open(real: Any, code: int) -> Any:
    def fake(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT and str(path).endswith(".tmp"):
            raise OSError(code, os.strerror(code))
        return real(path, flags, *args, **kwargs)

    return fake


@pytest.mark.asyncio
@pytest.mark.parametrize("failure", ["EACCES", "ENOSPC"])
async def test_pointer_is_byte_stable_whether_or_not_the_write_succeeds(tmp_path, monkeypatch, caplog, failure):
    spill = tmp_path / "spill"
    spill.mkdir(mode=0o700)
    failing = await manager(spill)
    with monkeypatch.context() as patch, caplog.at_level(logging.WARNING, logger=LOGGER):
        if failure == "EACCES":
            patch.setattr(os, "open", _failing_open(os.open, errno.EACCES))
        else:
            patch.setattr(os, "fdopen", lambda fd, *a, **k: FullDisk(fd))
        failed_view = await view(failing)
        again = await view(failing)
    assert files(spill) == []  # nothing written, no temporary file left behind
    assert failing.fault_stats["spill_write_failures"] >= len(truncated(failed_view))
    assert "spill write failed" in caplog.text
    healthy = await manager(spill)
    assert await view(healthy) == failed_view == again
    assert files(spill) and all(NAME_RE.match(name) for name in files(spill))


@pytest.mark.asyncio
async def test_a_path_the_os_cannot_take_degrades_instead_of_failing_the_turn(tmp_path):
    cm = await manager(f"{tmp_path}/bad\x00dir")
    assert truncated(await view(cm))
    assert cm.fault_stats["spill_write_failures"] > 0


# ----- symlinks --------------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("suffix", ["", "/"])
async def test_symlinked_spill_directory_is_refused_never_followed(tmp_path, caplog, suffix):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    cm = await manager(f"{link}{suffix}")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = truncated(await view(cm))
    assert files(real) == []
    assert "symlink" in caplog.text
    assert cm.fault_stats["spill_write_failures"] >= len(results)
    assert all(f"read {link}" in m["content"] for m in results)  # the pointer is still emitted


@pytest.mark.asyncio
async def test_a_symlinked_parent_directory_is_allowed(tmp_path):
    real_parent = tmp_path / "real-parent"
    real_parent.mkdir()
    (tmp_path / "parent-link").symlink_to(real_parent, target_is_directory=True)
    cm = await manager(tmp_path / "parent-link" / "spill")
    truncated(await view(cm))
    assert files(real_parent / "spill") and cm.fault_stats["spill_write_failures"] == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("dangling", [False, True])
async def test_symlinked_target_file_is_refused_never_followed(tmp_path, caplog, dangling):
    spill = tmp_path / "spill"
    spill.mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("precious")
    # The first result (seq 2) is the first one the ladder truncates: plant a link at its name.
    target = spill / f"tool-result-000002-{sha16(output(0))}.txt"
    target.symlink_to(victim)
    cm = await manager(spill)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        results = truncated(await view(cm))
    assert any(f"read {target} for the full result" in m["content"] for m in results)
    assert target.is_symlink()
    assert victim.read_text() == "precious" if not dangling else not victim.exists()
    assert cm.fault_stats["spill_write_failures"] == 1
    assert "not a regular file" in caplog.text


def test_write_spill_refuses_a_symlinked_target_directly(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "t.txt").symlink_to(victim)
    with pytest.raises(PermissionError):
        write_spill(str(tmp_path / "t.txt"), "new content")
    assert victim.read_text() == "precious"


# ----- concurrency -----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_concurrent_requests_leave_exactly_one_correct_file_per_result(tmp_path):
    spill = tmp_path / "spill"
    managers = [await manager(spill) for _ in range(4)]
    views = await asyncio.gather(*(view(cm) for cm in managers for _ in range(8)))
    assert all(v == views[0] for v in views)
    stored = {m["metadata"]["_seq"]: m["content"] for m in managers[0].messages if m["role"] == "tool"}
    names = files(spill)
    assert all(NAME_RE.match(name) for name in names) and len(names) == len(set(names))
    for name in names:
        seq = int(name.split("-")[2])
        assert (spill / name).read_text() == stored[seq]


def test_threads_writing_the_same_content_leave_one_complete_file(tmp_path):
    spill = tmp_path / "spill"
    content = "payload\n" * 200_000  # 1.6 MB, so writes overlap
    path = str(spill / f"tool-result-000001-{sha16(content)}.txt")
    errors: list[BaseException] = []
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        try:
            write_spill(path, content)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert files(spill) == [os.path.basename(path)]
    assert Path(path).read_text() == content
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


# ----- a real transcript, with the shared invariant checks ----------------------------------------


@pytest.mark.asyncio
async def test_spill_on_a_real_replay_keeps_every_invariant_and_the_same_bytes_when_writes_fail(tmp_path):
    from tests.conftest import WORKLOADS_DIR, checked_replay, estimated_size, load_transcript

    messages = load_transcript(WORKLOADS_DIR / "msa__pr814__deepseek_bench1__django__django-11910.jsonl")
    budget = int(estimated_size(messages) * 0.3)
    config = {"tool_result_budget_tokens": 62, "tool_result_shape": "head_tail"}
    spill = tmp_path / "spill"
    ok = SimpleContextManager(tool_result_spill_dir=str(spill), **config)
    checker, requests = await checked_replay(ok, messages, budget)
    assert checker.checked == len(requests) > 0
    pointers = {
        m["content"].split("read ", 1)[1].split(" for the full result]", 1)[0]
        for r in requests
        for m in r.view
        if m.get("_truncated")
    }
    assert len(pointers) >= 5
    assert all(Path(p).parent == spill and Path(p).is_file() for p in pointers)
    assert ok.fault_stats["spill_write_failures"] == 0
    # The same replay with every write failing: same views, byte for byte.
    blocked = tmp_path / "blocked"
    blocked.write_text("a file")
    spill.rename(tmp_path / "kept")
    spill.symlink_to(blocked)  # a symlinked spill dir: refused, nothing written through it
    failing = SimpleContextManager(tool_result_spill_dir=str(spill), **config)
    _, failed_requests = await checked_replay(failing, messages, budget)
    assert [r.view for r in failed_requests] == [r.view for r in requests]
    assert failing.fault_stats["spill_write_failures"] >= len(pointers)
    assert blocked.read_text() == "a file"


# ----- the directory as configured (issue 12 item 11) --------------------------------------------


def spill_result(cm: SimpleContextManager, seq: int = 7) -> str:
    """The pointer text of one truncated result (written to disk as a side effect)."""
    message = {"role": "tool", "tool_call_id": "c1", "content": output(seq), "metadata": {"_seq": seq}}
    return cm._truncate_tool_result(message)["content"]


def test_a_bytes_spill_dir_is_decoded_not_written_as_its_repr(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "spill"
    cm = SimpleContextManager(tool_result_spill_dir=os.fsencode(str(target)))
    assert cm.tool_result_spill_dir == str(target)
    pointer = spill_result(cm)
    assert f"read {target}{os.sep}tool-result-000007-" in pointer
    assert len(os.listdir(target)) == 1 and not [p for p in os.listdir(tmp_path) if p.startswith("b'")]


def test_a_relative_spill_dir_is_resolved_once_at_construction(tmp_path, monkeypatch):
    (tmp_path / "first").mkdir()
    (tmp_path / "later").mkdir()
    monkeypatch.chdir(tmp_path / "first")
    cm = SimpleContextManager(tool_result_spill_dir="spill")
    monkeypatch.chdir(tmp_path / "later")  # the host changes directory mid-session
    pointer = spill_result(cm)
    assert cm.tool_result_spill_dir == str(tmp_path / "first" / "spill")
    assert f"read {tmp_path / 'first' / 'spill'}{os.sep}" in pointer  # the model gets an absolute path
    assert len(os.listdir(tmp_path / "first" / "spill")) == 1 and os.listdir(tmp_path / "later") == []


# ----- a directory or file others control (issue 30, point 9) ------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [0o777, 0o770, 0o1777])
async def test_an_existing_directory_others_may_write_is_refused_and_left_as_it_is(tmp_path, caplog, mode):
    spill = tmp_path / "spill"
    spill.mkdir()
    spill.chmod(mode)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        cm = await manager(spill)
        results = truncated(await view(cm))
    assert files(spill) == [] and stat.S_IMODE(spill.stat().st_mode) == mode  # refused, never chmod-ed
    assert caplog.text.count("its group or others may write it") == 1 and "chmod go-w" in caplog.text
    assert cm.fault_stats["spill_write_failures"] >= len(results)
    assert all(f"read {spill}" in m["content"] for m in results)  # the same pointer bytes


@pytest.mark.asyncio
@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
async def test_a_directory_or_a_file_of_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 4242, 4242)
    cm = await manager(theirs)
    truncated(await view(cm))
    assert files(theirs) == [] and cm.fault_stats["spill_write_failures"] > 0
    spill = tmp_path / "spill"
    spill.mkdir(mode=0o700)
    planted = spill / f"tool-result-000002-{sha16(output(0))}.txt"  # the first result the ladder truncates
    planted.write_text("not the tool's output")
    os.chown(planted, 4242, 4242)
    cm = await manager(spill)
    truncated(await view(cm))
    assert planted.read_text() == "not the tool's output" and cm.fault_stats["spill_write_failures"] > 0
