"""Which copy of this module is running, and its version.

This module shares its distribution and import name with the original context-simple, so the
installed metadata may describe another copy than the one imported (both installed, this one first
on ``sys.path``). The metadata's version is used only when it describes this very copy; otherwise the
version this source was released with.
"""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from urllib.parse import unquote, urlparse

DISTRIBUTION = "amplifier-module-context-simple"
SOURCE_VERSION = "1.1.0.dev0"  # pyproject.toml's version (tests/test_config.py checks they agree)
PACKAGE_DIR = Path(__file__).resolve().parent


def _describes_this_copy(dist: metadata.Distribution) -> bool:
    """True when ``dist`` installed the package imported here (a regular or an editable install)."""
    installed = Path(str(dist.locate_file(f"{PACKAGE_DIR.name}/__init__.py"))).resolve()
    if installed.parent == PACKAGE_DIR:
        return True
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
    except (ValueError, OSError):
        return False
    url = urlparse(str(direct.get("url", "")))
    editable = bool((direct.get("dir_info") or {}).get("editable"))
    return editable and url.scheme == "file" and PACKAGE_DIR.is_relative_to(Path(unquote(url.path)).resolve())


def running_version() -> str:
    """The installed distribution's version if it describes this copy, else ``SOURCE_VERSION``."""
    try:
        dist = metadata.distribution(DISTRIBUTION)
        return dist.version if _describes_this_copy(dist) else SOURCE_VERSION
    except Exception:  # noqa: BLE001 - broken metadata must never stop an import
        return SOURCE_VERSION


__version__ = running_version()
