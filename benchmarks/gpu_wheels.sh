#!/usr/bin/env bash
# Download, into .whl/, the wheels accelopt imports that a CUDA machine's image lacks, for that
# machine's Python (default 3.12), at the versions installed in this venv. The H200 image has torch,
# triton, numpy, jinja2, pyyaml, matplotlib, anyio, h11 and idna, but no pydantic and no openai;
# typer and rich travel too, so that theirs are the versions accelopt is tested with.
# benchmarks/gpu_check.sh installs them from there, offline. Run from the repository root:
#   bash benchmarks/gpu_wheels.sh [PYTHON_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TARGET_PY=${1:-3.12}
NAMES="pydantic pydantic-core annotated-types typing-inspection typing-extensions openai httpx2
httpcore2 truststore jiter sniffio typer annotated-doc shellingham rich markdown-it-py mdurl pygments"
pins=$("$PY" - $NAMES <<'PYCODE'
import sys
from importlib.metadata import PackageNotFoundError, version
pins = []
for name in sys.argv[1:]:
    try:
        pins.append(f"{name}=={version(name)}")
    except PackageNotFoundError:
        pass  # not used by this accelopt (e.g. an older openai without httpx2)
print(" ".join(pins))
PYCODE
)
rm -rf .whl && mkdir -p .whl
platforms=""
for n in 17 24 27 28 31 34 35 39; do platforms="$platforms --platform manylinux_2_${n}_x86_64"; done
# shellcheck disable=SC2086
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version "$TARGET_PY" \
    --implementation cp $platforms --platform manylinux2014_x86_64 -d .whl $pins
ls -1 .whl
du -sh .whl
