"""The options of ``accelopt optimize``, in typed groups (``cli.groups``): what to optimize, how
to search, what it may spend, where it measures, and what it writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from accelopt.cli import common
from accelopt.cli.groups import option_group
from accelopt.cli.output import JsonOption, writable_option
from accelopt.errors import UserError
from accelopt.llm.config import Config, load_config
from accelopt.search.config import SearchConfig


@option_group("What to optimize")
@dataclass(frozen=True)
class Targets:
    """What to optimize: problems, the suite or a run to resume; the backend, the workloads and
    the starting kernel."""

    problems: Annotated[list[str] | None, typer.Argument(help="problem names")] = None
    suite: Annotated[bool, typer.Option("--suite", help="every problem of the suite")] = False
    resume: Annotated[str | None, typer.Option(help="continue this run")] = None
    backend: Annotated[str | None, typer.Option(help="kernel language/device (default cpu)")] = None
    workload: Annotated[
        list[str] | None,
        typer.Option(
            help="sizes to tune on: cpu (default), paper, small, tiny, a problem's own, or "
            "sizes such as M=512,N=768,K=384 (every size parameter; repeatable: the score is "
            "the geometric mean of % of peak over them)"
        ),
    ] = None
    held_out: Annotated[
        list[str] | None,
        typer.Option(
            "--held-out",
            help="a workload the agents never see, on which the baseline and the best kernel "
            "are measured at the end (a name, or sizes such as M=512,N=768,K=384; repeatable)",
        ),
    ] = None
    kernel: Annotated[
        Path | None,
        typer.Option(
            help="start from this kernel file, or the problem's shipped baseline or expert, "
            "instead of its baseline (a problem without one starts from a kernel the executor "
            "writes from its reference)"
        ),
    ] = None

    def check(self, replay_from: list[str] | None) -> None:
        """A UserError for a combination that names nothing, or more than a resume takes."""
        if not (self.problems or self.suite) and not self.resume:
            raise UserError(
                "name a problem (see `accelopt bench list`), use --suite, or --resume RUN"
            )
        if self.resume and (
            self.problems or self.suite or self.kernel or replay_from or self.held_out
        ):
            raise UserError(
                "--resume continues a run as it was recorded: give no problem, --kernel, "
                "--replay-from or --held-out with it"
            )


@option_group("Search")
@dataclass(frozen=True)
class SearchOptions:
    """The search: its strategy and its B, N, K, T, F; tuning and memory."""

    strategy: Annotated[
        str,
        typer.Option(
            help="beam, sampling, or autotune: no LLM (and no config), the starting kernel's "
            "declared tunables measured and the fastest kept"
        ),
    ] = "beam"
    beam: Annotated[int, typer.Option(help="B: kernels kept per iteration")] = 4
    plans: Annotated[int, typer.Option(help="N: plans per kernel")] = 4
    samples: Annotated[int, typer.Option(help="K: kernels per plan")] = 2
    iterations: Annotated[int, typer.Option(help="T: iterations")] = 8
    fixer: Annotated[int, typer.Option(help="F: repair rounds per failed kernel")] = 1
    per_plan: Annotated[
        int, typer.Option(help="children of one (parent, plan) the beam may keep")
    ] = 1
    variants: Annotated[
        int,
        typer.Option(
            help="variants tried per kernel that declares tunables (autotune: per iteration; "
            "0: no tuning)"
        ),
    ] = 8
    memory: Annotated[str, typer.Option(help="lessons from: off, run or workspace")] = "workspace"
    references: Annotated[
        bool,
        typer.Option(
            "--references/--no-references",
            help="time NumPy and the PyTorch kinds beside the run, to compare the best kernel "
            "with (several seconds and a torch import a run)",
        ),
    ] = True

    def config(self) -> SearchConfig:
        """The search's settings, validated; a UserError naming a bad one."""
        try:
            return SearchConfig(**vars(self))
        except ValueError as exc:
            raise UserError(f"invalid search option: {common.one_line(exc)}") from None


@option_group("LLM and budget")
@dataclass(frozen=True)
class Spending:
    """The LLM endpoints and what the run may spend on them, or reuse."""

    config: Annotated[Path | None, typer.Option(help="LLM config (default ./accelopt.yaml)")] = None
    budget_usd: Annotated[
        float | None,
        typer.Option(
            help="stop spending at this many $ (with --suite: in total; on --resume: "
            "replaces the run's own)"
        ),
    ] = None
    replay_from: Annotated[
        list[str] | None,
        typer.Option(help="reuse this earlier run's answers to identical prompts (repeatable)"),
    ] = None

    def llm(self) -> Config:
        """The LLM config file's settings, with --budget-usd in place of its dollars."""
        cfg = load_config(self.config)
        if self.budget_usd is not None:
            budget = cfg.budget.model_copy(update={"max_usd": self.budget_usd})
            cfg = cfg.model_copy(update={"budget": budget})
        return cfg


@option_group("Measurement")
@dataclass(frozen=True)
class Measuring:
    """Where kernels are measured, and by how many workers."""

    workers: Annotated[int, typer.Option(help="evaluation worker processes")] = 2
    profiler: common.ProfilerOption = "local"
    ray_address: common.RayAddressOption = None


@option_group("Output")
@dataclass(frozen=True)
class Outputs:
    """What the command writes besides the store: the best kernel, an export, JSON."""

    out: Annotated[
        Path | None,
        typer.Option(help="write the best kernel here", callback=writable_option("--out")),
    ] = None
    export: Annotated[
        Path | None,
        typer.Option(
            help="export the best kernel as a library into this folder at the end (one folder "
            "per problem inside it when there are several): see `accelopt export`"
        ),
    ] = None
    json_path: JsonOption = None
