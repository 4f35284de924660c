/**
 * docs/bridges-in-production.md "Kill and resume a framework's run": each example is printed there verbatim from
 * test/bridges/fixtures/resume/, and run here as the page says, through the package's entry points, one process
 * per start on one SQLite journal: the first start is SIGKILLed (at the model step after the order, or inside the
 * e-mail's body), the next resumes the run and prints what the page shows, and the outside system holds exactly
 * one order and one e-mail; a further start finds the run finished and runs nothing.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { tempDir } from '../support/tmp.js';
import { openSqliteStore } from '../../src/sqlite.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const doc = readFileSync(`${root}docs/bridges-in-production.md`, 'utf8');
const start = doc.indexOf("## Kill and resume a framework's run");
assert.ok(start >= 0, 'docs/bridges-in-production.md has no section "Kill and resume a framework\'s run"');
const section = doc.slice(start);

function host(name: string, dir: string, env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [`${root}build-test/test/bridges/fixtures/resume/${name}.js`, dir], {
    encoding: 'utf8', env: { ...process.env, KILL_AT_STEP: '', KILL_IN: '', ...env },
  });
  return { stdout: result.stdout, stderr: result.stderr, status: result.status, signal: result.signal };
}

for (const [name, runId, sessionId] of [['ai-sdk', 'order-7-run', 'chat-42'], ['openai-agents', 'order-8-run', 'chat-43']] as const) {
  describe(`kill-and-resume example ${name}`, () => {
    const outbox = `order tea ${runId}/1/0\ne-mail tea ${runId}/2/0`;

    it('is printed in docs/bridges-in-production.md exactly as the file', () => {
      const source = readFileSync(`${root}test/bridges/fixtures/resume/${name}.ts`, 'utf8');
      assert.ok(section.includes('```ts\n' + source + '```'), `test/bridges/fixtures/resume/${name}.ts differs from the page`);
    });

    it('killed at the model step after the order: the next start replays the order, sends one e-mail, prints what the page says and lets the session go', async () => {
      const dir = tempDir(`jingwei-resume-${name}-`);
      const killed = host(name, dir, { KILL_AT_STEP: '2' });
      assert.equal(killed.signal, 'SIGKILL', killed.stderr);
      assert.equal(killed.stdout, 'start: running after 0 journaled steps\n');
      assert.ok(section.includes('`start: running after 0 journaled steps`'));
      const resumed = host(name, dir);
      assert.equal(resumed.status, 0, resumed.stderr);
      assert.ok(section.includes('```\n' + resumed.stdout + '```'), `the page does not show this output:\n${resumed.stdout}`);
      assert.equal(resumed.stdout, `start: running after 1 journaled steps\nend: finished: Ordered tea and confirmed it.\n${outbox}\n`);
      const store = openSqliteStore(`${dir}/journal.db`);
      try {
        const next = await store.acquire(sessionId, { owner: 'next-host' });
        await next.release();
      } finally {
        await store.close();
      }
      const again = host(name, dir, { KILL_AT_STEP: '1' });
      assert.equal(again.status, 0, 'a finished run asks no model (which would kill the host here)');
      assert.equal(again.stdout, `start: finished after 3 journaled steps\nend: finished: Ordered tea and confirmed it.\n${outbox}\n`);
    });

    it('killed inside the e-mail body: the next start retries the idempotent e-mail once (retry_safe) and the run finishes', () => {
      const dir = tempDir(`jingwei-resume-${name}-`);
      const killed = host(name, dir, { KILL_IN: 'send_email' });
      assert.equal(killed.signal, 'SIGKILL', killed.stderr);
      const resumed = host(name, dir);
      assert.equal(resumed.status, 0, resumed.stderr);
      assert.equal(resumed.stdout, `start: running after 2 journaled steps\nend: finished: Ordered tea and confirmed it.\n${outbox}\n`);
      if (name === 'ai-sdk') assert.ok(section.includes('```\n' + resumed.stdout + '```'), `the page does not show this output:\n${resumed.stdout}`);
      assert.ok(section.includes('A third start prints `start: finished after 3 journaled steps` and runs nothing.'));
    });
  });
}
