"""JSON Schema validators for CreateJob's input check (issue 41), against today's pydantic
path: microseconds per input, valid and invalid, for two shipped types' rendered schemas.

    python -m bench.schema_validators [--repeat 7]

Each candidate does what admission would: say whether the input is valid and, when it is
not, name the bad fields (an invalid input costs the error report too). Candidates:

* ``pydantic``: ``JobDefinition.validate_input`` (the model, InvalidInput with violations);
* ``jsonschema``: python-jsonschema's Draft202012Validator, ``iter_errors``;
* ``jsonschema-rs``: the Rust validator, ``is_valid`` then ``iter_errors`` when invalid;
* ``CompiledSchema``: job_service.domain.input_schemas (jsonschema-rs and the naming);
* ``fastjsonschema``: compiled Python code; drafts 4/6/7 only, and it stops at the first
  error, so it names one bad field where the others name all.

The figure is the best of ``--repeat`` timings (least disturbed by the shared machine).
"""

from __future__ import annotations

import argparse
import json
import timeit
from collections.abc import Callable
from typing import Any

from job_service.domain.input_schemas import CompiledSchema
from shared.errors import InvalidInput
from shared.job_type_specs import spec_of
from shared.registry import JobDefinition, default_registry

Check = Callable[[Any], list[str]]


def feynman_inputs() -> dict[str, dict[str, Any]]:
    valid: dict[str, Any] = {
        "knowledge_item_id": "ki_0001",
        "knowledge_base_id": "kb_0001",
        "title": "Photosynthesis in C4 plants",
        "content": "Plants convert light energy into chemical energy. " * 40,
        "explanation": "Light is captured by chlorophyll and stored as sugar. " * 20,
    }
    invalid = {k: v for k, v in valid.items() if k != "explanation"}
    invalid |= {"title": "x" * 600, "knowledge_base_id": 7}
    return {"valid": valid, "invalid": invalid}


def review_inputs(items: int = 20) -> dict[str, dict[str, Any]]:
    one = feynman_inputs()["valid"]
    valid: dict[str, Any] = {
        "knowledge_base_id": "kb_0001",
        "items": [
            {k: v for k, v in one.items() if k != "knowledge_base_id"}
            | {"knowledge_item_id": f"ki_{n:04d}"}
            for n in range(items)
        ],
    }
    bad_items: list[dict[str, Any]] = [dict(item) for item in valid["items"]]
    bad_items[3]["title"] = ""
    bad_items[7]["note"] = "not declared"
    return {"valid": valid, "invalid": {"items": bad_items}}


def pydantic_check(definition: JobDefinition) -> Check:
    def check(instance: Any) -> list[str]:
        try:
            definition.validate_input(instance)
        except InvalidInput as exc:
            return [v.field for v in exc.violations]
        return []

    return check


def jsonschema_check(schema: dict[str, Any]) -> Check:
    import jsonschema  # type: ignore[import-untyped]  # a dev dependency's, without stubs

    validator = jsonschema.Draft202012Validator(schema)

    def check(instance: Any) -> list[str]:
        return [
            ".".join(["input", *map(str, e.absolute_path)]) for e in validator.iter_errors(instance)
        ]

    return check


def jsonschema_rs_check(schema: dict[str, Any]) -> Check:
    import jsonschema_rs

    validator = jsonschema_rs.Draft202012Validator(schema, offline=True)

    def check(instance: Any) -> list[str]:
        if validator.is_valid(instance):
            return []
        return [
            ".".join(["input", *map(str, e.instance_path)]) for e in validator.iter_errors(instance)
        ]

    return check


def compiled_schema_check(schema: dict[str, Any]) -> Check:
    compiled = CompiledSchema(schema)
    return lambda instance: [v.field for v in compiled.problems(instance, "input")]


def fastjsonschema_check(schema: dict[str, Any]) -> Check:
    import fastjsonschema

    # use_default=False: it would otherwise write the defaults into the caller's input
    validate = fastjsonschema.compile(schema, use_default=False)

    def check(instance: Any) -> list[str]:
        try:
            validate(instance)
        except fastjsonschema.JsonSchemaValueException as exc:
            return [str(exc.name)]
        return []

    return check


def candidates(definition: JobDefinition) -> dict[str, Check]:
    schema = json.loads(spec_of(definition).input_schema_json)
    found: dict[str, Check] = {"pydantic": pydantic_check(definition)}
    for name, build in (
        ("jsonschema", jsonschema_check),
        ("jsonschema-rs", jsonschema_rs_check),
        ("CompiledSchema", compiled_schema_check),
        ("fastjsonschema", fastjsonschema_check),
    ):
        try:
            found[name] = build(schema)
        except ImportError:
            print(f"({name} is not installed: left out)")
    return found


def best_us(check: Check, instance: Any, repeat: int) -> float:
    timer = timeit.Timer(lambda: check(instance))
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    registry = default_registry({})
    cases = (
        ("feynman_evaluation", feynman_inputs()),
        ("knowledge_base_review (20 items)", review_inputs()),
    )
    for title, inputs in cases:
        definition = registry.get(title.split()[0])
        checks = candidates(definition)
        print(f"\n{title}: µs per input (best of {args.repeat}), ratio to pydantic")
        print(f"  {'validator':<16}{'valid':>10}{'ratio':>8}{'invalid':>10}{'ratio':>8}  fields")
        base = {kind: best_us(checks["pydantic"], x, args.repeat) for kind, x in inputs.items()}
        for name, check in checks.items():
            us = (
                base
                if name == "pydantic"
                else {kind: best_us(check, x, args.repeat) for kind, x in inputs.items()}
            )
            fields = check(inputs["invalid"])
            print(
                f"  {name:<16}{us['valid']:>10.1f}{us['valid'] / base['valid']:>8.2f}"
                f"{us['invalid']:>10.1f}{us['invalid'] / base['invalid']:>8.2f}  {fields}"
            )


if __name__ == "__main__":
    main()
