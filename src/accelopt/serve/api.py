"""The HTTP API: evaluations, problems and runs, as the CLI's ``--json`` gives them.

Every ``/v1`` route needs ``Authorization: Bearer TOKEN`` unless the server was
started without a token (``--no-auth``, loopback only). A request body over ``MAX_BODY_BYTES``
is refused with 413 and never kept (read and discarded up to ``DRAIN_BYTES``, so that a client
still sending reads the 413, not a reset connection); a full queue answers 429 with ``Retry-After``.
Errors are JSON ``{"detail": "one sentence"}``. A Triton kernel is refused with 403 unless the
operator set ``ACCELOPT_SERVE_TRITON=1`` (``jobs.TRITON_REFUSED``); with it set, the app warns on
standard error when it is made.

The live dashboard (``accelopt.serve.dashboard``): ``/runs`` and ``/runs/ID`` are pages that hold
no data and are served without the token; their script takes the token from the URL's fragment
(``/runs/ID#token=...``, which the browser never sends) and polls ``/v1/runs`` and
``/v1/runs/ID/live`` with it.
"""

from __future__ import annotations

import hmac
import secrets
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from pydantic import BaseModel, ConfigDict, Field

from accelopt import settings
from accelopt.errors import UserError
from accelopt.serve.dashboard import page_headers, render_page
from accelopt.serve.jobs import MAX_SOURCE_BYTES, EvaluationJobs, QueueFull, Rejected

MAX_BODY_BYTES = MAX_SOURCE_BYTES * 2  # a JSON-escaped kernel of the largest size fits
# A refused body up to this size is read to its end (and discarded) before the 413: a server that
# answers and closes while the client still sends resets the connection, and the client sees a
# broken pipe instead of the answer. A larger body is answered at once (it costs no memory).
DRAIN_BYTES = 64 << 20

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class EvaluationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problem: str = Field(min_length=1, max_length=200, description="a problem name")
    workload: str = Field("cpu", min_length=1, max_length=200)
    backend: str = Field(
        "cpu",
        min_length=1,
        max_length=50,
        description="cpu; triton only where the operator set ACCELOPT_SERVE_TRITON=1 (else 403)",
    )
    source: str = Field(description="the kernel's source (C for cpu, Python for triton)")


class Submitted(BaseModel):
    id: str
    state: Literal["queued", "running", "done"]


class EvaluationStatus(BaseModel):
    id: str
    state: Literal["queued", "running", "done"]
    problem: str
    workload: str
    backend: str
    result: dict[str, Any] | None = Field(
        None, description="the evaluation, as `accelopt eval --json` writes it (when done)"
    )
    error: str = Field("", description="why the service could not evaluate it, if it could not")


class Views:
    """What the read-only routes show: the CLI's JSON, from the workspace (callables, so that
    the app holds no store or loader of its own)."""

    def __init__(
        self,
        problems: Callable[[], list[dict[str, Any]]],
        problem: Callable[[str], dict[str, Any]],
        runs: Callable[[], list[dict[str, Any]]],
        run: Callable[[str], dict[str, Any] | None],
        live: Callable[[str], dict[str, Any] | None] | None = None,
    ) -> None:
        """``live``: a run's live figures (``dashboard.live_json``); without it, none is found."""
        self.problems, self.problem, self.runs, self.run = problems, problem, runs, run
        self.live: Callable[[str], dict[str, Any] | None] = live or (lambda run_id: None)


TRITON_WARNING = (
    "accelopt serve: warning: ACCELOPT_SERVE_TRITON is set, so any token holder may send a "
    "Triton kernel (Python) that runs as this server's user, not contained"
)


def create_app(jobs: EvaluationJobs, views: Views, token: str | None) -> FastAPI:
    """The API over ``jobs`` and ``views``; one warning line on standard error when the
    operator opted in to Triton kernels (``settings.serve_triton``)."""
    if settings.serve_triton():
        print(TRITON_WARNING, file=sys.stderr, flush=True)
    app = FastAPI(
        title="accelopt",
        summary="Evaluate kernels against a problem's reference and the hardware's roofline.",
        docs_url=None,  # the interactive pages load scripts from a CDN; the schema is enough
        redoc_url=None,
    )
    auth = [Depends(_bearer(token))]
    _evaluation_routes(app, jobs, auth)
    _view_routes(app, views, auth)
    _page_routes(app)
    app.add_middleware(BodyLimit, limit=MAX_BODY_BYTES)  # type: ignore[arg-type]
    return app


def _bearer(token: str | None) -> Callable[[Request], None]:
    """The dependency of the ``/v1`` routes: ``Authorization: Bearer <token>``, or 401 (nothing
    asked when ``token`` is None)."""

    def authorized(request: Request) -> None:
        if token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip(), token):
            raise HTTPException(
                401,
                "a bearer token is needed: Authorization: Bearer TOKEN (the server's --token-file)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    return authorized


def _evaluation_routes(app: FastAPI, jobs: EvaluationJobs, auth: list[Any]) -> None:
    """Submitting a kernel, its evaluation's state and result, and the queue's health."""

    @app.post("/v1/evaluations", status_code=202, response_model=Submitted, dependencies=auth)
    def submit(body: EvaluationRequest) -> Submitted:
        try:
            job = jobs.submit(body.problem, body.workload, body.backend, body.source)
        except Rejected as exc:
            raise HTTPException(exc.status, str(exc)) from None
        except QueueFull as exc:
            headers = {"Retry-After": str(exc.retry_after_s)}
            raise HTTPException(429, str(exc), headers=headers) from None
        return Submitted(id=job.id, state=job.state)

    @app.get("/v1/evaluations/{job_id}", response_model=EvaluationStatus, dependencies=auth)
    def evaluation(job_id: str) -> EvaluationStatus:
        job = jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no evaluation {job_id!r} (finished ones are kept a while)")
        return EvaluationStatus(**job.as_json())

    @app.get("/v1/health", dependencies=auth)
    def health() -> dict[str, Any]:
        return {
            "ok": True,
            "capacity": jobs.capacity,
            "max_queued": jobs.max_queued,
            "jobs": jobs.counts(),
        }


def _view_routes(app: FastAPI, views: Views, auth: list[Any]) -> None:
    """The read-only routes: problems and runs as the CLI's JSON, and a run's live figures."""

    @app.get("/v1/problems", dependencies=auth)
    def problems() -> list[dict[str, Any]]:
        return _user_errors(views.problems)

    @app.get("/v1/problems/{name}", dependencies=auth)
    def problem(name: str) -> dict[str, Any]:
        return _user_errors(lambda: views.problem(name), status=404)

    @app.get("/v1/runs", dependencies=auth)
    def runs() -> list[dict[str, Any]]:
        return _user_errors(views.runs)

    @app.get("/v1/runs/{run_id}", dependencies=auth)
    def run(run_id: str) -> dict[str, Any]:
        return _run_view(views.run, run_id)

    @app.get("/v1/runs/{run_id}/live", dependencies=auth)
    def live(run_id: str) -> dict[str, Any]:
        """What the run's dashboard page shows, while the run goes (see dashboard.live_figures)."""
        return _run_view(views.live, run_id)


def _page_routes(app: FastAPI) -> None:
    """The dashboard's pages: no data in them, so no token (their script sends it)."""

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/runs")

    @app.get("/runs", include_in_schema=False)
    def runs_page() -> HTMLResponse:
        return _page("runs")

    @app.get("/runs/{run_id}", include_in_schema=False)
    def run_page(run_id: str) -> HTMLResponse:
        return _page("run", run_id=run_id)


def _page(template: str, **context: Any) -> HTMLResponse:
    """A dashboard page: no data in it, its one script allowed by a fresh nonce."""
    nonce = secrets.token_urlsafe(16)
    html = render_page(template, nonce, **context)
    return HTMLResponse(html, headers=dict(page_headers(nonce)))


def _run_view(view: Callable[[str], dict[str, Any] | None], run_id: str) -> dict[str, Any]:
    found = _user_errors(lambda: view(run_id))
    if found is None:
        raise HTTPException(404, f"no run {run_id!r}: see GET /v1/runs")
    return found


def _user_errors(call: Callable[[], Any], status: int = 400) -> Any:
    try:
        return call()
    except UserError as exc:
        raise HTTPException(status, str(exc)) from None


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413, whether it says its length or not,
    before the application sees it; what is left of a refused body up to ``drain`` bytes is read
    and discarded first, so that the client reads the answer."""

    def __init__(self, app: ASGIApp, limit: int, drain: int = DRAIN_BYTES) -> None:
        self.app = app
        self.limit = limit
        self.drain = drain

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            if int(declared) <= self.drain:
                await _discard_body(receive, self.drain)
            await self._too_large(send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                if message.get("more_body", False):
                    await _discard_body(receive, self.drain - seen)
                raise _TooLarge(self.limit)
            return message

        try:
            await self.app(scope, limited, send)
        except _TooLarge:  # an app that lets it through; FastAPI answers an HTTPException itself
            await self._too_large(send)

    async def _too_large(self, send: Send) -> None:
        response = JSONResponse({"detail": _too_large_detail(self.limit)}, status_code=413)
        await response({"type": "http"}, _no_body, send)


def _too_large_detail(limit: int) -> str:
    return f"the request body is larger than {limit >> 10} KiB"


class _TooLarge(HTTPException):
    """Raised while the application reads a body past the limit: the same 413 and sentence."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large_detail(limit))


async def _discard_body(receive: Receive, budget: int) -> None:
    """Read what is left of a request body and throw it away, up to ``budget`` bytes."""
    while budget > 0:
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            return
        budget -= len(message.get("body", b""))


async def _no_body() -> Message:
    return {"type": "http.request", "body": b"", "more_body": False}
