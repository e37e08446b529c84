"""What the commands share about runs: strategies named on the command line, the bundled seeds, and a
wall-clock timer. The runs themselves are built by ``makeroom.sim.runs``."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path

from makeroom.controller import Strategy
from makeroom.controller.config import CURES
from makeroom.errors import InputError, Problem
from makeroom.model import AutoscalerKind
from makeroom.scenario import Scenario, load_scenario
from makeroom.sim import Result
from makeroom.sim.runs import build

Progress = Callable[[float], None]


def check_strategy(name: str, source: str = "--strategy") -> Strategy:
    try:
        return Strategy(name)
    except ValueError:
        raise InputError(
            source, [Problem("", f"expected one of {', '.join(Strategy)}, got {name!r}")]
        ) from None


def simulate(
    scenario: Scenario,
    strategy: str | None = None,
    seed: int = 0,
    progress: Progress | None = None,
    consolidate: bool | None = None,
    autoscaler: AutoscalerKind | None = None,
) -> Result:
    """One run; a strategy named on the command line (``--strategy``) is checked first."""
    chosen = check_strategy(strategy) if strategy else scenario.strategy
    return build(scenario, chosen, seed, consolidate, autoscaler).run(progress=progress)


def parse_autoscalers(text: str | None, source: str = "--autoscalers") -> list[AutoscalerKind] | None:
    """Autoscalers named on the command line; None: the scenario's."""
    if text is None:
        return None
    names = [s.strip() for s in text.split(",") if s.strip()]
    out = []
    for name in names or [""]:
        try:
            out.append(AutoscalerKind(name))
        except ValueError:
            raise InputError(
                source, [Problem("", f"expected one of {', '.join(AutoscalerKind)}, got {name!r}")]
            ) from None
    return list(dict.fromkeys(out))


def parse_strategies(text: str | None, scenario: Scenario | None = None) -> list[Strategy]:
    """The strategies of ``--strategies``; by default the four cures, and ``headroom`` too for a
    scenario that asks for it (``controller.strategy: headroom`` or a ``controller.headroom``
    target), so that the bundled seeds compare as they always did."""
    if not text:
        asks = scenario is not None and (
            scenario.strategy is Strategy.HEADROOM or bool(scenario.spec.controller.headroom.targets)
        )
        return [*CURES, Strategy.HEADROOM] if asks else list(CURES)
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise InputError("--strategies", [Problem("", "expected a comma-separated list of strategies")])
    return [check_strategy(name, "--strategies") for name in names]


def bundled_scenarios() -> list[Path]:
    import makeroom.examples

    return sorted(Path(makeroom.examples.__file__).parent.glob("seed-*.yaml"))


def load_all(paths: Sequence[Path]) -> list[Scenario]:
    return [load_scenario(p) for p in paths]


class WallTimer:
    def __init__(self) -> None:
        self.start = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.start
