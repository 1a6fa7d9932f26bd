"""POST /api/v1/template-variables: the editor's template fields list the variables the
server's own Jinja2 parser finds (the ports they create)."""

from __future__ import annotations

import pytest

from support.server import Api, error_of


@pytest.mark.parametrize(
    ("template", "variables"),
    [
        ("Hello, {{ name }}!", ["name"]),
        ("{{ question }} in {{ lang }}, {{ question }}", ["lang", "question"]),
        ("{{ user.name }} {{ items[0] }}", ["items", "user"]),
        ("{{ x | default(y) }}", ["x", "y"]),
        ("{% for row in rows %}{{ row.a }}{{ loop.index }}{% endfor %}", ["rows"]),
        ("{% set total = a + b %}{{ total }}", ["a", "b"]),
        ("{# {{ hidden }} #}{% raw %}{{ literal }}{% endraw %}{{ shown }}", ["shown"]),
        ("no variables here", []),
    ],
)
def test_the_variables_a_template_reads(api: Api, template: str, variables: list[str]) -> None:
    response = api.http.post("/api/v1/template-variables", json={"template": template})
    assert response.status_code == 200, response.text
    assert response.json() == {"variables": variables}


def test_a_template_that_does_not_parse_is_refused_with_the_parsers_reason(api: Api) -> None:
    error = error_of(
        api.http.post("/api/v1/template-variables", json={"template": "{{ broken"}), 422
    )
    assert error["code"] == "invalid_config"
    assert "does not parse" in error["message"]
