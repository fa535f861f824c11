"""The REST API as ``docs/rest-api.yml`` documents it: every reply a test gets is checked against it.

``conftest_server.Api`` calls ``check`` on each reply, so every test of the server is also a test that the
document says what the server does: a status it does not list for that endpoint, a field missing, of
another type or outside its enum, fails the test that got it. Request bodies are not checked: tests send
malformed ones on purpose.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import yaml
from openapi_schema_validator import OAS30Validator
from openapi_spec_validator import validate as validate_spec

DOCUMENT = Path(__file__).parents[1] / "docs" / "rest-api.yml"
PREFIX = "/api/ckpt"


@functools.cache
def spec() -> dict[str, Any]:
    """The document, checked as OpenAPI 3.0, with every ``$ref`` replaced by what it names."""
    document = yaml.safe_load(DOCUMENT.read_text())
    validate_spec(document)
    return _resolved(document, document)


def _resolved(node: Any, document: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            target: Any = document
            for key in node["$ref"].removeprefix("#/").split("/"):
                target = target[key]
            return _resolved(target, document)
        return {key: _resolved(value, document) for key, value in node.items()}
    if isinstance(node, list):
        return [_resolved(value, document) for value in node]
    return node


def _operation(method: str, path: str) -> dict[str, Any] | None:
    """The document's operation for this request; None for a path it does not list."""
    for template, item in spec()["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path):
            assert method.lower() in item, f"{method} {PREFIX}{path} is not documented in {DOCUMENT.name}"
            return item[method.lower()]
    return None


def check(method: str, parts: tuple[str, ...], status: int, body: Any) -> None:
    """Fail unless ``docs/rest-api.yml`` lists ``status`` for this request and ``body`` fits its schema."""
    url = "/" + "/".join(part.strip("/") for part in parts)
    if not url.startswith(PREFIX + "/"):
        return  # jupyter_server's own API (sessions, kernels, contents)
    path = url.removeprefix(PREFIX)
    operation = _operation(method, path)
    if operation is None:  # the document says: a path that is no endpoint gets 404, as JSON
        assert status == 404, f"{method} {url}, no endpoint of {DOCUMENT.name}, answered {status}"
        OAS30Validator(spec()["components"]["schemas"]["Error"]).validate(body)
        return
    responses = operation["responses"]
    assert str(status) in responses, f"{method} {url} answered {status}, which {DOCUMENT.name} does not list"
    content = responses[str(status)].get("content")
    if content is None:
        assert body is None, f"{method} {url} answered {status} with a body {DOCUMENT.name} does not document"
        return
    OAS30Validator(content["application/json"]["schema"]).validate(body)
