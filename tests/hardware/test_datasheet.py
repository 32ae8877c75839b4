import pytest

from accelopt.hardware import DATASHEET, HardwareSpec, datasheet_spec

FIGURES = ("matmul_rate", "vector_rate", "bandwidth", "cores")


def test_known_devices_and_backends():
    assert {name: spec.backend for name, spec in DATASHEET.items()} == {
        "h100": "triton",
        "h200": "triton",
        "trn1": "nki",
        "trn2": "nki",
    }


@pytest.mark.parametrize("name", sorted(DATASHEET))
def test_every_figure_has_a_source(name):
    spec = DATASHEET[name]
    assert spec.name == name
    figures = [*FIGURES, "llc_bytes"] if spec.llc_bytes is not None else list(FIGURES)
    for figure in figures:
        assert spec.provenance.get(figure, "").strip(), f"{name}.{figure} has no provenance"
    assert set(spec.provenance) <= set(HardwareSpec.model_fields)


def test_trn1_is_nkibench_exactly():
    trn1 = datasheet_spec("trn1")
    assert trn1.matmul_rate == 23.75e12
    assert trn1.vector_rate == 286.72e9
    assert trn1.bandwidth == 410 * 2**30
    assert trn1.cores == 1


def test_gpu_figures():
    h100, h200 = datasheet_spec("h100"), datasheet_spec("h200")
    assert h100.matmul_rate == h100.vector_rate == 67e12
    assert h100.bandwidth == 3.35e12
    assert h200.matmul_rate == h200.vector_rate == 67e12
    assert h200.bandwidth == 4.8e12
    assert h100.cores == h200.cores == 132
    assert "67 TFLOP/s" in h100.provenance["matmul_rate"]


def test_trn2_one_neuroncore_v3():
    trn2 = datasheet_spec("trn2")
    assert trn2.matmul_rate == 20e12
    assert trn2.vector_rate == 1.0e12
    assert trn2.bandwidth == pytest.approx(2.9e12 / 8)
    assert trn2.cores == 1


def test_lookup_is_case_insensitive():
    assert datasheet_spec("H100") is DATASHEET["h100"]


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(KeyError) as info:
        datasheet_spec("tpu-v5")
    message = str(info.value)
    assert "tpu-v5" in message
    for name in DATASHEET:
        assert name in message
