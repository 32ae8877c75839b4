"""The seams a backend and a profiler plug into are whole protocols: ``Device``
(``backends/device.py``) and ``Runner`` (``profiling/profiler.py``) declare every member the
harness and the cache use, so nothing in ``src/accelopt`` probes for one with ``getattr`` or
``hasattr``, and every implementation has every member.

The checker reads the sources with ``ast`` (nothing imported for the scan): the members of each
protocol class, then every ``getattr(x, "name", ...)`` / ``hasattr(x, "name")`` with a literal
name. Run this file alone to see the offences, as ``file:line: getattr(..., "name")``.
"""

from __future__ import annotations

import ast
import importlib

import pytest
from protocol_scan import (
    KNOWN,
    MIXINS,
    PROTOCOLS,
    ROOT,
    TESTS,
    class_members,
    implementations,
    missing_members,
    protocol_members,
)


def test_the_protocols_declare_what_the_harness_and_the_cache_use():
    members = protocol_members()
    assert set(members) == set(PROTOCOLS)
    assert {"batches", "copies_to_host", "kernel_pids", "isolation", "overhead_s", "pause",
            "resume", "close"} <= members["Device"]  # fmt: skip
    assert {"hardware", "race", "run", "retime", "close", "threads", "capacity"} <= members[
        "Runner"
    ]


def test_every_implementation_in_src_has_every_member():
    found = implementations(ROOT)
    for protocol, known in KNOWN.items():
        names = {n.rsplit(":", 1)[1] for n in found[protocol]}
        assert known <= names, f"{protocol}: the rule finds {sorted(names)}"
    missing = missing_members(found)
    assert not missing, "\n".join(missing)


def test_every_fake_in_the_tests_has_every_member():
    """A test's fake device or runner is one the harness or the cache could be given: it
    conforms too (``runners.RunsOnly`` gives a fake runner what it does not use)."""
    found = implementations(ROOT, TESTS)
    fakes = {
        p: {n: m for n, m in c.items() if n.startswith("tests/") and n.split(":")[1] not in MIXINS}
        for p, c in found.items()
    }
    faked = ("Device", "Runner")  # the tests fake these; chat models and recorders ship (testing/)
    assert all(fakes[p] for p in faked), f"the rule finds no fake: {fakes}"
    missing = missing_members(fakes)
    assert not missing, "\n".join(missing)


def test_the_member_scan_sees_a_missing_member():
    source = "class Half:\n    def run(self): ...\n    def retime(self): ...\n"
    tree = ast.parse(source)
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert class_members(node) == {"run", "retime"}


def test_the_host_device_and_the_fakes_are_instances_of_the_protocols():
    from runners import RunsOnly
    from specs import make_spec
    from stoppable import Stoppable

    from accelopt.backends.device import Device, HostDevice
    from accelopt.profiling.profiler import Runner

    assert isinstance(HostDevice(), Device)
    assert isinstance(Stoppable(1), Device)

    class Fake(RunsOnly):
        threads, capacity, hardware = 1, 1, make_spec()

        def close(self) -> None:
            pass

    assert isinstance(Fake(), Runner)
    assert not isinstance(object(), Runner)


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_the_protocol_classes_are_where_the_scan_reads_them(protocol):
    module, name = PROTOCOLS[protocol]
    assert getattr(importlib.import_module(module), name).__name__ == name
