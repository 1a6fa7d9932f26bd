export function apiTypes(document: unknown): Promise<string>;
