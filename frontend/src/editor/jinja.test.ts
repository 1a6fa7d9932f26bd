import { describe, expect, it } from "vitest";
import { templateVariables } from "./jinja";

describe("template variables (dynamic input ports)", () => {
  it.each([
    ["Hello, {{ name }}!", ["name"]],
    ["{{ question }} in {{ lang }}, {{ question }}", ["question", "lang"]],
    ["{{ user.name }} {{ items[0] }}", ["user", "items"]],
    ["{{ text | upper | truncate(10) }}", ["text"]],
    ["{{ x | default(value=y) }}", ["x", "y"]],
    ["{% for row in rows %}{{ row.a }}{{ loop.index }}{% endfor %}", ["rows"]],
    ["{% for k, v in data.items() %}{{ k }}={{ v }}{% endfor %}", ["data"]],
    ["{% set total = a + b %}{{ total }}", ["a", "b"]],
    ["{% if flag and not other %}{{ 'yes' }}{% else %}{{ 3 }}{% endif %}", ["flag", "other"]],
    ["{{ value is defined }} {{ v is not none }}", ["value", "v"]],
    ["{# {{ hidden }} #}{{ shown }}", ["shown"]],
    ["{% raw %}{{ literal }}{% endraw %}{{ real }}", ["real"]],
    ["{{- trimmed -}}", ["trimmed"]],
    ["no variables here", []],
    ["{{ 'a string {{ not }}' }}", []],
    ["{{ broken", []],
  ])("%s", (template, expected) => {
    expect(templateVariables(template)).toEqual(expected);
  });
});
