"""The FlashInfer Trace format as pydantic models, written from its documentation
(``docs/flashinfer-trace/{definition,workload,solution,trace}.mdx`` of flashinfer-bench).

A dataset is a folder: ``definitions/**.json`` (one ``Definition`` each), ``workloads/**.jsonl``
(one workload-only ``Trace`` a line), ``solutions/**.json`` (one ``Solution`` each) and
``traces/**.jsonl`` (one ``Trace`` with a solution and an evaluation a line). Fields the
documentation does not name are kept, not refused (``model_extra``): ``unknown_fields`` lists them,
so a test can hold what accelopt writes to the documented fields only.
"""

from __future__ import annotations

import ast
import math
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Name = Annotated[str, Field(min_length=1)]
DType = Literal[
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
]
Language = Literal["python", "triton", "cpp", "cuda", "tilelang"]  # documented four + tilelang
Status = Literal[
    "PASSED",
    "INCORRECT_SHAPE",
    "INCORRECT_NUMERICAL",
    "INCORRECT_DTYPE",
    "RUNTIME_ERROR",
    "COMPILE_ERROR",
    "TIMEOUT",
]


class Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class AxisConst(Model):
    type: Literal["const"]
    value: int = Field(ge=0)
    description: str | None = None


class AxisVar(Model):
    type: Literal["var"]
    description: str | None = None


class TensorSpec(Model):
    shape: list[Name] | None  # None: a scalar; []: a 0-D tensor
    dtype: DType
    description: str | None = None


class Definition(Model):
    name: Name
    op_type: Name
    axes: dict[Name, Annotated[AxisConst | AxisVar, Field(discriminator="type")]]
    inputs: dict[Name, TensorSpec]
    outputs: dict[Name, TensorSpec]
    reference: Name
    tags: list[Name] = Field(default_factory=list)
    description: str | None = None
    constraints: list[Name] = Field(default_factory=list)

    @field_validator("tags", "constraints", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:  # documented as "Default: null"
        return [] if value is None else value

    @model_validator(mode="after")
    def _check(self) -> Definition:
        try:
            tree = ast.parse(self.reference)
        except SyntaxError as exc:
            raise ValueError(f"reference is not valid Python: {exc.msg}") from None
        if not any(isinstance(n, ast.FunctionDef) and n.name == "run" for n in tree.body):
            raise ValueError("reference defines no top-level function run")
        both = set(self.inputs) & set(self.outputs)
        if both:
            raise ValueError(f"{', '.join(sorted(both))} named both an input and an output")
        for tensor, spec in {**self.inputs, **self.outputs}.items():
            for axis in spec.shape or ():
                if axis not in self.axes:
                    raise ValueError(f"{tensor} has an axis {axis!r} that axes does not define")
        for constraint in self.constraints:
            try:
                ast.parse(constraint, mode="eval")
            except SyntaxError:
                raise ValueError(f"constraint {constraint!r} is not a Python expression") from None
        return self

    @property
    def var_axes(self) -> list[str]:
        return [n for n, a in self.axes.items() if a.type == "var"]


class RandomInput(Model):
    type: Literal["random"]


class ScalarInput(Model):
    type: Literal["scalar"]
    value: int | float | bool


class SafetensorsInput(Model):
    type: Literal["safetensors"]
    path: Name  # relative to the dataset's root, or absolute
    tensor_key: Name


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(Model):
    uuid: Name
    axes: dict[str, int]
    inputs: dict[str, InputSpec]

    @field_validator("axes")
    @classmethod
    def _non_negative(cls, axes: dict[str, int]) -> dict[str, int]:
        bad = [k for k, v in axes.items() if v < 0]
        if bad:
            raise ValueError(f"axes {', '.join(bad)} are negative")
        return axes


class SourceFile(Model):
    path: Name
    content: Name

    @field_validator("path")
    @classmethod
    def _relative(cls, path: str) -> str:
        p = PurePosixPath(path)
        if p.is_absolute() or ".." in p.parts:
            raise ValueError(f"source path {path!r} must be relative, without '..'")
        return path


class BuildSpec(Model):
    language: Language
    target_hardware: list[str] = Field(min_length=1)
    entry_point: Name
    dependencies: list[Name] = Field(default_factory=list)
    destination_passing_style: bool = True
    binding: Literal["tvm-ffi", "torch"] | None = None

    @field_validator("entry_point")
    @classmethod
    def _entry(cls, entry: str) -> str:
        if entry.count("::") != 1:
            raise ValueError(f"entry point {entry!r} is not '<file_path>::<function_name>'")
        return entry


class Solution(Model):
    name: Name
    definition: Name
    author: Name
    spec: BuildSpec
    sources: list[SourceFile] = Field(min_length=1)
    description: str | None = None

    @model_validator(mode="after")
    def _entry_file(self) -> Solution:
        paths = [s.path for s in self.sources]
        if len(set(paths)) != len(paths):
            raise ValueError("two sources have the same path")
        if self.spec.entry_point.split("::")[0] not in paths:
            raise ValueError(f"the entry point's file is not among the sources ({paths})")
        return self


class Correctness(Model):
    max_relative_error: float
    max_absolute_error: float
    extra: dict[str, Any] | None = None  # in the data model, not in the documentation

    @field_validator("max_relative_error", "max_absolute_error")
    @classmethod
    def _non_negative(cls, value: float) -> float:
        if not math.isnan(value) and value < 0:
            raise ValueError("an error must be non-negative (or NaN)")
        return value


class Performance(Model):
    latency_ms: float = Field(ge=0)
    reference_latency_ms: float = Field(ge=0)
    speedup_factor: float = Field(ge=0)


class Environment(Model):
    hardware: Name
    libs: dict[str, str]


class Evaluation(Model):
    status: Status
    log: str
    correctness: Correctness | None = None
    performance: Performance | None = None
    environment: Environment
    timestamp: Name

    @model_validator(mode="after")
    def _nullable(self) -> Evaluation:
        """The documented table: correctness for PASSED and INCORRECT_NUMERICAL, performance for
        PASSED only."""
        want_correctness = self.status in ("PASSED", "INCORRECT_NUMERICAL")
        want_performance = self.status == "PASSED"
        if (self.correctness is not None) != want_correctness:
            raise ValueError(f"correctness must {'' if want_correctness else 'not '}be given")
        if (self.performance is not None) != want_performance:
            raise ValueError(f"performance must {'' if want_performance else 'not '}be given")
        return self


class Trace(Model):
    definition: Name
    workload: Workload
    solution: str | None = None
    evaluation: Evaluation | None = None


def unknown_fields(model: BaseModel, where: str = "") -> list[str]:
    """The fields of a parsed object (nested ones included) that the documentation does not
    name, as dotted paths."""
    found = [f"{where}{k}" for k in (model.model_extra or {})]
    for key in type(model).model_fields:
        value = getattr(model, key)
        if isinstance(value, BaseModel):
            found += unknown_fields(value, f"{where}{key}.")
        elif isinstance(value, dict | list):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for k, v in items:
                if isinstance(v, BaseModel):
                    found += unknown_fields(v, f"{where}{key}.{k}.")
    return found
