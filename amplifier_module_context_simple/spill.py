"""Spill files: a truncated tool result's full text, written once where the model can read it back.
Hardened: 0700 directory, 0600 files, atomic writes, symlinks and directories others may write refused.
Moved out of tool_results.py (issue 38), which re-exports these names."""

from __future__ import annotations

import os
import secrets
import stat


def _open_spill_dir(spill_dir: str) -> int:
    """Open (creating with mode 0700 if missing) the spill directory, refusing a symlink, a directory of
    another user, and one that others may write (they could plant or swap the files the model reads)."""
    if os.path.islink(spill_dir):
        raise PermissionError(f"spill directory {spill_dir!r} is a symlink; refusing to follow it")
    if not os.path.isdir(spill_dir):
        os.makedirs(spill_dir, mode=0o700, exist_ok=True)
    # O_NOFOLLOW closes the race between the check above and the open.
    fd = os.open(spill_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    problem = _not_private(os.fstat(fd))
    if problem is not None:
        os.close(fd)
        raise PermissionError(f"spill directory {spill_dir!r} is refused: {problem}")
    return fd


def _ours(info: os.stat_result) -> bool:
    return not hasattr(os, "geteuid") or info.st_uid == os.geteuid()


def _not_private(info: os.stat_result) -> str | None:
    """Why an existing spill directory is not private to this user (others could plant or swap the files
    the model is told to read), or None. It is never chmod-ed: the caller owns it."""
    if not _ours(info):
        return f"it belongs to another user (uid {info.st_uid})"
    if info.st_mode & 0o022:
        return (
            f"its group or others may write it (mode {stat.S_IMODE(info.st_mode):o}; chmod go-w it, or name a "
            "missing directory: it is created 0700)"
        )
    return None


def spill_dir_problem(spill_dir: str) -> str | None:
    """Why spill files could not be written in ``spill_dir``, in words, or None; creates nothing.

    Usable: a writable directory (not a symlink, which the writer refuses), or a missing one whose
    nearest existing ancestor is a writable directory (the writer creates it on the first spill).
    """
    if os.path.islink(spill_dir):
        return "it is a symlink, which spill writes never follow"
    if os.path.exists(spill_dir):
        if not os.path.isdir(spill_dir):
            return "it is not a directory"
        if not os.access(spill_dir, os.W_OK | os.X_OK):
            return "the directory is not writable"
        return _not_private(os.stat(spill_dir))
    ancestor = os.path.dirname(spill_dir)
    while not os.path.lexists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{ancestor} is not a directory"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"it does not exist and {ancestor} is not writable"
    return None


def _existing(name: str, dir_fd: int) -> bool:
    """True when the target is already written; a symlink there is refused, never followed, and so is a
    file of another user."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode) or not stat.S_ISREG(info.st_mode) or not _ours(info):
        raise PermissionError(f"spill target {name!r} exists and is not a regular file of this user; refusing")
    return True


def write_spill(path: str, content: str) -> None:
    """Write ``content`` to ``path`` atomically (temp file in the same directory, then rename), mode 0600.

    Idempotent: an existing regular file is the same content (the name is its hash). Raises OSError
    (PermissionError for a refused symlink) so the caller can log and count the failure.
    """
    directory, name = os.path.split(path)
    dir_fd = _open_spill_dir(directory)
    try:
        if _existing(name, dir_fd):
            return
        temp = f".{name}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        fd = os.open(temp, flags, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(content.encode("utf-8", errors="replace"))
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            try:
                os.unlink(temp, dir_fd=dir_fd)
            except OSError:
                pass
            raise
    finally:
        os.close(dir_fd)
