// A template's text box with its `{{ variables }}` and `{% tags %}` highlighted: a transparent
// textarea over a <pre> that draws the same text in colour (the textarea keeps editing, the
// caret, selection and undo native; the <pre> only paints).

import { type ReactNode, type TextareaHTMLAttributes, useRef } from "react";

const MARKUP = /(\{\{[\s\S]*?\}\}|\{%[\s\S]*?%\}|\{#[\s\S]*?#\})/g;

export function highlightTemplate(text: string): ReactNode[] {
  return text.split(MARKUP).map((part, i) =>
    i % 2 === 1 ? (
      <mark key={i} className={part.startsWith("{{") ? "tpl-var" : "tpl-tag"}>
        {part}
      </mark>
    ) : (
      part
    ),
  );
}

export function TemplateEditor({ value, ...textarea }: { value: string } & Omit<TextareaHTMLAttributes<HTMLTextAreaElement>, "value">) {
  const shadow = useRef<HTMLPreElement>(null);
  return (
    <div className="tpl-editor">
      <pre ref={shadow} className="tpl-shadow input mono" aria-hidden="true">
        {highlightTemplate(value)}
        {"\n"}
      </pre>
      <textarea
        {...textarea}
        value={value}
        className="tpl-input input mono"
        onScroll={(e) => {
          if (shadow.current) shadow.current.scrollTop = e.currentTarget.scrollTop;
        }}
      />
    </div>
  );
}
