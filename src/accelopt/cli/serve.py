"""``accelopt serve``: the evaluation service over HTTP (see ``accelopt.serve``)."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from accelopt.cli import common
from accelopt.cli.bench import problem_json, problem_show_json
from accelopt.cli.optimize import open_store
from accelopt.cli.output import console
from accelopt.cli.runs import run_row, run_show_json
from accelopt.errors import UserError
from accelopt.problems.loader import UnknownProblemError, list_problems, load_problem
from accelopt.problems.records import Problem
from accelopt.profiling.config import EvalConfig
from accelopt.profiling.factory import make_profiler
from accelopt.profiling.profiler import Profiler
from accelopt.store.store import Store

TOKEN_NAME = "serve-token"
_MaxConnections = Annotated[
    int, typer.Option(help="open connections at most; one more is answered 503 at once")
]
_HeaderTimeout = Annotated[
    float, typer.Option(help="seconds a connection has to send a request's header (then 408)")
]


def serve_command(
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8600,
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="the bearer token every request must carry (default: a new one written to "
            "WORKSPACE/serve-token)"
        ),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="no token (only when listening on loopback)")
    ] = False,
    workers: Annotated[int, typer.Option(help="evaluations that run at once")] = 2,
    queue: Annotated[int, typer.Option(help="evaluations that may wait; more get 429")] = 64,
    max_connections: _MaxConnections = 2048,
    header_timeout: _HeaderTimeout = 10.0,
    profiler: common.ProfilerOption = "local",
    ray_address: common.RayAddressOption = None,
    workspace: common.WorkspaceOption = None,
) -> None:
    """Serve evaluations, problems and runs over HTTP (OpenAPI schema at /openapi.json), and a
    live dashboard of the runs at /runs."""
    try:
        from accelopt.serve.api import create_app
        from accelopt.serve.jobs import EvaluationJobs, new_token_file, token_from_file
        from accelopt.serve.server import Limits, run
    except ImportError:
        raise UserError(
            "accelopt serve needs FastAPI and uvicorn: pip install 'accelopt[serve]'"
        ) from None
    if no_auth and not _loopback(host):
        raise UserError(f"--no-auth only on loopback (127.0.0.1, ::1), not on {host}")
    if workers < 1 or queue < 0:
        raise UserError("--workers must be at least 1 and --queue at least 0")
    if max_connections < 1 or header_timeout <= 0:
        raise UserError("--max-connections must be at least 1 and --header-timeout above 0")
    limits = Limits(header_timeout_s=header_timeout, max_connections=max_connections)
    _check_port_free(host, port)
    folder = common.workspace_dir(workspace)
    token, token_path, where = None, None, "no token (--no-auth)"
    if not no_auth:
        token_path = token_file or folder / TOKEN_NAME
        token = token_from_file(token_path) if token_file else new_token_file(token_path)
        where = f"token in {token_path}"
    config = EvalConfig(workers=workers)
    with open_store(folder) as store:
        profilers = _Profilers(profiler, config, ray_address, store)
        jobs = EvaluationJobs(_loader(folder), profilers.get, workers, queue)
        try:
            profilers.get("cpu")  # measures this machine once, before the first request
            app = create_app(jobs, _views(store, folder), token)
            console.print(f"accelopt serving on http://{host}:{port} ({where})", highlight=False)
            console.print(dashboard_hint(host, port, token_path), highlight=False, soft_wrap=True)
            run(app, host, port, limits)
        finally:
            jobs.close()
            profilers.close()


def dashboard_url(host: str, port: int) -> str:
    """The run list page, at an address a browser on this machine can open (a wildcard
    address is reached through loopback)."""
    shown = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    if ":" in shown:
        shown = f"[{shown}]"
    return f"http://{shown}:{port}/runs"


def dashboard_hint(host: str, port: int, token_path: Path | None) -> str:
    """Where the live dashboard is. The token itself is not printed (it would land in logs):
    the page takes it from the URL's fragment, which the browser never sends."""
    url = dashboard_url(host, port)
    if token_path is None:
        return f"live dashboard: {url}"
    return f"live dashboard: {url}#token=<the token in {token_path}>"


def _loader(folder: Path) -> Callable[[str], Problem]:
    """load_problem for the API: an unknown name is a UserError (a 404), like a broken file."""

    def load(name: str) -> Problem:
        try:
            return load_problem(name, folder)
        except UnknownProblemError as exc:
            raise UserError(str(exc.args[0]) if exc.args else str(exc)) from None

    return load


def _views(store: Store, folder: Path) -> Any:
    from accelopt.serve.api import Views
    from accelopt.serve.dashboard import live_json

    load = _loader(folder)

    def problem(name: str) -> dict[str, Any]:
        return problem_show_json(load(name), common.hardware_for("cpu"), "cpu")

    def run(run_id: str) -> dict[str, Any] | None:
        found = store.get_run(run_id)
        return run_show_json(store, found) if found is not None else None

    return Views(
        problems=lambda: [problem_json(load(n)) for n in list_problems(folder)],
        problem=problem,
        runs=lambda: [run_row(store, r) for r in store.list_runs()],
        run=run,
        live=lambda run_id: live_json(store, run_id),
    )


class _Profilers:
    """One profiler per backend, made when first asked for (the cpu one at start)."""

    def __init__(
        self, kind: str, config: EvalConfig, ray_address: str | None, store: Store
    ) -> None:
        self.kind, self.config, self.ray_address, self.store = kind, config, ray_address, store
        self._made: dict[str, Profiler] = {}
        self._lock = threading.Lock()

    def get(self, backend: str) -> Profiler:
        with self._lock:
            if backend not in self._made:
                hardware = common.hardware_for(backend)
                self._made[backend] = make_profiler(
                    self.kind,
                    hardware,
                    self.config,
                    ray_address=self.ray_address,
                    store=self.store,
                )
            return self._made[backend]

    def close(self) -> None:
        for made in self._made.values():
            made.close()


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UserError(
                f"cannot listen on {host}:{port} ({exc.strerror}): give another --port or --host"
            ) from None
