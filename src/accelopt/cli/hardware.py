"""``accelopt hardware``: the ceilings, each with where it came from, and for measured ones how
much the micro-benchmark's repeats varied, whether the machine was quiet meanwhile and how sure
each ceiling is (whether its rounds, seconds apart, agreed)."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from accelopt.backends.registry import hardware_backends
from accelopt.cli.output import console, shows_table, write_json
from accelopt.errors import UserError
from accelopt.hardware.cache import load_cpu_spec, measure_and_cache
from accelopt.hardware.consistency import rate_doubt
from accelopt.hardware.datasheet import DATASHEET
from accelopt.hardware.figures import AGREEMENT_LIMITS, SPREAD_LIMITS
from accelopt.hardware.gpu import GpuInfo, current_gpu
from accelopt.hardware.gpu_spec import NO_GPU, load_measured, measure_gpu_and_cache, triton_spec
from accelopt.hardware.spec import Confidence, HardwareSpec
from accelopt.views import unknown_backend


def _table(specs: list[tuple[str, HardwareSpec]]) -> Table:
    table = Table(title="Hardware ceilings", title_justify="left")
    for col in ["device", "backend", "matmul GFLOP/s", "vector GFLOP/s", "GB/s", "cores"]:
        table.add_column(col, justify="right" if "/s" in col or col == "cores" else "left")
    for label, s in specs:
        table.add_row(
            label,
            s.backend,
            f"{s.matmul_rate / 1e9:,.1f}",
            f"{s.vector_rate / 1e9:,.1f}",
            f"{s.bandwidth / 1e9:,.1f}",
            str(s.cores),
        )
    return table


def measurement_quality(spec: HardwareSpec) -> str | None:
    """How far a measured spec's figures can be trusted: the spread of each ceiling's repeats and
    whether the machine was quiet; None for a spec that was not measured (a datasheet)."""
    if not spec.spread and not spec.provisional:
        return None
    spreads = ", ".join(f"{name} {value:.0%}" for name, value in spec.spread.items())
    spread = f"repeats spread {spreads}" if spreads else "repeats spread unknown"
    if spec.provisional:
        seen = escape("; ".join(spec.doubts) or "see load below")
        return (
            f"[bold yellow]provisional[/bold yellow]: measured while the machine was busy ({seen}; "
            f"{spread}); measured again, keeping the higher figures, once it is quiet, or now by "
            "[bold]accelopt hardware --measure[/bold] on a quiet machine"
        )
    return f"quiet while measured; {spread}"


def confidence_lines(spec: HardwareSpec) -> list[str]:
    """A line per measured ceiling: sure or unsure, and why (``spec.confidence``); none for a
    spec measured before ceilings were judged, or not measured at all."""
    return [_confidence_line(spec, name, word) for name, word in spec.confidence.items()]


def _confidence_line(spec: HardwareSpec, name: str, word: Confidence) -> str:
    runs = spec.disagreement.get(name)
    limit = AGREEMENT_LIMITS.get(name, 1.0)
    quiet = f"(a quiet machine's: within {limit:.0%})"
    if word == Confidence.SURE:
        agree = "" if runs is None else f", its rounds agree within {runs:.0%} {quiet}"
        return f"{name}: sure{agree}"
    if runs is not None and runs > limit:
        why = f"its rounds differ by {runs:.0%} {quiet}"
    elif spec.spread.get(name, 0.0) > SPREAD_LIMITS.get(name, 1.0):
        why = f"its repeats spread {spec.spread[name]:.0%} (a quiet machine's: under "
        why += f"{SPREAD_LIMITS[name]:.0%})"
    elif (doubt := rate_doubt(spec)) is not None and doubt[0] == name:
        why = f"its figure is inconsistent with the other FLOP rate: {escape(doubt[1])}"
    else:
        why = "the machine was busy (see load below)"
    return f"{name}: [bold yellow]unsure[/bold yellow], {why}"


def _local_specs(
    measure: bool, backend: str, gpu: GpuInfo | None
) -> tuple[list[tuple[str, HardwareSpec]], str]:
    """This machine's measured specs for ``backend``, and a line to print when there is none."""
    if backend == "cpu":
        local = measure_and_cache() if measure else load_cpu_spec(measure_if_missing=False)
        if local is None:
            return (
                [],
                "This machine is not measured yet: run [bold]accelopt hardware --measure[/bold].",
            )
        return [("this machine", local)], ""
    if gpu is None:
        if measure:
            raise UserError(NO_GPU)
        return (
            [],
            "No NVIDIA GPU here (nvidia-smi lists none): the datasheets below are all there is.",
        )
    measured = measure_gpu_and_cache(gpu) if measure else load_measured(gpu)
    label = f"this GPU ({gpu.name})"
    if measured is None:
        hint = "[bold]accelopt hardware --measure --backend triton[/bold]"
        return [], f"{label} is not measured yet: run {hint}."
    return [(f"{label}, measured", measured)], ""


def sandbox_facts() -> dict[str, str]:
    """The layers a C kernel's process gets here (``kernel_host.c`` applies them and exits), with
    the worker's network; {"error": ...} when no kernel host can start (no compiler)."""
    from accelopt import settings
    from accelopt.backends.cpu.remote import probe_isolation
    from accelopt.hardware.toolchain import compiler_for
    from accelopt.profiling.isolation import worker_network

    try:
        facts = probe_isolation(compiler_for(settings.c_compiler()), settings.environment())
    except Exception as exc:  # reported, never fatal for `hardware`
        return {"error": str(exc).splitlines()[0] if str(exc) else type(exc).__name__}
    facts["network"] = worker_network()
    return facts


def describe_sandbox(facts: dict[str, str]) -> tuple[str, list[str]]:
    """One line on the layers in force for C kernels, and a warning per layer missing."""
    if "error" in facts:
        return "unknown", [f"the kernel sandbox could not be probed: {facts['error']}"]
    filtered = facts.get("seccomp") == "1" and facts.get("seccomp_load") == "1"
    isolated = facts.get("network") == "none"
    privileges = {
        "nobody": "runs as nobody (root's privileges dropped)",
        "root-without-capabilities": "runs as root with every capability dropped",
        "user": f"runs as uid {facts.get('uid')}",
    }.get(facts.get("privileges", ""), f"runs as uid {facts.get('uid')} (root's privileges kept)")
    landlock = facts.get("landlock", "0")
    every = "every thread checked" if "tasks" in facts else "threads not checked"
    parts = [
        "a separate process per evaluation",
        "system calls filtered (seccomp) on every thread while loading and running"
        if filtered
        else "no filter",
        privileges,
        "no new privileges",
        f"Landlock ABI {landlock}: no file, no signal out" if landlock != "0" else "no Landlock",
        every,
        "no network" if isolated else "the host's network namespace",
    ]
    warnings = []
    if landlock == "0":
        warnings.append(
            f"this kernel offers no Landlock (errno {facts.get('landlock_error', '?')}): a kernel "
            "is still kept from files by the system call filter once loaded, but not while its "
            "object loads"
        )
    if "tasks" not in facts:
        warnings.append(
            f"the kernel process's threads could not all be checked: {facts.get('every_thread')}"
        )
    if not filtered:
        warnings.append(
            "this system refuses a seccomp filter: C kernels are not run (set "
            "ACCELOPT_UNSANDBOXED=1 to run them without it, unsafe)"
        )
    if not isolated:
        warnings.append("workers cannot enter an empty network namespace (unshare refused)")
    if facts.get("memory_access", "1") != "1":
        warnings.append(
            "the worker cannot reach a kernel process's memory (process_vm_readv refused: Yama's "
            "ptrace_scope?): C kernels cannot be evaluated here"
        )
    return "; ".join(parts), warnings


def _print_spec(label: str, spec: HardwareSpec) -> None:
    """A spec's name, how far its measured figures can be trusted, and where each came from."""
    llc = f", LLC {spec.llc_bytes / 2**20:g} MiB" if spec.llc_bytes else ""
    console.print(f"[bold]{label}[/bold]: {spec.name}{llc}", highlight=False)
    quality = measurement_quality(spec)
    if quality:
        console.print(f"  {quality}", highlight=False)
    lines = confidence_lines(spec)
    if lines:
        console.print("  how sure each ceiling is:", highlight=False)
    for line in lines:
        console.print(f"    {line}", highlight=False)
    for field, source in spec.provenance.items():
        console.print(f"  {field}: {source}", highlight=False)


def show_hardware(measure: bool, json_path: str | None, backend: str = "cpu") -> None:
    if backend not in hardware_backends():
        raise UserError(unknown_backend(backend))
    gpu = current_gpu() if backend == "triton" else None
    specs, note = _local_specs(measure, backend, gpu)
    specs.extend(DATASHEET.items())
    if shows_table(json_path):
        if note:
            console.print(note)
        if gpu is not None:
            console.print(f"Triton kernels here are scored against: {triton_spec(gpu).name}")
        console.print(_table(specs))
        for label, spec in specs:
            _print_spec(label, spec)
    sandbox = sandbox_facts() if backend == "cpu" else None
    if sandbox is not None and shows_table(json_path):
        line, warnings = describe_sandbox(sandbox)
        console.print(f"[bold]Kernel sandbox (cpu)[/bold]: {line}", highlight=False)
        for warning in warnings:
            console.print(f"  [bold yellow]warning[/bold yellow]: {warning}", highlight=False)
    rows = [{"label": label, **s.model_dump(mode="json")} for label, s in specs]
    if sandbox is not None:
        rows.append({"label": "kernel sandbox (cpu)", "isolation": sandbox})
    write_json(json_path, rows)
