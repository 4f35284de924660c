/**
 * `?schema=` in a store's URL names the schema, for a host's openPostgresStore as for the CLI given the same URL
 * (pass r51 #3: a host given the operator's URL wrote to `public`, and held a session another host held in the
 * named schema at the same time: no fencing between them). A URL and an option naming two schemas are refused.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { InvalidInputError } from '../../src/errors.js';
import type { TurnId } from '../../src/ids.js';
import { PostgresIdempotencyStore } from '../../src/store/postgres/idempotency.js';
import { connectionAndSchema } from '../../src/store/postgres/options.js';
import { cliAsync } from '../cli/helpers.js';
import { adminPool, describePostgres, freshSchema, openPostgresStore } from '../support/postgres.js';

const withSchema = (url: string, schema: string): string => {
  const u = new URL(url);
  u.searchParams.set('schema', schema);
  return u.toString();
};

it('the schema is read off the URL and taken off it before the driver sees it; two different names are refused', () => {
  assert.deepEqual(connectionAndSchema('postgres://h/db?schema=tenant_b&sslmode=disable', undefined), { url: 'postgres://h/db?sslmode=disable', schema: 'tenant_b' });
  assert.deepEqual(connectionAndSchema('postgres://h/db?schema=tenant_b', 'tenant_b'), { url: 'postgres://h/db', schema: 'tenant_b' });
  assert.deepEqual(connectionAndSchema('postgres://h/db', undefined), { url: 'postgres://h/db', schema: 'public' });
  assert.deepEqual(connectionAndSchema('/var/run/postgresql', 'x'), { url: '/var/run/postgresql', schema: 'x' });
  assert.throws(() => connectionAndSchema('postgres://h/db?schema=a', 'b'), (e) => e instanceof InvalidInputError && /names schema "a" .* option "b"/.test(e.message));
  assert.throws(() => connectionAndSchema('postgres://h/db?schema=a&schema=a', undefined), (e) => e instanceof InvalidInputError && /2 times/.test(e.message));
  assert.throws(() => connectionAndSchema('postgres://h/db?schema=no-dashes', undefined), (e) => e instanceof InvalidInputError && e.field === 'schema');
  // The rest of the URL reaches the driver byte for byte, in every form the driver reads (pass r52 #4: a socket URL
  // with an empty host was refused, a socket: URL's and an upper-case ?SCHEMA= were left to the driver to ignore).
  assert.deepEqual(connectionAndSchema('postgres://user@/db?host=/run/postgresql', undefined), { url: 'postgres://user@/db?host=/run/postgresql', schema: 'public' });
  assert.deepEqual(connectionAndSchema('postgres://user@/db?host=/run/postgresql&schema=t1', undefined), { url: 'postgres://user@/db?host=/run/postgresql', schema: 't1' });
  assert.deepEqual(connectionAndSchema('socket:/run/postgresql?db=x&schema=t2', undefined), { url: 'socket:/run/postgresql?db=x', schema: 't2' });
  assert.deepEqual(connectionAndSchema('postgres://h/db?SCHEMA=t3&options=-c%20x%3Dy', undefined), { url: 'postgres://h/db?options=-c%20x%3Dy', schema: 't3' });
  assert.deepEqual(connectionAndSchema('postgres://h/db?schema=a%5Fb', undefined), { url: 'postgres://h/db', schema: 'a_b' });
  assert.throws(() => connectionAndSchema('postgres://h/db?schema=', undefined), (e) => e instanceof InvalidInputError && /as the URL's \?schema= gives it/.test(e.message));
  assert.throws(() => connectionAndSchema('postgres://h/db?schema=a&SCHEMA=a', undefined), (e) => e instanceof InvalidInputError && /2 times/.test(e.message));
});

describePostgres('a store URL with ?schema=', (url) => {
  it('a host given the URL and a host given the option open one store, fenced against each other, which the CLI reads', async () => {
    const schema = freshSchema();
    const byOption = await openPostgresStore(url, { schema });
    const byUrl = await openPostgresStore(withSchema(url, schema));
    const a = await byOption.acquire('job-1', { owner: 'host-a' });
    await assert.rejects(byUrl.acquire('job-1', { owner: 'host-b' }), { code: 'session_busy' }, 'the second host is fenced out');
    await a.append([{ turnId: 'turn-1' as TurnId, kind: { type: 'user_message', text: 'hello' } }]);
    assert.equal((await byUrl.loadHistory('job-1')).length, 1, 'the same journal');
    const sessions = await cliAsync(['sessions', withSchema(url, schema), '--json']);
    assert.equal(sessions.code, 0, sessions.stderr);
    assert.deepEqual((JSON.parse(sessions.stdout) as { sessions: { session_id: string }[] }).sessions.map((s) => s.session_id), ['job-1']);
    const publicTables = await adminPool(url).query("SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public' AND table_name = 'jw_events'");
    const inPublic = (publicTables.rows[0] as { n: number }).n;
    if (inPublic > 0) {
      const rows = await adminPool(url).query("SELECT count(*)::int AS n FROM public.jw_events WHERE session_id = 'job-1'");
      assert.equal((rows.rows[0] as { n: number }).n, 0, 'nothing went to public');
    }
    await a.release();
  });

  it('a URL and an option naming two schemas are refused before anything is created; so is the idempotency helper', async () => {
    const schema = freshSchema();
    await assert.rejects(openPostgresStore(withSchema(url, schema), { schema: `${schema}_other` }), (e) => e instanceof InvalidInputError && e.field === 'schema');
    const created = await adminPool(url).query('SELECT count(*)::int AS n FROM information_schema.schemata WHERE schema_name = $1', [schema]);
    assert.equal((created.rows[0] as { n: number }).n, 0, 'no schema was created');
    const helper = await PostgresIdempotencyStore.open(withSchema(url, schema));
    try {
      const tables = await adminPool(url).query('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [schema]);
      assert.ok(tables.rows.length > 0, 'the helper made its table in the URL\'s schema');
    } finally {
      await helper.close();
    }
  });
});
