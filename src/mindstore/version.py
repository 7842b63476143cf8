"""The installed distribution's version, in a module of its own so that code low in the
layers (backup manifests, erase receipts) can name it without importing the package's
public facade (`mindstore/__init__.py`, which imports the store)."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

try:
    __version__ = _version("mindstore")
except PackageNotFoundError:  # pragma: no cover - running from a source tree, not installed
    __version__ = "0+unknown"
