"""What acts on a context at a budget check: the gate, or (for comparison) a naive runtime.

:class:`Runtime` is the one interface both implement; :func:`build_runtime` is the one place that
builds either, so a live guard and a replay of recorded traffic get the same runtime for the same
settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    from .context import Context
    from .decision import Decision
    from .observer import Observer
    from .policy import Policy
    from .spill import SpillStore


@runtime_checkable
class Runtime(Protocol):
    """Runs budget checks on a :class:`~policies.Context` with a policy: ``check(ctx) -> Decision``.

    ``gated`` says whether the commit-boundary rule holds (the :class:`~policies.Gate`) or not
    (:class:`~policies.naive.NaiveRuntime`, which reproduces what runtimes do without it).
    """

    gated: bool
    policy: Policy
    budget: int
    hard_ceiling: int | None
    checks: int

    def check(self, ctx: Context) -> Decision:
        """Run one budget check and report it to the observer; the decision taken."""
        ...


def build_runtime(policy: Policy, budget: int, *, gated: bool = True, hard_ceiling: int | None = None,
                  mode: str = "grow", spill_store: SpillStore | None = None,
                  observer: Observer | None = None) -> Runtime:
    """The gate (``gated=True``) or a naive runtime for ``policy`` and ``budget``.

    ``hard_ceiling``, ``mode`` and ``spill_store`` are the gate's (see :class:`~policies.Gate`); a
    naive runtime has no ceiling and ignores them.
    """
    if gated:
        from .gate import Gate

        return Gate(policy, budget, hard_ceiling, mode=cast(Literal["grow", "shrink"], mode),
                    spill_store=spill_store, observer=observer)
    from .naive import NaiveRuntime

    return NaiveRuntime(policy, budget, observer=observer)
