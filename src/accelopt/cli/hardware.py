"""``accelopt hardware``: the ceilings, each with where it came from."""

from __future__ import annotations

from rich.table import Table

from accelopt.cli.output import console, shows_table, write_json
from accelopt.hardware.cache import load_cpu_spec, measure_and_cache
from accelopt.hardware.datasheet import DATASHEET
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


def show_hardware(measure: bool, json_path: str | None) -> None:
    local = measure_and_cache() if measure else load_cpu_spec(measure_if_missing=False)
    specs: list[tuple[str, HardwareSpec]] = []
    if local is not None:
        specs.append(("this machine", local))
    specs.extend(DATASHEET.items())
    if shows_table(json_path):
        if local is None:
            console.print(
                "This machine is not measured yet: run [bold]accelopt hardware --measure[/bold]."
            )
        console.print(_table(specs))
        for label, spec in specs:
            llc = f", LLC {spec.llc_bytes / 2**20:g} MiB" if spec.llc_bytes else ""
            console.print(f"[bold]{label}[/bold]: {spec.name}{llc}", highlight=False)
            for field, source in spec.provenance.items():
                console.print(f"  {field}: {source}", highlight=False)
    write_json(json_path, [{"label": label, **s.model_dump(mode="json")} for label, s in specs])
