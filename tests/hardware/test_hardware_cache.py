import datetime
import fcntl
import hashlib
import json
import os
import subprocess
import sys

import pytest
from specs import make_spec

from accelopt.hardware import (
    HardwareSpec,
    devicelock,
    load_cpu_spec,
    measure_and_cache,
    save_cpu_spec,
)
from accelopt.hardware import cache as hw_cache
from accelopt.hardware.figures import Figure, Measurement
from accelopt.hardware.load import Load
from accelopt.hardware.measure import CEILINGS
from accelopt.hardware.roofline import BOUNDS
from accelopt.hardware.spec import Confidence

SPEC = make_spec(
    name="cpu:test",
    matmul_rate=5e11,
    vector_rate=2.5e11,
    bandwidth=4.5e10,
    isa=("avx2", "fma"),
    provenance={"matmul_rate": "measured: test"},
)
OTHER = SPEC.model_copy(update={"name": "cpu:remeasured"})


@pytest.fixture(autouse=True)
def cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ACCELOPT_CACHE_DIR", str(tmp_path))
    # no library here: these specs are fakes, which a real sgemm would beat (test_library_check)
    monkeypatch.setattr(hw_cache, "library_figures", lambda threads: {})
    return tmp_path


@pytest.fixture
def fake_measure(monkeypatch):
    calls = []

    def measure(threads=None):
        calls.append(threads)
        return OTHER

    monkeypatch.setattr(hw_cache, "measure_cpu", measure)
    return calls


def test_round_trip(cache_dir):
    path = save_cpu_spec(SPEC)
    assert path == cache_dir / "hardware" / f"{hw_cache.machine_key()}.json"
    assert json.loads(path.read_text())["name"] == "cpu:test"
    assert load_cpu_spec(measure_if_missing=False) == SPEC


def test_cached_spec_is_not_remeasured(fake_measure):
    save_cpu_spec(SPEC)
    assert load_cpu_spec() == SPEC
    assert fake_measure == []


def test_a_spec_cached_before_the_isa_was_detected_is_remeasured(fake_measure):
    save_cpu_spec(SPEC.model_copy(update={"isa": ()}))
    assert load_cpu_spec() == OTHER
    assert fake_measure == [None]


def test_the_cpu_target_has_its_own_cached_spec(monkeypatch):
    monkeypatch.delenv("ACCELOPT_CPU_TARGET", raising=False)
    native = hw_cache.cpu_spec_path()
    monkeypatch.setenv("ACCELOPT_CPU_TARGET", "x86-64-v3")
    assert hw_cache.cpu_spec_path() != native


def test_missing_without_measuring_is_none():
    assert load_cpu_spec(measure_if_missing=False) is None


def test_missing_is_measured_and_cached(fake_measure):
    assert load_cpu_spec() == OTHER
    assert fake_measure == [None]
    assert load_cpu_spec(measure_if_missing=False) == OTHER


@pytest.mark.parametrize("content", ["{not json", '{"name": 1}', "", "\x00\xff garbage"])
def test_corrupt_file_is_ignored_and_remeasured(fake_measure, content):
    path = hw_cache.cpu_spec_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, errors="surrogateescape")
    assert load_cpu_spec(measure_if_missing=False) is None
    assert load_cpu_spec() == OTHER
    assert HardwareSpec.model_validate_json(path.read_text()) == OTHER


def test_measure_and_cache_passes_threads(fake_measure):
    assert measure_and_cache(threads=1) == OTHER
    assert fake_measure == [1]
    assert load_cpu_spec(measure_if_missing=False) == OTHER


def test_machine_key_is_short_and_follows_the_host(monkeypatch):
    key = hw_cache.machine_key()
    assert len(key) == 16
    assert key == hw_cache.machine_key()
    monkeypatch.setattr(hw_cache.socket, "gethostname", lambda: "another-host")
    assert hw_cache.machine_key() != key


# -- provisional specs and re-measured ceilings ----------------------------------------------------

MEASURED = SPEC.model_copy(
    update={
        "provenance": {
            "matmul_rate": "measured: FMA micro-benchmark flops.c, 2 threads, 2026-01-01",
            "vector_rate": "measured: multiply+add micro-benchmark flops.c, 2 threads, 2026-01-01",
            "bandwidth": "measured: best of 10 read:write mixes in triad.c, 2 threads, 2026-01-01",
        },
        "spread": {"matmul_rate": 0.01, "vector_rate": 0.02, "bandwidth": 0.05},
    }
)
BUSY = MEASURED.model_copy(
    update={
        "provisional": True,
        "bandwidth": 2.0e10,  # low: measured while the machine was busy
        "matmul_rate": 6.0e11,  # higher than the quiet re-measurement below: kept
        "spread": {"matmul_rate": 0.3, "vector_rate": 0.3, "bandwidth": 0.4},
        "provenance": {**MEASURED.provenance, "load": "provisional, measured while busy"},
    }
)
QUIET = MEASURED.model_copy(
    update={"provenance": {**MEASURED.provenance, "load": "quiet during the measurement"}}
)


def _load(busy: bool) -> Load:
    return Load(loadavg=5.0 if busy else 0.1, running=1, cpus=2, steal=0.0)


@pytest.fixture
def machine(monkeypatch):
    """The machine's load as load_cpu_spec sees it: quiet unless a test says busy."""
    state = {"busy": False}
    monkeypatch.setattr(hw_cache, "machine_load", lambda: _load(state["busy"]))
    monkeypatch.setattr(hw_cache, "REFRESH_AFTER_S", 0)  # any provisional spec is due
    return state


@pytest.fixture
def quiet_measure(monkeypatch):
    calls = []

    def measure(threads=None):
        calls.append(threads)
        return QUIET

    monkeypatch.setattr(hw_cache, "measure_cpu", measure)
    return calls


def test_a_provisional_spec_is_remeasured_when_quiet_keeping_the_higher_figures(
    machine, quiet_measure
):
    save_cpu_spec(BUSY)
    spec = load_cpu_spec(measure_if_missing=False)
    assert quiet_measure == [None]
    assert spec is not None and not spec.provisional
    assert spec.bandwidth == QUIET.bandwidth  # the quiet figure is higher
    assert spec.provenance["bandwidth"] == QUIET.provenance["bandwidth"]
    assert spec.spread["bandwidth"] == QUIET.spread["bandwidth"]
    assert spec.matmul_rate == BUSY.matmul_rate  # the busy figure was higher: kept, and said so
    assert spec.provenance["matmul_rate"].startswith(hw_cache.KEPT)
    assert spec.provenance["matmul_rate"].endswith(BUSY.provenance["matmul_rate"])
    assert spec.spread["matmul_rate"] == BUSY.spread["matmul_rate"]
    assert spec.provenance["load"] == "quiet during the measurement"
    assert load_cpu_spec() == spec  # cached: not measured again
    assert quiet_measure == [None]


def test_a_provisional_spec_is_kept_while_the_machine_is_busy(machine, quiet_measure):
    machine["busy"] = True
    save_cpu_spec(BUSY)
    assert load_cpu_spec() == BUSY
    assert load_cpu_spec(measure_if_missing=False) == BUSY
    assert quiet_measure == []


def test_a_spec_that_stays_provisional_is_not_remeasured_by_every_command(
    machine, quiet_measure, monkeypatch
):
    monkeypatch.setattr(hw_cache, "REFRESH_AFTER_S", 600)
    save_cpu_spec(BUSY)  # just written: a noisy VM measured it a moment ago
    assert load_cpu_spec() == BUSY
    assert quiet_measure == []


def test_refreshing_a_provisional_spec_can_be_declined(machine, quiet_measure):
    save_cpu_spec(BUSY)
    assert load_cpu_spec(refresh_provisional=False) == BUSY
    assert quiet_measure == []


def test_a_quiet_spec_is_not_remeasured(machine, quiet_measure):
    save_cpu_spec(QUIET)
    assert load_cpu_spec() == QUIET
    assert quiet_measure == []


def test_keep_higher_takes_only_higher_figures():
    figures = {
        "bandwidth": Figure(9e10, 0.07, "measured: again"),
        "matmul_rate": Figure(1e11, 0.01, "measured: lower"),
    }
    raised = hw_cache.keep_higher(MEASURED, figures, note="raised by a re-measurement")
    assert raised.bandwidth == 9e10 and raised.spread["bandwidth"] == 0.07
    assert raised.provenance["bandwidth"] == "raised by a re-measurement: measured: again"
    assert raised.matmul_rate == MEASURED.matmul_rate
    assert raised.provenance["matmul_rate"] == MEASURED.provenance["matmul_rate"]
    assert hw_cache.keep_higher(MEASURED, {"bandwidth": Figure(1.0, 0, "x")}) is MEASURED


def test_a_note_replaces_the_previous_one():
    once = hw_cache.keep_higher(MEASURED, {"bandwidth": Figure(9e10, 0, "measured: a")}, "note 1")
    twice = hw_cache.keep_higher(once, {"bandwidth": Figure(1e11, 0, "measured: a")}, "note 2")
    assert twice.provenance["bandwidth"] == "note 2: measured: a"


@pytest.fixture
def fake_figures(monkeypatch):
    """measure_figures returning a fixed bandwidth; records its calls and whether the device lock
    was held (exclusive: a non-blocking shared lock must fail) while it measured."""
    calls = []

    def measure(ceilings, threads=None, repeat_factor=1):
        fd = os.open(devicelock.lock_path("cpu"), os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            locked = False
        except BlockingIOError:
            locked = True
        finally:
            os.close(fd)
        calls.append((tuple(ceilings), threads, repeat_factor, locked))
        figure = Figure(calls_value["bandwidth"], 0.04, "measured: triad.c again")
        return Measurement({"bandwidth": figure}, _load(False))

    calls_value = {"bandwidth": 9e10}
    monkeypatch.setattr(hw_cache, "measure_figures", measure)
    return calls, calls_value


def test_raise_ceiling_remeasures_every_ceiling_under_the_lock_and_keeps_the_higher(fake_figures):
    calls, _ = fake_figures
    save_cpu_spec(MEASURED)
    raised = hw_cache.raise_ceiling(MEASURED, "bandwidth", "silu kernel reached 117% of peak")
    assert calls == [(CEILINGS, MEASURED.cores, hw_cache.REMEASURE_REPEAT_FACTOR, True)]
    assert raised.bandwidth == 9e10
    assert raised.matmul_rate == MEASURED.matmul_rate
    today = datetime.date.today().isoformat()
    assert raised.provenance["bandwidth"] == (
        f"raised by a re-measurement on {today} (silu kernel reached 117% of peak): "
        "measured: triad.c again"
    )
    assert raised.spread["bandwidth"] == 0.04
    assert raised.key() != MEASURED.key()
    assert load_cpu_spec(measure_if_missing=False) == raised


def test_raise_ceiling_never_lowers_one(fake_figures):
    _, value = fake_figures
    value["bandwidth"] = 1e9
    save_cpu_spec(MEASURED)
    assert hw_cache.raise_ceiling(MEASURED, "bandwidth", "why") == MEASURED
    assert load_cpu_spec(measure_if_missing=False) == MEASURED


def test_raise_ceiling_keeps_what_the_cache_got_meanwhile(fake_figures):
    higher = MEASURED.model_copy(update={"matmul_rate": 9e11})  # raised by another process
    save_cpu_spec(higher)
    raised = hw_cache.raise_ceiling(MEASURED, "bandwidth", "why")
    assert (raised.matmul_rate, raised.bandwidth) == (9e11, 9e10)


def test_only_this_machines_measured_spec_is_remeasured():
    assert hw_cache.remeasurer_for(MEASURED) is None  # not cached here
    save_cpu_spec(MEASURED)
    assert hw_cache.remeasurer_for(MEASURED) is hw_cache.raise_ceiling
    assert hw_cache.remeasurer_for(MEASURED.model_copy(update={"bandwidth": 1e9})) is None
    save_cpu_spec(SPEC)  # ceilings not measured (fixed by hand)
    assert hw_cache.remeasurer_for(SPEC) is None
    gpu = MEASURED.model_copy(update={"backend": "triton"})
    save_cpu_spec(gpu)
    assert hw_cache.remeasurer_for(gpu) is None


def test_bound_ceilings_cover_every_roofline_bound():
    assert set(hw_cache.BOUND_CEILINGS) == set(BOUNDS)
    assert set(hw_cache.BOUND_CEILINGS.values()) == set(CEILINGS)


# -- two first runs at once measure once --------------------------------------------------------

FIRST_RUN = """
import sys, time
from pathlib import Path
from accelopt.hardware import cache
from accelopt.hardware.spec import HardwareSpec

calls, me, other = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
spec = HardwareSpec.model_validate_json(sys.argv[4])

def measure(threads=None):  # slow enough for the other process to arrive meanwhile
    with calls.open("a") as f:
        f.write("measured\\n")
    time.sleep(1.0)
    return spec

cache.measure_cpu = measure
cache.library_figures = lambda threads: {}
me.touch()
deadline = time.time() + 30
while not other.exists() and time.time() < deadline:  # both start together
    time.sleep(0.005)
print(cache.{entry}().model_dump_json())
"""


def _first_run(script: str, calls, me, other, cache_dir) -> subprocess.Popen[str]:
    """A process that finds no cached spec (the fake measurement counts itself into ``calls``)
    and starts asking for it once the ``other`` one is ready too."""
    args = [sys.executable, "-c", script, str(calls), str(me), str(other), SPEC.model_dump_json()]
    env = {**os.environ, "ACCELOPT_CACHE_DIR": str(cache_dir)}
    return subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.mark.parametrize("entry", ["load_cpu_spec", "ensure_cpu_spec"])
def test_two_first_runs_at_once_measure_once(tmp_path, cache_dir, entry):
    calls = tmp_path / "calls.txt"
    a, b = tmp_path / "ready-a", tmp_path / "ready-b"
    script = FIRST_RUN.replace("{entry}", entry)
    procs = [_first_run(script, calls, a, b, cache_dir), _first_run(script, calls, b, a, cache_dir)]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err
    assert calls.read_text().splitlines() == ["measured"]  # the second waited, then read
    assert [HardwareSpec.model_validate_json(out) for out, _ in outputs] == [SPEC, SPEC]
    assert load_cpu_spec(measure_if_missing=False) == SPEC
    assert hw_cache.spec_lock_path().parent == hw_cache.cpu_spec_path().parent


def test_the_spec_lock_is_held_while_measuring(fake_measure, monkeypatch):
    held = []

    def measure(threads=None):
        fd = os.open(hw_cache.spec_lock_path(), os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            held.append(False)
        except BlockingIOError:
            held.append(True)
        finally:
            os.close(fd)
        return OTHER

    monkeypatch.setattr(hw_cache, "measure_cpu", measure)
    assert load_cpu_spec() == OTHER
    assert measure_and_cache() == OTHER
    assert held == [True, True]


# -- how sure each ceiling is -------------------------------------------------------------------

SURE_SPEC = MEASURED.model_copy(
    update={
        "disagreement": {"matmul_rate": 0.01, "vector_rate": 0.02, "bandwidth": 0.04},
        "confidence": {name: Confidence.SURE for name in CEILINGS},
    }
)


def test_a_spec_cached_before_ceilings_were_judged_still_loads():
    old = json.loads(MEASURED.model_dump_json())
    for new in ("disagreement", "confidence"):
        old.pop(new)
    path = hw_cache.cpu_spec_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(old))
    loaded = load_cpu_spec(measure_if_missing=False)
    assert loaded == MEASURED
    assert loaded.disagreement == {} and loaded.confidence == {}


def test_how_sure_a_spec_is_round_trips_and_leaves_its_key_and_device_alone():
    save_cpu_spec(SURE_SPEC)
    loaded = load_cpu_spec(measure_if_missing=False)
    assert loaded == SURE_SPEC and loaded.confidence["bandwidth"] is Confidence.SURE
    unsure = SURE_SPEC.model_copy(
        update={"disagreement": {"bandwidth": 0.4}, "confidence": {"bandwidth": "unsure"}}
    )
    assert unsure.key() == SURE_SPEC.key() == MEASURED.key()
    assert hw_cache.same_device(unsure, MEASURED)


def test_a_figure_kept_brings_how_sure_its_own_measurement_was():
    unsure = Figure(9e10, 0.05, "measured: again", 0.3, Confidence.UNSURE)
    raised = hw_cache.keep_higher(SURE_SPEC, {"bandwidth": unsure}, note="raised")
    assert raised.disagreement["bandwidth"] == 0.3
    assert raised.confidence["bandwidth"] is Confidence.UNSURE
    assert raised.confidence["matmul_rate"] is Confidence.SURE  # not kept: its own stays
    unjudged = hw_cache.keep_higher(SURE_SPEC, {"bandwidth": Figure(9e10, 0.05, "measured: x")})
    assert "bandwidth" not in unjudged.disagreement  # not the replaced figure's
    assert "bandwidth" not in unjudged.confidence
    assert hw_cache.figures_of(raised)["bandwidth"] == Figure(
        9e10, 0.05, "raised: measured: again", 0.3, Confidence.UNSURE
    )


def test_refreshing_keeps_an_older_higher_figure_with_its_confidence(machine, monkeypatch):
    old = SURE_SPEC.model_copy(
        update={
            "provisional": True,
            "matmul_rate": 9e11,  # higher than the quiet re-measurement, though unsure
            "disagreement": {**SURE_SPEC.disagreement, "matmul_rate": 0.3},
            "confidence": {**SURE_SPEC.confidence, "matmul_rate": Confidence.UNSURE},
        }
    )
    monkeypatch.setattr(hw_cache, "measure_cpu", lambda threads=None: SURE_SPEC)
    save_cpu_spec(old)
    spec = load_cpu_spec()
    assert spec is not None and not spec.provisional
    assert spec.matmul_rate == 9e11
    assert spec.confidence["matmul_rate"] is Confidence.UNSURE
    assert spec.disagreement["matmul_rate"] == 0.3
    assert spec.confidence["bandwidth"] is Confidence.SURE  # the re-measurement's own


def test_the_key_of_a_spec_is_what_it_was_before_specs_said_how_sure():
    """Runs stored against a spec's key still find it: the key hashes what it always hashed."""
    before = SURE_SPEC.model_dump(exclude={"provenance", "provisional", "spread"})
    del before["disagreement"], before["confidence"], before["library"], before["library_scale"]
    del before["doubts"]
    digest = hashlib.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()
    assert SURE_SPEC.key() == f"{SURE_SPEC.name}-{digest[:12]}"
