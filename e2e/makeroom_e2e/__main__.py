"""`python -m makeroom_e2e up|down|status|load SCENARIO|parity`: the e2e control plane for humans.

`up` starts the components detached and records them in a state directory; `down` stops them (process
groups) and removes it; `load` loads a scenario into the running control plane and plays its events;
`parity` starts a control plane of its own, runs every seed under every strategy in the simulator and
on the real components, and writes the table (parity.md) and the data (parity.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from .binaries import MissingBinariesError, cache_root, find_binaries
from .certs import Credentials
from .cluster import Components, ControlPlane, up
from .procs import kill_group


def state_dir() -> Path:
    env = os.environ.get("MAKEROOM_E2E_STATE")
    return Path(env) if env else cache_root() / "run" / "cli"


def _read_state() -> dict[str, Any] | None:
    f = state_dir() / "state.json"
    if not f.exists():
        return None
    data: dict[str, Any] = json.loads(f.read_text(encoding="utf-8"))
    return data


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def cmd_up(args: argparse.Namespace) -> int:
    if _read_state():
        print(f"already up (state in {state_dir()}); run `down` first", file=sys.stderr)
        return 1
    d = state_dir()
    shutil.rmtree(d, ignore_errors=True)
    comps = Components(autoscaler=not args.no_autoscaler, kwok=not args.no_kwok)
    t = time.monotonic()
    cp = up(workdir=d, components=comps, detach=True)
    print(f"up in {time.monotonic() - t:.1f}s")
    print(f"kubeconfig: {cp.kubeconfig}")
    print(f"api: {cp.api_url}")
    print(f"export KUBECONFIG={cp.kubeconfig}")
    return 0


def cmd_down(_args: argparse.Namespace) -> int:
    st = _read_state()
    if not st:
        print("not up")
        return 0
    for name, pid in reversed(list(st["pids"].items())):
        kill_group(int(pid))
        print(f"stopped {name} ({pid})")
    shutil.rmtree(state_dir(), ignore_errors=True)
    return 0


def cmd_status(_args: argparse.Namespace) -> int:
    st = _read_state()
    if not st:
        print("not up")
        return 1
    print(f"api: {st['api_url']}\nkubeconfig: {st['kubeconfig']}")
    for name, pid in st["pids"].items():
        print(f"  {name:26} pid {pid:>7}  {'running' if _alive(int(pid)) else 'DEAD'}")
    return 0


def _attach() -> ControlPlane:
    st = _read_state()
    if not st:
        raise SystemExit("not up: run `python -m makeroom_e2e up` first")
    wd = Path(st["workdir"])
    pki = wd / "pki"
    token = (pki / "tokens.csv").read_text(encoding="utf-8").split(",")[0]
    creds = Credentials(
        ca_cert=pki / "ca.crt",
        ca_key=pki / "ca.key",
        serving_cert=pki / "apiserver.crt",
        serving_key=pki / "apiserver.key",
        sa_key=pki / "sa.key",
        sa_pub=pki / "sa.pub",
        token=token,
        token_file=pki / "tokens.csv",
    )
    # Attached: components started by `up` are not restarted from here (no scheduler/autoscaler changes).
    return ControlPlane(
        workdir=wd,
        api_url=st["api_url"],
        kubeconfig=Path(st["kubeconfig"]),
        credentials=creds,
        binaries=find_binaries(),
        components=Components(scheduler=False, autoscaler=False),
        detach=True,
    )


def cmd_load(args: argparse.Namespace) -> int:
    cp = _attach()
    ls = cp.load_scenario(args.scenario, strategy=args.strategy, time_scale=args.time_scale, autoscaler=False)
    print(
        f"loaded {ls.scenario.name} into namespace {ls.namespace} (strategy {ls.strategy}, scale {ls.scale})"
    )
    if args.no_wait:
        return 0
    horizon = ls.scenario.duration_s * ls.scale if args.run_for is None else args.run_for
    with contextlib.suppress(KeyboardInterrupt):
        ls.wait_events_applied()
        end = time.monotonic() + max(horizon - (time.monotonic() - ls.t0), 0)
        while time.monotonic() < end:
            time.sleep(min(1.0, end - time.monotonic()))
    ls.stop()
    print(json.dumps(ls.summary(), indent=2, default=str))
    return 0


def cmd_parity(args: argparse.Namespace) -> int:
    from .parity import SEEDS, run_all, seed_name, table_from_folder
    from .scenario import STRATEGIES

    if args.table_from:
        print(table_from_folder(Path(args.table_from)))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = tuple(int(s) if s.isdigit() else s for s in args.seeds.split(",")) if args.seeds else SEEDS
    strategies = tuple(args.strategies.split(",")) if args.strategies else STRATEGIES
    with up() as cp:
        cases = run_all(cp, out, seeds, strategies, args.time_scale)
    print((out / "parity.md").read_text(encoding="utf-8"))
    different = [f"{seed_name(c.seed)} {c.strategy}" for c in cases if c.differences()]
    if different:
        print(f"outcomes differ: {', '.join(different)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m makeroom_e2e", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p_up = sub.add_parser("up", help="start the control plane (detached)")
    p_up.add_argument("--no-autoscaler", action="store_true")
    p_up.add_argument("--no-kwok", action="store_true")
    sub.add_parser("down", help="stop it")
    sub.add_parser("status", help="show its components")
    p_load = sub.add_parser("load", help="load a scenario and play its events")
    p_load.add_argument("scenario")
    p_load.add_argument("--strategy", default=None)
    p_load.add_argument("--time-scale", type=float, default=0.1)
    p_load.add_argument(
        "--run-for", type=float, default=None, help="real seconds to run (default: duration x scale)"
    )
    p_load.add_argument("--no-wait", action="store_true")
    p_parity = sub.add_parser("parity", help="every seed under every strategy in both worlds: the table")
    p_parity.add_argument("--out", default="parity-out", help="folder for parity.md, parity.json, logs")
    p_parity.add_argument(
        "--seeds",
        default=None,
        help="comma-separated seed numbers or constrained seed names (default: 1,2,3,4)",
    )
    p_parity.add_argument("--strategies", default=None, help="comma-separated (default: all four)")
    p_parity.add_argument("--time-scale", type=float, default=0.1)
    p_parity.add_argument(
        "--table-from", default=None, help="only print the table of the cases kept in this folder (*.json)"
    )
    args = ap.parse_args(argv)
    try:
        handler = {
            "up": cmd_up,
            "down": cmd_down,
            "status": cmd_status,
            "load": cmd_load,
            "parity": cmd_parity,
        }[args.cmd]
        return handler(args)
    except MissingBinariesError as exc:
        print(exc, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
