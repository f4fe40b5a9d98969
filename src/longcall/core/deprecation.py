"""Old names kept for one release after a rename, each warning once per call site."""

from __future__ import annotations

import warnings


def deprecated(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is going away and ``new`` replaces it (a ``DeprecationWarning``
    pointed at the caller of the deprecated function)."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
