"""``accelopt hardware``: the ceilings, each with where it came from, and for measured ones how
much the micro-benchmark's repeats varied and whether the machine was quiet meanwhile."""

from __future__ import annotations

from rich.table import Table

from accelopt.cli.common import HARDWARE_BACKENDS, unknown_backend
from accelopt.cli.output import console, shows_table, write_json
from accelopt.errors import UserError
from accelopt.hardware.cache import load_cpu_spec, measure_and_cache
from accelopt.hardware.datasheet import DATASHEET
from accelopt.hardware.gpu import GpuInfo, current_gpu
from accelopt.hardware.gpu_spec import NO_GPU, load_measured, measure_gpu_and_cache, triton_spec
from accelopt.hardware.spec import HardwareSpec


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
        return (
            f"[bold yellow]provisional[/bold yellow]: measured while the machine was busy (see "
            f"load below; {spread}); measured again, keeping the higher figures, once it is quiet"
        )
    return f"quiet while measured; {spread}"


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


def show_hardware(measure: bool, json_path: str | None, backend: str = "cpu") -> None:
    if backend not in HARDWARE_BACKENDS:
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
            llc = f", LLC {spec.llc_bytes / 2**20:g} MiB" if spec.llc_bytes else ""
            console.print(f"[bold]{label}[/bold]: {spec.name}{llc}", highlight=False)
            quality = measurement_quality(spec)
            if quality:
                console.print(f"  {quality}", highlight=False)
            for field, source in spec.provenance.items():
                console.print(f"  {field}: {source}", highlight=False)
    write_json(json_path, [{"label": label, **s.model_dump(mode="json")} for label, s in specs])
