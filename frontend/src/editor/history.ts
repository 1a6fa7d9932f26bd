// Undo/redo over immutable snapshots: the editor's graph arrays are never mutated, so a
// snapshot is a reference and a hundred of them cost next to nothing.

export class History<T> {
  private past: T[] = [];
  private future: T[] = [];
  private lastKey: string | null = null;
  private lastAt = 0;

  constructor(
    private readonly limit = 200,
    private readonly coalesceMs = 1000,
    private readonly now: () => number = () => Date.now(),
  ) {}

  /** Record `before`, the state an edit is about to replace. Edits with the same coalesce key
   *  (typing into one field) within `coalesceMs` of each other are one step. */
  push(before: T, coalesceKey?: string): void {
    const at = this.now();
    const merge =
      coalesceKey !== undefined &&
      coalesceKey === this.lastKey &&
      at - this.lastAt <= this.coalesceMs &&
      this.past.length > 0;
    this.lastKey = coalesceKey ?? null;
    this.lastAt = at;
    this.future = [];
    if (merge) return;
    this.past.push(before);
    if (this.past.length > this.limit) this.past.shift();
  }

  /** The state to go back to, given the current one; null when there is none. */
  undo(current: T): T | null {
    const previous = this.past.pop();
    if (previous === undefined) return null;
    this.future.push(current);
    this.lastKey = null;
    return previous;
  }

  redo(current: T): T | null {
    const next = this.future.pop();
    if (next === undefined) return null;
    this.past.push(current);
    this.lastKey = null;
    return next;
  }

  get canUndo(): boolean {
    return this.past.length > 0;
  }

  get canRedo(): boolean {
    return this.future.length > 0;
  }

  clear(): void {
    this.past = [];
    this.future = [];
    this.lastKey = null;
  }
}
