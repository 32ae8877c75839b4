"""What the parent gives its workers: an allow-listed environment (``parent/environment.py``)."""

from __future__ import annotations

from accelopt.profiling.parent.environment import worker_env


def test_worker_env_keeps_what_tools_need_and_drops_secrets():
    parent = {
        "PATH": "/usr/bin",
        "HOME": "/root",
        "OPENBLAS_CORETYPE": "Haswell",
        "ACCELOPT_CACHE_DIR": "/c",
        "ACCELOPT_CPU_TARGET": "x86-64-v3",
        "OMP_PROC_BIND": "close",
        "OPENAI_API_KEY": "sk-secret",
        "ACCELOPT_TEST_CANARY": "x",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": "7",
    }
    env = worker_env(parent, threads=2)
    assert env["PATH"] == "/usr/bin" and env["OPENBLAS_CORETYPE"] == "Haswell"
    assert env["ACCELOPT_CACHE_DIR"] == "/c" and env["OMP_PROC_BIND"] == "close"
    assert env["OMP_NUM_THREADS"] == "2"
    assert env["ACCELOPT_CPU_TARGET"] == "x86-64-v3"  # workers compile for the same target
    for secret in ("OPENAI_API_KEY", "ACCELOPT_TEST_CANARY", "PYTHONUNBUFFERED"):
        assert secret not in env
