"""The host folder of one sandbox call, and the sweep of folders whose owner died.

Each call's folder is `<tmp>/dagwright-sandbox-<owner pid>-<random>`, and its owner holds an
flock on `<folder>/.owner` for as long as the folder lives. A server killed mid-call (kill
-9, OOM) cannot remove its folders, but the kernel drops its locks: `sweep` removes exactly
the folders whose lock it can take, so never one of a live process, whatever its pid
namespace or a reused pid. Folders without a lock file (left by versions before the lock)
are removed once older than an hour, which no call lives (wall_s is at most 1,200 s).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "dagwright-sandbox-"
OWNER_FILE = ".owner"
_UNLOCKED_MAX_AGE_S = 3600.0


@contextlib.contextmanager
def scratch_folder() -> Iterator[Path]:
    """A fresh private folder for one call, locked by this process until it is removed."""
    folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    lock = os.open(
        folder / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
    )
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        os.close(lock)


def sweep(where: Path | None = None) -> list[Path]:
    """Removes the call folders of dead owners in `where` (the temporary folder); returns
    them. Only folders of this user, never a link."""
    base = where or Path(tempfile.gettempdir())
    removed = []
    for folder in base.glob(f"{PREFIX}*"):
        try:
            found = os.lstat(folder)
        except OSError:
            continue
        if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
            continue
        if _owner_gone(folder, found.st_mtime):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    if removed:
        log.warning("removed %d sandbox folders left by dead processes", len(removed))
    return removed


def _owner_gone(folder: Path, modified: float) -> bool:
    try:
        lock = os.open(folder / OWNER_FILE, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        # No lock file: one of an older version, or one whose owner is between mkdtemp and
        # creating its lock (then it is seconds old).
        return time.time() - modified > _UNLOCKED_MAX_AGE_S
    except OSError:
        return False
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False  # its owner lives
    finally:
        os.close(lock)
    return True
