/**
 * Signed anchors against the tampering an attacker with write access to the database can do: each change below is
 * made through a raw connection with the hash chain recomputed, so plain `jingwei verify` passes it, and
 * `jingwei verify --key … --anchors …` names what is wrong.
 */
import assert from 'node:assert/strict';
import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, truncateSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { openSqliteStore } from '../../src/sqlite.js';
import { chainHash, GENESIS_HASH } from '../../src/store/chain.js';
import { fileAnchorSink, parseCheckpoints } from '../../src/store/anchors.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { alphaHistory, cli } from './helpers.js';
import { commitAs } from '../../src/store/owner-commit.js';
import { decodeEventText } from '../../src/event/codec.js';
import type { SessionId } from '../../src/ids.js';
import { attentionWrites } from '../../src/store/attention.js';
import { latestAttempts } from '../../src/store/index-check.js';
import { ATTENTION_COLUMNS, attentionValues } from '../../src/store/sql-rows.js';

const dir = tempDir('jingwei-cli-anchors-');
const keys = generateKeyPairSync('ed25519');
const PUBLIC = join(dir, 'anchor.pub.pem');
writeFileSync(PUBLIC, keys.publicKey.export({ type: 'spki', format: 'pem' }) as string);

let n = 0;
/** `alpha` written one event per commit by an anchored owner; returns the journal and its anchor file. */
async function anchoredJournal(privateKey: KeyObject = keys.privateKey): Promise<{ path: string; anchors: string }> {
  n += 1;
  const path = tempDbPath(dir, 'anchored');
  const anchors = join(dir, `anchors-${n}.jsonl`);
  const store = openSqliteStore(path);
  try {
    const owner = await store.acquire('alpha', { owner: 'host', anchor: { privateKey, sink: fileAnchorSink(anchors) } });
    // One event per commit, each anchored: the runtime's own write path (append takes host events only).
    for (const e of alphaHistory()) await commitAs(owner, { events: [{ eventId: e.eventId, turnId: e.turnId, kind: e.kind }] });
    await owner.release();
  } finally {
    await store.close();
  }
  return { path, anchors };
}

interface Row { seq: number; event_id: string; epoch: number; body: string }

/**
 * Rewrites the session's rows through a raw connection: `edit` returns the new rows; seq, hashes and the owner row
 * are recomputed, and so are the lookup rows beside the chain (its attention index and operation rows), which
 * `jingwei verify` compares with the chain, unless `lookupRows` is `left` (a forger who forgot them).
 */
function rewrite(path: string, edit: (rows: Row[]) => Row[], lookupRows: 'rebuilt' | 'left' = 'rebuilt'): void {
  const db = new Database(path);
  try {
    db.transaction(() => {
      const rows = db.prepare("SELECT seq, event_id, epoch, body FROM jw_events WHERE session_id = 'alpha' ORDER BY seq").all() as Row[];
      const next = edit(rows);
      db.prepare("DELETE FROM jw_events WHERE session_id = 'alpha'").run();
      let hash = GENESIS_HASH;
      let bytes = 0;
      // A thorough forger keeps the owner row's totals in step too: the bytes, and the last recorded time.
      let recordedAt: number | null = null;
      const insert = db.prepare('INSERT INTO jw_events (session_id, seq, event_id, epoch, body, hash) VALUES (?, ?, ?, ?, ?, ?)');
      next.forEach((row, seq) => {
        const wire = JSON.parse(row.body) as { seq: number; recorded_at?: string };
        wire.seq = seq;
        if (wire.recorded_at !== undefined) recordedAt = Date.parse(wire.recorded_at);
        const body = JSON.stringify(wire);
        hash = chainHash(hash, row.epoch, body);
        bytes += Buffer.byteLength(body);
        insert.run('alpha', seq, row.event_id, row.epoch, body, hash);
      });
      db.prepare("UPDATE jw_sessions SET last_seq = ?, head_hash = ?, body_bytes = ?, recorded_at = ? WHERE session_id = 'alpha'").run(next.length - 1, hash, bytes, recordedAt);
      if (lookupRows === 'left') return;
      const bodies = db.prepare("SELECT body FROM jw_events WHERE session_id = 'alpha' ORDER BY seq").pluck().all() as string[];
      const events = bodies.map((body) => decodeEventText(body));
      db.prepare("DELETE FROM jw_attention WHERE session_id = 'alpha'").run();
      const attention = db.prepare(`INSERT INTO jw_attention (${ATTENTION_COLUMNS}) VALUES (${ATTENTION_COLUMNS.split(', ').map(() => '?').join(', ')})`);
      for (const row of attentionWrites('alpha' as SessionId, events)) attention.run(...attentionValues(row, (b) => (b ? 1 : 0)));
      db.prepare("DELETE FROM jw_operations WHERE session_id = 'alpha'").run();
      const operation = db.prepare('INSERT INTO jw_operations (task_id, key, session_id, call_id, event_id) VALUES (?, ?, ?, ?, ?)');
      for (const op of latestAttempts(events).values()) operation.run(op.taskId, op.key, 'alpha', op.callId, op.eventId);
    })();
  } finally {
    db.close();
  }
}

interface Tampered { session_id: string; ok: false; anchor: { seq: number; reason: string; message: string } }

function expectTampered(path: string, anchors: string, seq: number, reason: string): void {
  const plain = cli(['verify', path, 'alpha']);
  assert.equal(plain.code === 0 || plain.code === 1, true, plain.stderr);
  const r = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
  assert.equal(r.code, 1, r.stdout + r.stderr);
  assert.match(r.stdout, new RegExp(`^TAMPERED alpha: seq ${seq}, reason ${reason}\\n`));
  const json = JSON.parse(cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors, '--json']).stdout) as Tampered;
  assert.equal(json.ok, false);
  assert.equal(json.anchor.seq, seq);
  assert.equal(json.anchor.reason, reason);
}

describe('jingwei verify --key --anchors', () => {
  it('an untouched anchored journal verifies, and says what was checked; without a key it says integrity only', async () => {
    const { path, anchors } = await anchoredJournal();
    // acquire, then one checkpoint per commit: the release adds none, everything is anchored already.
    assert.equal(parseCheckpoints(readFileSync(anchors, 'utf8')).length, 1 + alphaHistory().length);
    const r = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /anchors verified: 11 signed checkpoints, anchored up to seq 9/);
    const json = JSON.parse(cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors, '--json']).stdout) as Record<string, unknown>;
    assert.equal(json.checked, 'integrity_and_anchors');
    const plain = cli(['verify', path, 'alpha']);
    assert.equal(plain.code, 0);
    assert.match(plain.stdout, /integrity only: no --key given, so the journal was not checked against signed anchors/);
    assert.equal((JSON.parse(cli(['verify', path, 'alpha', '--json']).stdout) as Record<string, unknown>).checked, 'integrity_only');
  });

  it('dropping a start marker and recomputing the chain turns a charge into retry_allowed; the anchors name the seq', async () => {
    // A forger who recomputes the chain but leaves the lookup rows is named without anchors: the charge's attention
    // row still says its body started.
    const half = await anchoredJournal();
    rewrite(half.path, (rows) => rows.filter((r) => r.seq !== 8), 'left');
    const caught = cli(['verify', half.path, 'alpha']);
    assert.equal(caught.code, 1, caught.stdout + caught.stderr);
    assert.match(caught.stdout, /^CORRUPT {2}alpha: seq 7, reason attention_index\n.*has started true; the chain gives false/s);
    const { path, anchors } = await anchoredJournal();
    // seq 8 is c-pay's tool_started: without it the non-idempotent charge would look not executed.
    rewrite(path, (rows) => rows.filter((r) => r.seq !== 8));
    const plain = cli(['verify', path, 'alpha']);
    assert.equal(plain.code, 0, 'the chain was recomputed, so integrity alone cannot tell');
    expectTampered(path, anchors, 8, 'rewritten');
  });

  it('a truncated journal: the missing anchored events are named', async () => {
    const { path, anchors } = await anchoredJournal();
    rewrite(path, (rows) => rows.slice(0, 7));
    assert.equal(cli(['verify', path, 'alpha']).code, 0);
    expectTampered(path, anchors, 7, 'truncated');
    assert.match(cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]).stdout, /anchored events seq 7\.\.9 are missing/);
  });

  it('a changed output: the first bad seq is named', async () => {
    const { path, anchors } = await anchoredJournal();
    rewrite(path, (rows) => rows.map((r) => (r.seq === 3 ? { ...r, body: r.body.replace('on_hand', 'in_hand') } : r)));
    assert.equal(cli(['verify', path, 'alpha']).code, 0);
    expectTampered(path, anchors, 3, 'rewritten');
  });

  it('a rolled-back epoch', async () => {
    const { path, anchors } = await anchoredJournal();
    const store = openSqliteStore(path);
    const again = await store.acquire('alpha', { owner: 'host-2', anchor: { privateKey: keys.privateKey, sink: fileAnchorSink(anchors) } });
    await again.release();
    await store.close();
    const db = new Database(path);
    db.prepare("UPDATE jw_sessions SET epoch = 1 WHERE session_id = 'alpha'").run();
    db.close();
    assert.equal(cli(['verify', path, 'alpha']).code, 0, 'every row is still at epoch 1, so integrity alone passes');
    expectTampered(path, anchors, 9, 'rolled_back');
  });

  it('a whole session deleted from the store is reported when every session is verified', async () => {
    const { path, anchors } = await anchoredJournal();
    const db = new Database(path);
    db.exec("DELETE FROM jw_events WHERE session_id = 'alpha'; DELETE FROM jw_sessions WHERE session_id = 'alpha'");
    db.close();
    const r = cli(['verify', path, '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^TAMPERED alpha: seq 0, reason truncated/m);
  });

  it('a checkpoint signed by another key is refused as anchor_invalid', async () => {
    const other = generateKeyPairSync('ed25519');
    const { path, anchors } = await anchoredJournal(other.privateKey);
    const r = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^TAMPERED alpha: reason bad_signature\n/);
    const json = JSON.parse(cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors, '--json']).stdout) as Tampered;
    assert.equal(json.anchor.reason, 'bad_signature');
  });

  it('a truncated -wal file loses acknowledged events: the anchors report them missing', async () => {
    n += 1;
    const path = tempDbPath(dir, 'wal');
    const anchors = join(dir, `anchors-wal-${n}.jsonl`);
    const sqlite = fileURLToPath(new URL('../../src/sqlite.js', import.meta.url));
    const anchorsModule = fileURLToPath(new URL('../../src/store/anchors.js', import.meta.url));
    const pem = keys.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    // A host that appends 50 acknowledged events and dies without closing: the events live in the -wal file.
    const script = `
      import { openSqliteStore } from ${JSON.stringify(sqlite)};
      import { fileAnchorSink } from ${JSON.stringify(anchorsModule)};
      const store = openSqliteStore(${JSON.stringify(path)});
      const owner = await store.acquire('alpha', { owner: 'host', anchor: { privateKey: ${JSON.stringify(pem)}, sink: fileAnchorSink(${JSON.stringify(anchors)}) } });
      for (let i = 0; i < 50; i++) await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'event ' + i } }]);
      process.exit(0);`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    const wal = `${path}-wal`;
    truncateSync(wal, Math.floor(statSync(wal).size / 2));
    const plain = cli(['verify', path, 'alpha']);
    assert.equal(plain.code, 0, 'SQLite silently stops at the last intact frame, so integrity alone passes');
    const r = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors, '--json']);
    const json = JSON.parse(r.stdout) as Tampered;
    assert.equal(json.anchor.reason, 'truncated');
    assert.ok(json.anchor.seq > 0 && json.anchor.seq < 50, `the first missing seq: ${json.anchor.seq}`);
    assert.match(json.anchor.message, new RegExp(`anchored events seq ${json.anchor.seq}\\.\\.49 are missing`));
  });

  it('a session the anchors file has no checkpoint of is UNANCHORED, not ok: a copy under a look-alike id is named beside the anchored one', async () => {
    const { path, anchors } = await anchoredJournal();
    // The journal copied under "alpha " (trailing space) with a changed output: its chain is intact and its own.
    const copy = cli(['export', path, 'alpha']).stdout.replaceAll('"session_id":"alpha"', '"session_id":"alpha "').replace('on_hand', 'in_hand');
    const imported = cli(['import', path, '-'], { input: copy });
    assert.equal(imported.code, 0, imported.stderr);
    assert.equal(cli(['verify', path, 'alpha ']).code, 0, 'integrity alone passes the copy');
    const r = cli(['verify', path, 'alpha ', '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.match(r.stdout, /^UNANCHORED alpha\\u0020: reason unanchored\n/, 'the trailing space is shown, not left to look like the anchored id');
    assert.match(r.stdout, /no signed checkpoint is of this id, "alpha "; the 11 checkpoints given are of "alpha"/);
    const json = JSON.parse(cli(['verify', path, 'alpha ', '--key', PUBLIC, '--anchors', anchors, '--json']).stdout) as Tampered;
    assert.deepEqual([json.ok, json.anchor.seq, json.anchor.reason], [false, -1, 'unanchored']);
    const all = cli(['verify', path, '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(all.code, 1, all.stdout);
    assert.match(all.stdout, /^ok {7}alpha: journal intact$/m);
    assert.match(all.stdout, /^UNANCHORED alpha\\u0020: reason unanchored$/m);
    assert.match(all.stdout, /2 sessions verified, 1 with problems\./);
  });

  it('a last line of the anchors file torn mid-append: the checkpoints before it are checked and the torn line named on stderr', async () => {
    const { path, anchors } = await anchoredJournal();
    const whole = readFileSync(anchors, 'utf8');
    const lines = whole.split('\n').filter((l) => l !== '');
    writeFileSync(anchors, whole + lines[lines.length - 1]!.slice(0, 50));
    const r = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /anchors verified: 11 signed checkpoints, anchored up to seq 9/);
    assert.match(r.stderr, /^warning: anchor file .*: line 12 has no newline and is not a whole checkpoint \(torn by an interrupted append\), so it was skipped$/m);
    // Cut short in the middle (the sink starts a new line after a torn tail, u126 #4): skipped and named too.
    writeFileSync(anchors, lines.slice(0, 5).join('\n') + '\n' + lines[5]!.slice(0, 50) + '\n' + lines.slice(5).join('\n') + '\n');
    const middle = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(middle.code, 0, middle.stdout + middle.stderr);
    assert.match(middle.stderr, /^warning: anchor file .*: line 6 ends before its checkpoint does \(torn by an interrupted append\), so it was skipped$/m);
    // Any other bad line is refused.
    writeFileSync(anchors, lines.slice(0, 5).join('\n') + '\n{"checkpoint":1}\n' + lines.slice(5).join('\n') + '\n');
    const refused = cli(['verify', path, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
    assert.notEqual(refused.code, 0, refused.stdout);
    assert.match(refused.stderr, /malformed.*line 6/);
  });

  it('--anchors without --key, and --key without --anchors, are usage errors', async () => {
    const { path, anchors } = await anchoredJournal();
    assert.equal(cli(['verify', path, '--anchors', anchors]).code, 2);
    assert.equal(cli(['verify', path, '--key', PUBLIC]).code, 2);
  });
});

describe('chained exports and jingwei import --key', () => {
  async function chained(): Promise<{ file: string; anchors: string }> {
    const { path, anchors } = await anchoredJournal();
    const file = join(dir, `alpha-${n}.chain.jsonl`);
    const r = cli(['export', path, 'alpha', '--format', 'chain', '--anchors', anchors, '--out', file]);
    assert.equal(r.code, 0, r.stderr);
    return { file, anchors };
  }

  function edit(file: string, change: (lines: string[]) => string[]): void {
    const lines = readFileSync(file, 'utf8').split('\n').filter((l) => l !== '');
    writeFileSync(file, change(lines).join('\n') + '\n');
  }

  /** Recomputes the trailer's hashes over the (edited) lines, as an attacker who knows the format would. */
  function rechain(lines: string[]): string[] {
    const events = lines.slice(0, -1);
    const trailer = JSON.parse(lines[lines.length - 1]!) as { jingwei_chain: { links: Array<[number, string]> } };
    let hash = GENESIS_HASH;
    trailer.jingwei_chain.links = events.map((line) => {
      hash = chainHash(hash, 1, line);
      return [1, hash];
    });
    return [...events, JSON.stringify(trailer)];
  }

  it('an untouched chained export imports with --key and --anchors', async () => {
    const { file, anchors } = await chained();
    const r = cli(['import', tempDbPath(dir, 'target'), file, '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Imported 10 events into session alpha/);
  });

  it('an edited line is refused by the chain trailer, even without a key', async () => {
    const { file } = await chained();
    edit(file, (lines) => lines.map((l, i) => (i === 3 ? l.replace('on_hand', 'in_hand') : l)));
    const r = cli(['import', tempDbPath(dir, 'target'), file]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /import_rejected: line 4: seq 3 does not match the chain hash recorded at export/);
  });

  it('an edit with recomputed hashes passes without a key and is refused with one', async () => {
    const { file, anchors } = await chained();
    edit(file, (lines) => rechain(lines.map((l, i) => (i === 3 ? l.replace('on_hand', 'in_hand') : l))));
    assert.equal(cli(['import', tempDbPath(dir, 'target'), file]).code, 0);
    const r = cli(['import', tempDbPath(dir, 'target'), file, '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /anchor_mismatch: session alpha at seq 3 \(rewritten\)/);
  });

  it('a truncated export that also dropped its checkpoints is caught by the anchor file', async () => {
    const { file, anchors } = await chained();
    edit(file, (lines) => {
      const trailer = JSON.parse(lines[lines.length - 1]!) as { jingwei_chain: { links: unknown[]; checkpoints: unknown[] } };
      trailer.jingwei_chain.links = trailer.jingwei_chain.links.slice(0, 5);
      trailer.jingwei_chain.checkpoints = [];
      return [...lines.slice(0, 5), JSON.stringify(trailer)];
    });
    // The file alone no longer claims more, so a key without the anchors kept outside it cannot vouch for it: refused.
    const alone = cli(['import', tempDbPath(dir, 'target'), file, '--key', PUBLIC]);
    assert.equal(alone.code, 2, alone.stdout);
    assert.match(alone.stderr, /--key needs --anchors <file>/);
    const r = cli(['import', tempDbPath(dir, 'target'), file, '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 1, r.stdout);
    assert.match(r.stderr, /\(truncated\): anchored events seq 5\.\.9 are missing/);
  });

  it('a rewritten export renamed to a look-alike session id, its checkpoints dropped, is refused as unanchored before any store exists', async () => {
    for (const lookalike of ['alpha ', 'alph\u0430', 'alpha\u2010']) {
      const { file, anchors } = await chained();
      edit(file, (lines) => {
        const renamed = rechain(lines.map((l) => l.replaceAll('"session_id":"alpha"', `"session_id":${JSON.stringify(lookalike)}`).replace('on_hand', 'in_hand')));
        const trailer = JSON.parse(renamed[renamed.length - 1]!) as { jingwei_chain: { checkpoints: unknown[] } };
        trailer.jingwei_chain.checkpoints = [];
        return [...renamed.slice(0, -1), JSON.stringify(trailer)];
      });
      assert.equal(cli(['import', tempDbPath(dir, 'target'), file]).code, 0, 'without a key, the recomputed trailer passes');
      const target = tempDbPath(dir, 'target');
      const r = cli(['import', target, file, '--key', PUBLIC, '--anchors', anchors]);
      assert.equal(r.code, 1, r.stdout);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /anchor_mismatch: session .* \(unanchored\): no signed checkpoint is of this id, ".*"; the 11 checkpoints kept outside the file are of "alpha"\n/);
      assert.equal(existsSync(target), false, 'a refused file creates nothing');
    }
  });

  it('events appended after the newest checkpoint are imported, and named as not anchored on stdout and stderr', async () => {
    const { file, anchors } = await chained();
    edit(file, (lines) => {
      const added = [10, 11].map((seq) => JSON.stringify({ event_id: `forged-${seq}`, session_id: 'alpha', turn_id: 'turn-a', seq, kind: { type: 'user_message', text: 'refund approved' } }));
      return rechain([...lines.slice(0, -1), ...added, lines[lines.length - 1]!]);
    });
    const target = tempDbPath(dir, 'target');
    const r = cli(['import', target, file, '--key', PUBLIC, '--anchors', anchors]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Imported 12 events into session alpha: .*\nAnchors verified: 11 signed checkpoints, anchored up to seq 9; 2 later events \(seq 10\.\.11\) not anchored\.\n/);
    assert.match(r.stderr, /^warning: 2 events \(seq 10\.\.11\) come after the newest signed checkpoint: no checkpoint vouches for them.*jingwei events .* alpha --from 10\n$/);
    // verify says the same of the stored copy.
    assert.match(cli(['verify', target, 'alpha', '--key', PUBLIC, '--anchors', anchors]).stdout, /anchored up to seq 9; 2 later events not anchored yet/);
    const untouched = await chained();
    const clean = cli(['import', tempDbPath(dir, 'target'), untouched.file, '--key', PUBLIC, '--anchors', untouched.anchors]);
    assert.match(clean.stdout, /Anchors verified: 11 signed checkpoints, anchored up to seq 9; every event is anchored\./);
    assert.equal(clean.stderr, '');
  });

  it('a session taken over moves with --key, verifies where it lands with the same anchors, and moves again', async () => {
    const { path, anchors } = await anchoredJournal();
    const store = openSqliteStore(path);
    const again = await store.acquire('alpha', { owner: 'host-2', takeover: true, anchor: { privateKey: keys.privateKey, sink: fileAnchorSink(anchors) } });
    await again.append([{ turnId: 'turn-b', kind: { type: 'user_message', text: 'after the takeover' } }]);
    await again.release();
    await store.close();
    const epochs = (db: string) => {
      const raw = new Database(db, { readonly: true });
      try {
        return raw.prepare("SELECT epoch FROM jw_events WHERE session_id = 'alpha' ORDER BY seq").pluck().all();
      } finally {
        raw.close();
      }
    };
    let from = path;
    for (const move of [1, 2]) {
      const file = join(dir, `moved-${n}-${move}.chain.jsonl`);
      assert.equal(cli(['export', from, 'alpha', '--format', 'chain', '--anchors', anchors, '--out', file]).code, 0);
      const target = tempDbPath(dir, 'moved');
      const r = cli(['import', target, file, '--key', PUBLIC, '--anchors', anchors]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /^Imported 11 events into session alpha: verified, stored with the file's hash chain and epochs, and left released\.\nAnchors verified: .*every event is anchored\./);
      assert.deepEqual(epochs(target), epochs(path), `move ${move}: the epochs that wrote each event are kept`);
      const verified = cli(['verify', target, 'alpha', '--key', PUBLIC, '--anchors', anchors]);
      assert.equal(verified.code, 0, `move ${move}: ${verified.stdout}${verified.stderr}`);
      from = target;
    }
  });

  it('a line this version stores in another form keeps its epoch but not its hash, and the import says so', async () => {
    const { file } = await chained();
    edit(file, (lines) => rechain(lines.map((l, i) => {
      if (i !== 3) return l;
      const { seq, ...rest } = JSON.parse(l) as { seq: number };
      return JSON.stringify({ ...rest, seq });
    })));
    const r = cli(['import', tempDbPath(dir, 'target'), file]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^Imported 10 events into session alpha: verified, stored with the file's epochs and a hash chain of its own from seq 3, and left released\.\n/);
    assert.match(r.stderr, /^warning: seq 3 and later are stored in the form this version writes, not as the file has them/);
  });

  it('a trailer whose epochs a store would refuse is refused by line, even without a key', async () => {
    const cases: Array<[string, (links: Array<[number, string]>, t: { epoch: number }) => void, RegExp]> = [
      ['an epoch 0', (links) => { links[0]![0] = 0; }, /line 1: the chain trailer gives seq 0 epoch 0/],
      ['a decreasing epoch', (links, t) => { links[4]![0] = 2; t.epoch = 2; }, /line 6: the chain trailer gives seq 5 epoch 1, after epoch 2/],
      ['an epoch past the owner\'s', (_links, t) => { t.epoch = 0; }, /line 1: the chain trailer gives seq 0 epoch 1, after epoch 1 and with the owner at epoch 0/],
    ];
    for (const [what, change, refusal] of cases) {
      const { file } = await chained();
      edit(file, (lines) => {
        const trailer = JSON.parse(lines[lines.length - 1]!) as { jingwei_chain: { epoch: number; links: Array<[number, string]> } };
        change(trailer.jingwei_chain.links, trailer.jingwei_chain);
        let hash = GENESIS_HASH;
        trailer.jingwei_chain.links = trailer.jingwei_chain.links.map(([epoch], i) => {
          hash = chainHash(hash, epoch, lines[i]!);
          return [epoch, hash];
        });
        return [...lines.slice(0, -1), JSON.stringify(trailer)];
      });
      const target = tempDbPath(dir, 'target');
      const r = cli(['import', target, file]);
      assert.equal(r.code, 1, `${what}: ${r.stdout}`);
      assert.match(r.stderr, refusal, what);
      assert.equal(existsSync(target), false, `${what}: a refused file creates nothing`);
    }
  });

  it('a plain export cannot be checked against a key', async () => {
    const { path } = await anchoredJournal();
    const file = join(dir, `plain-${n}.jsonl`);
    assert.equal(cli(['export', path, 'alpha', '--out', file]).code, 0);
    const anchorsFile = join(dir, `plain-anchors-${n}.jsonl`);
    writeFileSync(anchorsFile, '');
    const r = cli(['import', tempDbPath(dir, 'target'), file, '--key', PUBLIC, '--anchors', anchorsFile]);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /unanchored/);
  });
});
