/** `jingwei export` and `jingwei import` against real SQLite stores, run as the compiled program. */
import assert from 'node:assert/strict';
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
import { before, describe, it } from 'node:test';
import { openSqliteStore } from '../../src/sqlite.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli, quietHistory, tamper, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-transfer-');

/**
 * A journal as the JSONL store of Jingwei for Rust writes it: uuid-v4 ids, a legacy call without an operation, calls
 * without the start-marker flag, assistant_message with its version, and a kind (done) this port keeps opaque.
 */
const SESSION = 'sess_6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f';
const TURN = 'turn_0a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d';
const TASK = 'task_5e6f7a8b-9c0d-4e1f-8a2b-3c4d5e6f7a8b';
const ev = (n: number, kind: string) =>
  `{"event_id":"evt_1a2b3c4d-0000-4000-8000-00000000000${n}","session_id":"${SESSION}","turn_id":"${TURN}","seq":${n},"kind":${kind}}`;
const op = (key: string, effect: string) => `{"task_id":"${TASK}","key":"${key}","contract":{"effect":"${effect}","revision":"v3"},"retry":null}`;
const RUST_JOURNAL = [
  ev(0, '{"type":"user_message","text":"Book the flight and pay for it"}'),
  ev(1, '{"type":"tool_call","call":{"id":"mcall_legacy","name":"search_flights","arguments":{"to":"LYS"}}}'),
  ev(2, '{"type":"tool_result","result":{"call_id":"mcall_legacy","outcome":{"status":"failed","category":"timeout","code":"tool_timeout","message":"the call deadline passed","retryable":true}}}'),
  ev(3, `{"type":"tool_call","call":{"operation":${op('operation_pay', 'non_idempotent')},"id":"toolcall_pay","name":"pay","arguments":{"amount":120}}}`),
  ev(4, `{"type":"tool_call","call":{"operation":${op('operation_book', 'idempotent')},"id":"toolcall_book","name":"book","arguments":{"flight":"AF7642"}}}`),
  ev(5, '{"type":"tool_result","result":{"call_id":"toolcall_book","outcome":{"status":"failed","category":"body_failure","code":"upstream_502","message":"bad gateway","retryable":true}}}'),
  ev(6, '{"type":"assistant_message","version":1,"text":"I could not confirm the booking yet."}'),
  ev(7, '{"type":"done","status":"checkpointed"}'),
].join('\n') + '\n';

/** RUST_JOURNAL with a recorded time on each of its first lines. */
const timed = (times: readonly string[]): string =>
  RUST_JOURNAL.split('\n').map((line, i) => (i < times.length ? line.replace(/"seq":(\d+),/, `"seq":$1,"recorded_at":"${times[i]}",`) : line)).join('\n');

describe('jingwei export', () => {
  let path: string;
  before(async () => {
    path = tempDbPath(dir, 'journal');
    await writeStore(path, { alpha: alphaHistory(), quiet: quietHistory() });
  });

  it('writes the verified journal as JSONL on stdout, exactly what the store exports', async () => {
    const r = cli(['export', path, 'alpha']);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stderr, '');
    const store = openSqliteStore(path);
    try {
      assert.equal(r.stdout, await store.exportJsonl('alpha'));
    } finally {
      await store.close();
    }
    assert.equal(r.stdout.split('\n').length, 11);
  });

  it('--out writes a file, refuses to overwrite it without --force (exit 2), and overwrites with it', () => {
    const out = `${dir}/alpha.jsonl`;
    const r = cli(['export', path, 'alpha', '--out', out]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Exported 10 events of session alpha to .*alpha\.jsonl \([\d,]+ bytes\)\.\n$/);
    assert.equal(readFileSync(out, 'utf8'), cli(['export', path, 'alpha']).stdout);
    const again = cli(['export', path, 'quiet', '-o', out]);
    assert.equal(again.code, 2);
    assert.match(again.stderr, /exists; add --force/);
    const forced = cli(['export', path, 'quiet', '-o', out, '--force']);
    assert.equal(forced.code, 0, forced.stderr);
    assert.equal(readFileSync(out, 'utf8').split('\n').length, 5);
  });

  it('never writes over the store it reads, nor its companion files, even with --force (exit 2)', async () => {
    const own = tempDbPath(dir, 'own');
    await writeStore(own, { alpha: alphaHistory(), quiet: quietHistory() });
    const before = readFileSync(own);
    const link = `${dir}/own-link.db`;
    symlinkSync(own, link);
    for (const target of [own, link, `${own}-wal`, `${dir}/./${basename(own)}`]) {
      const r = cli(['export', own, 'alpha', '--out', target, '--force']);
      assert.equal(r.code, 2, `${target}: ${r.stderr}`);
      assert.match(r.stderr, /is the store this command reads .*; write to another file/);
    }
    assert.deepEqual(readFileSync(own), before, 'the store is untouched');
    assert.deepEqual(cli(['sessions', own, '--json']).code, 0);
    const anchors = `${dir}/own.anchors.jsonl`;
    writeFileSync(anchors, '');
    const r = cli(['export', own, 'alpha', '--format', 'chain', '--anchors', anchors, '--out', anchors, '--force']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /is the anchors file this command reads/);
  });

  it('never exports a corrupt journal, and leaves no file behind (exit 1)', async () => {
    const damaged = tempDbPath(dir, 'damaged');
    await writeStore(damaged, { alpha: alphaHistory() });
    tamper(damaged, `UPDATE jw_events SET body = replace(body, 'Place', 'Plaice') WHERE seq = 0`);
    const out = `${dir}/damaged.jsonl`;
    const r = cli(['export', damaged, 'alpha', '--out', out]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /journal corrupt: session alpha, seq 0, reason hash_mismatch/);
    assert.equal(existsSync(out), false);
    assert.equal(cli(['export', damaged, 'alpha']).stdout, '');
  });

  it('a file that cannot be written: exit 3', () => {
    const r = cli(['export', path, 'alpha', '--out', `${dir}/no-such-dir/alpha.jsonl`]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /cannot write/);
  });
});

describe('jingwei import', () => {
  it('round trip: export from one store, import into a new file, same journal; inspect works on it', () => {
    return (async () => {
      const source = tempDbPath(dir, 'source');
      await writeStore(source, { alpha: alphaHistory() });
      const file = `${dir}/roundtrip.jsonl`;
      assert.equal(cli(['export', source, 'alpha', '--out', file]).code, 0);
      const target = tempDbPath(dir, 'target');
      const r = cli(['import', target, file]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^Imported 10 events into session alpha: verified, stored with a fresh hash chain, and left released\.\n/);
      assert.match(r.stdout, /Calls needing attention: 3 \(1 needs_review, 2 retry_allowed\)\. Run: jingwei inspect .* alpha$/m);
      assert.equal(cli(['export', target, 'alpha']).stdout, readFileSync(file, 'utf8'));
      assert.equal(cli(['verify', target, 'alpha']).code, 0);
      const again = cli(['import', target, file]);
      assert.equal(again.code, 1, 'a session that has events is never overwritten');
      assert.match(again.stderr, /session_exists/);
    })();
  });

  it("imports the JSONL of Jingwei for Rust: legacy and unflagged calls are assessed by the category rules, and it exports back byte for byte", () => {
    const file = `${dir}/rust.jsonl`;
    writeFileSync(file, RUST_JOURNAL);
    const target = tempDbPath(dir, 'rust');
    const r = cli(['import', target, file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, new RegExp(`Imported 8 events into session ${SESSION}`));
    assert.match(r.stdout, /Calls needing attention: 2 \(1 needs_review, 1 retry_allowed\)/);
    assert.equal(cli(['export', target, SESSION]).stdout, RUST_JOURNAL);

    const inspect = cli(['inspect', target, SESSION]);
    assert.equal(inspect.code, 1);
    assert.match(inspect.stdout, /^mcall_legacy\s+search_flights\s+legacy\s+outcome_unknown\s+legacy\s+legacy call without an operation/m);
    assert.match(inspect.stdout, /^toolcall_pay\s+pay\s+non_idempotent\s+outcome_unknown\s+needs_review\s+outcome unknown \(no result\)/m);
    assert.match(inspect.stdout, /^toolcall_book\s+book\s+idempotent\s+outcome_unknown\s+retry_allowed\s+outcome unknown \(body_failure recorded; the body may have run\)/m);
    const pay = cli(['inspect', target, SESSION, 'toolcall_pay']);
    assert.match(pay.stdout, /records no start marker \(not the canonical runtime\)/);
    assert.match(pay.stdout, /retry\/needs_review: /);
    const legacy = cli(['inspect', target, SESSION, 'mcall_legacy']);
    assert.equal(legacy.code, 0, 'a legacy call cannot be acted on');
    assert.match(legacy.stdout, /retry\/legacy: An old ToolCall without the operation field → No trustworthy stable key/);
    const events = cli(['events', target, SESSION]);
    assert.match(events.stdout, /^\s*7\s+-\s+…0a1b2c3d\s+done\s+\(kept as is, not interpreted\) \{"status":"checkpointed"\}$/m);
  });

  it('reads standard input for -, and --session refuses a journal of another session', () => {
    const target = tempDbPath(dir, 'stdin');
    const wrong = cli(['import', target, '-', '--session', 'someone-else'], { input: RUST_JOURNAL });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /import_rejected: line 1: the journal belongs to session/);
    assert.equal(existsSync(target), false, 'a file of another session creates nothing');
    const r = cli(['import', target, '-', '--session', SESSION], { input: RUST_JOURNAL });
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Imported 8 events/);
  });

  it('rejects a bad file with its first bad line (exit 1) and creates no store', () => {
    const cases: Array<[string, RegExp]> = [
      [RUST_JOURNAL.split('\n').filter((_, i) => i !== 2).join('\n'), /line 3: event 2 has seq 3, expected 2/],
      [RUST_JOURNAL.replace('"seq":5', '"seq":"5"'), /line 6:/],
      ['{"not":"an event"}\n', /line 1:/],
      ['', /line 1: the journal is empty/],
      // Recorded times that go back: refused by line like every other problem of the file, not as a usage error.
      [timed(['2026-12-01T10:00:00.000Z', '2026-12-01T10:00:01.000Z', '2026-12-01T10:00:02.000Z', '2020-01-01T00:00:00.000Z']),
        /^error: jingwei import: import_rejected: line 4: event 3: recorded_at 2020-01-01T00:00:00\.000Z is earlier than the event before it \(2026-12-01T10:00:02\.000Z\)/],
      // A record the store cannot journal: refused by line too, before the store exists.
      [RUST_JOURNAL.replace('"amount":120', '"amount":1e20'), /^error: jingwei import: import_rejected: line 4: event 3: cannot be journaled: the integer 100000000000000000000/],
    ];
    for (const [text, message] of cases) {
      const file = `${dir}/bad-${Math.random().toString(16).slice(2)}.jsonl`;
      writeFileSync(file, text);
      const target = tempDbPath(dir, 'never');
      const r = cli(['import', target, file]);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /import_rejected/);
      assert.match(r.stderr, message);
      assert.equal(existsSync(target), false, 'a rejected file creates nothing');
    }
    const binary = `${dir}/binary.jsonl`;
    writeFileSync(binary, Buffer.from([0x7b, 0xff, 0xfe, 0x7d, 0x0a]));
    const b = cli(['import', tempDbPath(dir, 'never'), binary]);
    assert.equal(b.code, 1);
    assert.match(b.stderr, /not valid UTF-8/);
  });

  it('a missing file: exit 3', () => {
    const r = cli(['import', tempDbPath(dir, 'x'), `${dir}/nope.jsonl`]);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /cannot read .*nope\.jsonl/);
  });
});
