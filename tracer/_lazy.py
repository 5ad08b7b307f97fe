"""A package's public surface that loads on first use (PEP 562), so importing a wing stays cheap.

Each wing of ``tracer`` lists its public names in ``__all__`` and maps them to the module that
defines them; a name is imported when it is first read. A name that is also a submodule of the
package (``tracer.lab.compare``) is never exported this way: the submodule would shadow it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_surface(package: str, exports: Mapping[str, Sequence[str]]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``, whose ``exports`` map each defining module to
    the public names it provides."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module), name)

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
