// Port colours: one per type family (read off the type's name: its head, the first member of
// a union that is not None), so a glance says what fits where. Only a colour: whether two
// types fit is the server's answer (connect.ts).

const FAMILY_COLOURS: Record<string, string> = {
  str: "#2e9e5b",
  int: "#2f6fd6",
  float: "#2f6fd6",
  bool: "#d9822b",
  list: "#8b5cd6",
  dict: "#0f9bb0",
  none: "#9aa0a6",
  any: "#7c8591",
  literal: "#c2417a",
};

const ALIASES: Record<string, string> = {
  List: "list",
  Sequence: "list",
  Dict: "dict",
  Mapping: "dict",
  Literal: "literal",
  Any: "any",
  object: "any",
  "": "any",
  None: "none",
  NoneType: "none",
};

/** The family of a type name: "list[str]" -> list, "str | None" -> str, "Optional[int]" -> int. */
function familyOf(typeName: string): string {
  const members = typeName.split("|").map((m) => m.trim());
  const real = members.filter((m) => m !== "None" && m !== "NoneType");
  let head = (real[0] ?? "None").split("[")[0].trim();
  if (head === "Optional" || head === "Union") head = (real[0].slice(real[0].indexOf("[") + 1).split(/[,\]]/)[0] ?? "").trim();
  return ALIASES[head] ?? head;
}

function hashHue(text: string): number {
  let h = 0;
  for (let i = 0; i < text.length; i++) h = (h * 31 + text.charCodeAt(i)) | 0;
  return Math.abs(h) % 360;
}

const colourCache = new Map<string, string>();

export function typeColour(typeName: string): string {
  const hit = colourCache.get(typeName);
  if (hit) return hit;
  const family = familyOf(typeName);
  const colour = FAMILY_COLOURS[family] ?? `hsl(${hashHue(family)} 55% 45%)`;
  colourCache.set(typeName, colour);
  return colour;
}
