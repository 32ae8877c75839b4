"""Published ceilings of the accelerators accelopt knows, each figure with its source.

GPUs: the FP32 non-tensor rate stands for both matmul_rate and vector_rate (the kernels compute in
float32 on CUDA cores), with the HBM bandwidth. Trainium: the figures of one NeuronCore, as the
benchmark runs a kernel on one core. Rates are FLOP/s, bandwidth bytes/s; "TB/s" on a datasheet is
10**12 bytes/s, "GiB/s" is 2**30 bytes/s.
"""

from __future__ import annotations

from accelopt.hardware.spec import GPU_BACKEND, HardwareSpec

TERA = 1e12
GIGA = 1e9
GIB = 2**30
MIB = 2**20


def _gh100_sxm(name: str, bandwidth_tb: float, chip: str) -> HardwareSpec:
    """An SXM part of the GH100 chip: FP32 67 TFLOP/s (both rates), 132 SMs, 50 MB L2 (NVIDIA
    H100 Tensor Core GPU Architecture whitepaper); ``chip`` says which part the whitepaper's
    figures are for. Its datasheet, ``NVIDIA <name> Tensor Core GPU datasheet``, SXM column, gives
    the FP32 rate and ``bandwidth_tb``, the GPU memory bandwidth in TB/s."""
    sheet = f"datasheet: NVIDIA {name.upper()} Tensor Core GPU datasheet (SXM)"
    whitepaper = f"whitepaper: NVIDIA H100 Tensor Core GPU Architecture ({chip})"
    return HardwareSpec(
        name=name,
        backend=GPU_BACKEND,
        matmul_rate=67 * TERA,
        vector_rate=67 * TERA,
        bandwidth=bandwidth_tb * TERA,
        cores=132,
        llc_bytes=50 * MIB,
        provenance={
            "matmul_rate": f"{sheet}, FP32 67 TFLOP/s (non-tensor rate, used for matmul too)",
            "vector_rate": f"{sheet}, FP32 67 TFLOP/s",
            "bandwidth": f"{sheet}, GPU memory bandwidth {bandwidth_tb:g} TB/s",
            "cores": f"{whitepaper}, 132 SMs",
            "llc_bytes": f"{whitepaper}, 50 MB L2 cache",
        },
    )


# NVIDIA H100 Tensor Core GPU datasheet, SXM column: FP32 67 TFLOP/s, GPU memory bandwidth
# 3.35 TB/s. NVIDIA H100 Tensor Core GPU Architecture whitepaper: 132 SMs and 50 MB L2 on H100 SXM5.
H100 = _gh100_sxm("h100", 3.35, "H100 SXM5")
# NVIDIA H200 Tensor Core GPU datasheet, SXM column: FP32 67 TFLOP/s, GPU memory bandwidth
# 4.8 TB/s. Same GH100 chip as H100 SXM5: 132 SMs, 50 MB L2.
H200 = _gh100_sxm("h200", 4.8, "same GH100 chip")

# Trainium1, exactly the constants of the published NKIBench (AccelOpt paper) roofline, for one
# NeuronCore-v2 (a kernel runs on one of the chip's two cores):
# - matmul 23.75 TFLOP/s fp32 = AWS "Trainium Architecture": 47.5 FP32 TFLOPS per chip / 2 cores;
# - vector 286.72 GFLOP/s: the benchmark's Vector Engine figure, kept as it uses it (AWS's
#   NeuronCore-v2 page headlines 2.3 TFLOPS FP32 for the VectorEngine; NKIBench does not use it);
# - bandwidth 410 GiB/s = AWS "Trainium Architecture": 820 GiB/s HBM per chip / 2 cores.
TRN1 = HardwareSpec(
    name="trn1",
    backend="nki",
    matmul_rate=23.75 * TERA,
    vector_rate=286.72 * GIGA,
    bandwidth=410 * GIB,
    cores=1,
    provenance={
        "matmul_rate": "NKIBench roofline constant: 23.75 TFLOP/s fp32 for one NeuronCore-v2 "
        "(AWS Trainium Architecture: 47.5 FP32 TFLOPS per chip of 2 NeuronCore-v2)",
        "vector_rate": "NKIBench roofline constant: 286.72 GFLOP/s fp32, Vector Engine of one "
        "NeuronCore-v2",
        "bandwidth": "NKIBench roofline constant: 410 GiB/s for one NeuronCore-v2 "
        "(AWS Trainium Architecture: 820 GiB/s HBM per chip of 2 NeuronCore-v2)",
        "cores": "1 NeuronCore-v2: an NKIBench kernel runs on one core of the chip's two",
    },
)

# Trainium2, one NeuronCore-v3 (a kernel runs on one physical core, LNC=1):
# - matmul 20 TFLOP/s: AWS "Trainium2 Architecture Guide for NKI", Tensor Engine "20 FP32 dense
#   TFLOPS" per NeuronCore-v3 (the chip page's 181 FP32 TFLOPS / 8 cores is 22.6);
# - vector 1.0 TFLOP/s: same guide, "Vector Engine delivers a total of 1.0 TFLOPS of FP32". This
#   is AWS's headline convention, not NKIBench's (its trn1 vector figure is far below AWS's
#   2.3 TFLOPS for NeuronCore-v2), so vector-bound pct_of_peak on trn2 is not comparable to trn1's;
# - bandwidth 362.5 GB/s: derived, AWS "Trainium2 Architecture": 2.9 TB/s HBM per chip / 8 cores.
TRN2 = HardwareSpec(
    name="trn2",
    backend="nki",
    matmul_rate=20 * TERA,
    vector_rate=1.0 * TERA,
    bandwidth=2.9 * TERA / 8,
    cores=1,
    provenance={
        "matmul_rate": "AWS docs: Trainium2 Architecture Guide for NKI, NeuronCore-v3 Tensor "
        "Engine 20 FP32 dense TFLOP/s",
        "vector_rate": "AWS docs: Trainium2 Architecture Guide for NKI, NeuronCore-v3 Vector "
        "Engine 1.0 FP32 TFLOP/s",
        "bandwidth": "derived: AWS Trainium2 Architecture, 2.9 TB/s HBM per chip / 8 "
        "NeuronCore-v3 = 362.5 GB/s per core",
        "cores": "1 NeuronCore-v3: a kernel runs on one physical core (LNC=1)",
    },
)

DATASHEET: dict[str, HardwareSpec] = {spec.name: spec for spec in (H100, H200, TRN1, TRN2)}


def datasheet_spec(name: str) -> HardwareSpec:
    """The published spec of a named device (``h100``, ``h200``, ``trn1``, ``trn2``)."""
    try:
        return DATASHEET[name.lower()]
    except KeyError:
        known = ", ".join(sorted(DATASHEET))
        raise KeyError(f"no datasheet for hardware {name!r}; known names are: {known}") from None
