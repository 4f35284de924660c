/**
 * The operator commands on a PostgreSQL store: the same program, a postgres:// URL (with the CLI's ?schema=
 * parameter) instead of a file. Runs when JINGWEI_PG_URL names a server (npm test starts a throwaway one).
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { describePostgres, adminPool, freshSchema } from '../support/postgres.js';
import { tempDir } from '../support/tmp.js';
import { alphaOnPostgres, cli, cliAsync } from './helpers.js';

const dir = tempDir('jingwei-cli-pg-');

it('an unreachable PostgreSQL URL: exit 3, password never shown', () => {
  const r = cli(['sessions', 'postgres://jw:s3cret-pw@127.0.0.1:1/nothing?schema=jw']);
  assert.equal(r.code, 3);
  assert.match(r.stderr, /cannot open postgres:\/\/jw:\*\*\*@127\.0\.0\.1:1\/nothing/);
  assert.doesNotMatch(r.stderr, /s3cret-pw/);
  // node-postgres also reads a password from the query (r69 #0): masked there too, in the text and the JSON failure.
  for (const json of [[], ['--json']]) {
    const query = cli(['sessions', 'postgres://jw@127.0.0.1:1/nothing?schema=jw&password=s3cret-pw&sslpassword=k3y-pw', ...json]);
    assert.equal(query.code, 3);
    assert.match(query.stderr + query.stdout, /cannot open postgres:\/\/jw@127\.0\.0\.1:1\/nothing\?schema=jw&password=\*\*\*&sslpassword=\*\*\*/);
    assert.doesNotMatch(query.stderr + query.stdout, /s3cret-pw|k3y-pw/);
  }
  const bad = cli(['sessions', 'postgres://127.0.0.1:1/nothing?schema=no-dashes']);
  assert.equal(bad.code, 2, 'a schema that is not an identifier is a usage error');
});

describePostgres('the CLI on PostgreSQL', (url) => {
  it('import, sessions, events, inspect, verify and export through a postgres:// URL; verify finds tampering', async () => {
    const schema = freshSchema();
    const { target, source, imported } = await alphaOnPostgres(url, schema, dir);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout, /Imported 10 events into session alpha/);

    const sessions = await cliAsync(['sessions', target]);
    assert.equal(sessions.code, 0, sessions.stderr);
    assert.match(sessions.stdout, /^alpha\s+10\s+1\s+jingwei-cli\s+released\s+3 \(1 needs_review, 2 retry_allowed\)$/m);

    const events = await cliAsync(['events', target, 'alpha', '--json']);
    assert.equal(events.code, 0, events.stderr);
    assert.equal(events.stdout, cli(['export', source, 'alpha']).stdout, 'the same wire records as the SQLite original');

    const inspect = await cliAsync(['inspect', target, 'alpha', 'c-pay']);
    assert.equal(inspect.code, 1, inspect.stderr);
    assert.match(inspect.stdout, /retry\/needs_review: /);

    assert.equal((await cliAsync(['verify', target, 'alpha'])).code, 0);
    await adminPool(url).query(`UPDATE "${schema}".jw_events SET body = replace(body, 'Place', 'Plaice') WHERE session_id = 'alpha' AND seq = 0`);
    const verify = await cliAsync(['verify', target, 'alpha']);
    assert.equal(verify.code, 1, verify.stderr);
    assert.match(verify.stdout, /^CORRUPT {2}alpha: seq 0, reason hash_mismatch$/m);
  });

  it('the commands a person is told to run next show the URL with its password masked (pass r50: queue, inspect and import printed it)', async () => {
    const schema = freshSchema();
    const withPassword = (target: string) => { const u = new URL(target); u.username ||= 'postgres'; u.password = 'sekrit-pw'; return u.toString(); };
    const { target, imported } = await alphaOnPostgres(url, schema, dir);
    assert.equal(imported.code, 0, imported.stderr);
    const secret = withPassword(target);
    const outputs = [
      await cliAsync(['queue', secret]),
      await cliAsync(['inspect', secret, 'alpha']),
      await cliAsync(['inspect', secret, 'alpha', 'nosuch']),
    ];
    for (const r of outputs) {
      assert.doesNotMatch(r.stdout + r.stderr, /sekrit-pw/);
      assert.match(r.stdout + r.stderr, /jingwei (inspect|events) 'postgres:\/\/[^:']+:\*\*\*@/, 'the hint names the store, its password masked');
    }
  });
});
