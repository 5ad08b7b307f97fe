"""The lab: recorded sessions replayed through any policy, and policies compared on them.

``replay.py`` replays one session (events in, a :class:`SessionResult` out, spans recorded);
``compare.py`` runs arms over many sessions (locally, or on Ray with ``ray_engine.py``) and
aggregates them; ``metrics.py`` holds each A/B metric and the one paired interval; ``attribution.py``
charges a lost reference to the prune that caused it (``tracer.queries.lost`` reads it back); ``sweep.py``, ``cost.py`` and
``recommend.py`` build the frontier and name the cheapest safe arm. Import names from here
(``from tracer.lab import ReplaySpec``); modules whose name is also a function (``compare``,
``recommend``) or that are used as namespaces (``metrics``, ``sweep``, ``cost``) are imported as
modules: ``from tracer.lab import metrics``. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracer._lazy import lazy_surface

if TYPE_CHECKING:
    from tracer.lab.attribution import LostReference
    from tracer.lab.compare import Comparison, arms, parse_policies, run_replays
    from tracer.lab.cost import PriceTable, load_prices, price_results
    from tracer.lab.metrics import Interval, interval
    from tracer.lab.ray_engine import run_on_ray
    from tracer.lab.replay import ReplaySpec, SessionResult, replay_session

__all__ = ["Comparison", "Interval", "LostReference", "PriceTable", "ReplaySpec", "SessionResult", "arms",
           "interval", "load_prices", "parse_policies", "price_results", "replay_session",
           "run_on_ray", "run_replays"]

__getattr__, __dir__ = lazy_surface(__name__, {
    "tracer.lab.attribution": ["LostReference"],
    "tracer.lab.compare": ["Comparison", "arms", "parse_policies", "run_replays"],
    "tracer.lab.cost": ["PriceTable", "load_prices", "price_results"],
    "tracer.lab.metrics": ["Interval", "interval"],
    "tracer.lab.ray_engine": ["run_on_ray"],
    "tracer.lab.replay": ["ReplaySpec", "SessionResult", "replay_session"],
})
