// Where the pointer last was on the page: paste lands there and a refused wire's reason is
// shown beside it. One listener for the whole page, not one per editor.

let pointer = { x: 0, y: 0 };
if (typeof window !== "undefined") {
  window.addEventListener("pointermove", (e) => (pointer = { x: e.clientX, y: e.clientY }), { passive: true });
}

export function pointerPosition(): { x: number; y: number } {
  return pointer;
}
