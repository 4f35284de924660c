/**
 * Wire field paths (`kind.call.operation.task_id`) as the API's (`kind.call.operation.taskId`), so an error about an
 * event draft names the field the caller wrote. Keys inside free JSON (a custom event's `payload`, a call's
 * `arguments`, an opaque kind's fields) are the caller's own and are kept as they are.
 */
const FREE_JSON = new Set(['payload', 'arguments', 'fields']);

const camel = (segment: string) => segment.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

export function apiFieldPath(wirePath: string): string {
  const parts = wirePath.split('.');
  const out: string[] = [];
  let free = false;
  for (const part of parts) {
    out.push(free ? part : camel(part));
    if (!free && FREE_JSON.has(part.replace(/\[\d+\]$/, ''))) free = true;
  }
  return out.join('.');
}
