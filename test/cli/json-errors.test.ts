/**
 * `--json` on a failure: `jingwei inspect --json` on a damaged journal printed nothing on stdout and exited 1, which
 * is also its exit status for calls that need a decision, so a script saw an empty document either way; a truncated
 * database file was reported as "session *, seq -1" with exit 1. A command given --json now prints a JSON document
 * for its failure too, and a store whose file is damaged as a whole exits 3, as a file that cannot be read.
 */
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { JournalCorruptError } from '../../src/errors.js';
import { mapSqliteError } from '../../src/store/sqlite/errors.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli, tamper, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-json-errors-');

interface ErrorDocument { ok: false; error: { code: string; exit_code: number; message: string; session_id?: string; seq?: number; reason?: string } }

describe('jingwei --json on a failure', () => {
  it('a damaged journal: one document naming the session, seq and reason, exit 1', async () => {
    const path = tempDbPath(dir, 'damaged');
    await writeStore(path, { alpha: alphaHistory() });
    tamper(path, `UPDATE jw_events SET body = replace(body, 'Place', 'Plaice') WHERE seq = 0`);
    for (const command of [['inspect', path, 'alpha', '--json'], ['events', path, 'alpha', '--json']]) {
      const r = cli(command);
      assert.equal(r.code, 1, r.stderr);
      const doc = JSON.parse(r.stdout) as ErrorDocument;
      assert.deepEqual({ ...doc.error, message: undefined }, { code: 'journal_corrupt', exit_code: 1, message: undefined, session_id: 'alpha', seq: 0, reason: 'hash_mismatch' });
      assert.match(r.stderr, /journal corrupt: session alpha, seq 0, reason hash_mismatch/, 'stderr says it as before');
      assert.equal(r.stdout.trim().split('\n').length, 1, 'one line: a reader of events --json takes it as one record');
    }
  });

  it('a database file damaged as a whole: the store cannot be read, exit 3, with no placeholder session or seq', async () => {
    const path = tempDbPath(dir, 'whole');
    await writeStore(path, { alpha: alphaHistory() });
    const truncated = tempDbPath(dir, 'truncated');
    writeFileSync(truncated, readFileSync(path).subarray(0, 8192));
    for (const command of [['sessions', truncated, '--json'], ['verify', truncated, '--json']]) {
      const r = cli(command);
      assert.equal(r.code, 3, r.stdout + r.stderr);
      assert.match(r.stderr, /the store's file is damaged \(reason storage\)/);
      assert.doesNotMatch(r.stderr, /session \*|seq -1/);
      const doc = JSON.parse(r.stdout) as ErrorDocument;
      assert.equal(doc.ok, false);
      assert.deepEqual([doc.error.code, doc.error.exit_code, doc.error.reason, doc.error.session_id], ['journal_corrupt', 3, 'storage', undefined]);
    }
  });

  // u125 #7: damage met by a listing, outside any one session's read, printed "session , reason storage".
  it('damage met outside any session (a listing) names the file, not an empty session', () => {
    const mapped = mapSqliteError(Object.assign(new Error('database disk image is malformed'), { code: 'SQLITE_CORRUPT' }), '');
    assert.ok(mapped instanceof JournalCorruptError);
    assert.equal(mapped.sessionId, '*');
    assert.equal(mapSqliteError(Object.assign(new Error('x'), { code: 'SQLITE_CORRUPT' }), 'alpha') instanceof JournalCorruptError, true);
    assert.equal((mapSqliteError(Object.assign(new Error('x'), { code: 'SQLITE_CORRUPT' }), 'alpha') as JournalCorruptError).sessionId, 'alpha');
  });

  it('a usage error: a document too, exit 2; without --json, stdout stays empty', () => {
    const r = cli(['inspect', '--json']);
    assert.equal(r.code, 2);
    assert.deepEqual([(JSON.parse(r.stdout) as ErrorDocument).error.code, (JSON.parse(r.stdout) as ErrorDocument).error.exit_code], ['usage', 2]);
    assert.equal(cli(['inspect']).stdout, '');
  });
});
