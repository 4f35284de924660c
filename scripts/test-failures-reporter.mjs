/**
 * A `node --test` reporter that prints nothing until the run ends, then each failed test: its file, its suites and
 * name, and the start of its error. `npm test` adds it beside the usual reporter, so a log that keeps only its
 * last lines (a CI's summary) still names what failed; the TAP stream alone names a failure only where it happened.
 */
import { relative } from 'node:path';

/** The start of a failure's own error (an assertion's message, or the cause a runner wraps), on one line. */
function firstLines(error) {
  const inner = error?.failureType === 'testCodeFailure' && error.cause !== undefined ? error.cause : error;
  const text = inner instanceof Error ? `${inner.name}: ${inner.message}` : String(inner);
  return text.split('\n').map((line) => line.trim()).filter((line) => line !== '').slice(0, 4).join(' | ').slice(0, 400);
}

export default async function* failedTests(source) {
  const failed = [];
  // The names of the suites a test is in, by file and depth, from the events that announce each test.
  const open = new Map();
  for await (const event of source) {
    if (event.type === 'test:start') {
      const path = open.get(event.data.file) ?? [];
      path.length = event.data.nesting;
      path.push(event.data.name);
      open.set(event.data.file, path);
      continue;
    }
    if (event.type !== 'test:fail') continue;
    const { name, nesting, file, details } = event.data;
    // A suite fails when a test in it fails; the test is the line worth reading.
    if (details?.error?.failureType === 'subtestsFailed') continue;
    const suites = (open.get(file) ?? []).slice(0, nesting);
    const where = file === undefined ? '?' : relative(process.cwd(), file);
    failed.push(`[test] FAILED ${where}: ${[...suites, name].join(' > ')}\n[test]   ${firstLines(details?.error)}\n`);
  }
  if (failed.length > 0) yield `[test] ${failed.length} failed:\n${failed.join('')}`;
}
