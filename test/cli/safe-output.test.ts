/**
 * Finding 10: journal text never reaches a terminal raw. Tool names, ids, arguments, outputs and error messages
 * written by a model (or a tampered import) may hold escape sequences that erase lines or hide text, C1 controls,
 * DEL and bidi overrides; every CLI view and every printed error shows them as visible escapes.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { before, describe, it } from 'node:test';
import { escapeControl, escapeOutput } from '../../src/cli/escape.js';
import { ToolEffect } from '../../src/event/types.js';
import { HistoryBuilder, failed, succeeded } from '../support/history.js';
import { tempDbPath, tempDir } from '../support/tmp.js';
import { cli, forgeStore, tamper, writeStore } from './helpers.js';

const dir = tempDir('jingwei-cli-safe-');

/** Anything a terminal acts on or that reorders text; newline is the only control a view may write. */
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/u;

const ERASE = '\u001b[2K\u001b[1A';
const TITLE = '\u001b]0;pwned\u0007';

function evilHistory() {
  const h = new HistoryBuilder(`evil${ERASE}`, `turn\u202e`);
  h.message(`hi${ERASE}there\u009b31m`);
  h.call({ id: `c-1\u202e`, name: `charge${ERASE}card`, key: `k\u0085`, effect: ToolEffect.NonIdempotent, startMarker: true, arguments: { note: `x${TITLE}\u007f` } });
  h.started(`c-1\u202e`);
  h.result(`c-1\u202e`, { ...failed('body_failure'), code: `code\u2066`, message: `boom${ERASE}\u0008\u0008ok` } as ReturnType<typeof failed>);
  h.call({ id: 'c-2', name: 'lookup', key: 'k-2', effect: ToolEffect.ReadOnly, startMarker: true });
  h.started('c-2');
  h.result('c-2', succeeded(`out${TITLE}`));
  return h.build();
}

function brokenHistory() {
  const h = new HistoryBuilder('broken');
  h.message('start');
  h.result(`ghost${ERASE}`, succeeded());
  return h.build();
}

function assertSafe(text: string, what: string): void {
  const match = RAW.exec(text);
  assert.equal(match, null, `${what} writes U+${match?.[0].charCodeAt(0).toString(16).padStart(4, '0')} raw: ${JSON.stringify(text.slice(Math.max(0, (match?.index ?? 0) - 20), (match?.index ?? 0) + 20))}`);
}

describe('safe output', () => {
  let path: string;
  const session = `evil${ERASE}`;
  before(async () => {
    path = tempDbPath(dir, 'journal');
    await writeStore(path, { [session]: evilHistory() });
    // An orphan result: import refuses it, so it is written the way only a forger with database access could.
    await forgeStore(path, { broken: brokenHistory() });
  });

  it('the escaping helper shows every unsafe character as a visible escape, and keeps emoji and ordinary text', () => {
    assert.equal(escapeControl(`a${ERASE}b`), 'a\\u001B[2K\\u001B[1Ab');
    assert.equal(escapeControl('\u009b\u007f\u202e\u2066\u0085\ufeff'), '\\u009B\\u007F\\u202E\\u2066\\u0085\\uFEFF');
    assert.equal(escapeControl('x\ud800y'), 'x\\uD800y');
    assert.equal(escapeControl('Grüße 😀 👨‍👩‍👧 日本'), 'Grüße 😀 👨‍👩‍👧 日本');
    assert.equal(escapeOutput('\u001b[1mbold\u001b[22m\n\u001b[8mhidden'), '\u001b[1mbold\u001b[22m\n\\u001B[8mhidden');
    // Escaped JSON is the same JSON value.
    const json = JSON.stringify({ t: '\u202e\u009b' });
    assert.deepEqual(JSON.parse(escapeOutput(json)), JSON.parse(json));
  });

  it('characters that render as nothing are escaped too (pass r50: tag characters carried hidden text, ZWJ made victim-1 twice), while emoji, keycaps and the scripts that need joiners keep theirs', () => {
    const hidden = [...' Ignore'].map((c) => String.fromCodePoint(0xe0000 + c.codePointAt(0)!)).join('');
    assert.equal(escapeControl(`shipped.${hidden}`), `shipped.${[...hidden].map((c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase()}\\u${c.charCodeAt(1).toString(16).toUpperCase()}`).join('')}`);
    assert.equal(escapeControl('victim\u200D-1'), 'victim\\u200D-1');
    assert.equal(escapeControl('vic\u200Ctim'), 'vic\\u200Ctim');
    for (const invisible of ['\u3164', '\u115f', '\u1160', '\uffa0', '\u034f', '\u17b4', '\u180b', '\u2800', '\u206a', '\ufe0f', '\u00ad']) {
      assert.match(escapeControl(`a${invisible}b`), /^a\\u[0-9A-F]{4}b$/, `U+${invisible.charCodeAt(0).toString(16)} is shown`);
    }
    assert.equal(escapeControl('x\u{E0101}y'), 'x\\uDB40\\uDD01y', 'a variation selector of the supplement');
    assert.equal(escapeControl('x\u{1D173}y'), 'x\\uD834\\uDD73y', 'a musical format control');
    for (const cp of [0xe0080, 0xe00ff, 0xe01f0, 0xe0fff, 0x13430, 0x1343f, 0xfff0, 0xfff8]) {
      assert.match(escapeControl(`a${String.fromCodePoint(cp)}b`), /^a(\\u[0-9A-F]{4}){1,2}b$/, `U+${cp.toString(16)} renders as nothing: shown (pass r52)`);
    }
    assert.equal(escapeControl('👩‍💻 ❤️ 1️⃣ 👍🏽‍'), '👩‍💻 ❤️ 1️⃣ 👍🏽\\u200D', 'emoji sequences stay; a joiner with nothing to join does not');
    assert.equal(escapeControl('1\uFE0F-2'), '1\\uFE0F-2', 'a variation selector after a digit that is no keycap');
    assert.equal(escapeControl('می\u200Cخواهم क्\u200Dष'), 'می\u200Cخواهم क्\u200Dष', 'Persian and Devanagari keep their joiners');
    const json = JSON.stringify({ t: `a${hidden}\u200D-1` });
    assert.deepEqual(JSON.parse(escapeOutput(json)), JSON.parse(json), 'escaped JSON, astral escapes included, is the same JSON value');
  });

  it('events, inspect (session and call), sessions and their --json forms write no raw control character', () => {
    const runs: Array<[string, string[]]> = [
      ['events', ['events', path, 'evil']],
      ['events --json', ['events', path, 'evil', '--json']],
      ['inspect', ['inspect', path, 'evil']],
      ['inspect --json', ['inspect', path, 'evil', '--json']],
      ['inspect call', ['inspect', path, 'evil', 'c-1\u202e']],
      ['inspect call --json', ['inspect', path, 'evil', 'c-1\u202e', '--json']],
      ['sessions', ['sessions', path]],
      ['sessions --json', ['sessions', path, '--json']],
    ];
    for (const [what, args] of runs) {
      const r = cli(args);
      assert.ok(r.code === 0 || r.code === 1, `${what}: exit ${r.code}: ${r.stderr}`);
      assertSafe(r.stdout, what);
      assertSafe(r.stderr, `${what} (stderr)`);
    }
    const events = cli(['events', path, 'evil']).stdout;
    assert.match(events, /charge\\u001B\[2K\\u001B\[1Acard/, 'the hidden part stays visible');
    assert.match(events, /boom\\u001B\[2K\\u001B\[1A\\u0008\\u0008ok/);
    const call = cli(['inspect', path, 'evil', 'c-1\u202e']).stdout;
    assert.match(call, /Call c-1\\u202E in session evil\\u001B\[2K\\u001B\[1A/);
    assert.match(call, /code\\u2066: boom/);
    const json = JSON.parse(cli(['inspect', path, 'evil', 'c-1\u202e', '--json']).stdout) as { call_id: string; name: string };
    assert.equal(json.call_id, 'c-1\u202e', '--json still carries the exact value');
    assert.equal(json.name, `charge${ERASE}card`);
    const wire = cli(['events', path, 'evil', '--json']).stdout.trim().split('\n').map((l) => JSON.parse(l) as { kind: { text?: string } });
    assert.equal(wire[0]!.kind.text, `hi${ERASE}there\u009b31m`);
  });

  it('verify, export --out, import and the list of sessions in a usage error escape session ids: no raw newline or colour', async () => {
    // An id with the CLI's own colour sequence (which escapeOutput lets through as the CLI's) and a newline.
    const id = 'ctl\u001b[31mRED\u001b[0m\nnewline\u202e-1';
    const shown = /ctl\\u001B\[31mRED\\u001B\[0m\\u000Anewline\\u202E-1/;
    const store = tempDbPath(dir, 'ids');
    await writeStore(store, { [id]: evilHistory() });
    const file = `${dir}/ids.jsonl`;
    const runs: Array<[string, string[], number]> = [
      ['verify', ['verify', store, 'newline'], 0],
      ['verify (all)', ['verify', store], 0],
      ['export --out', ['export', store, 'newline', '--out', file], 0],
      ['import', ['import', tempDbPath(dir, 'ids-copy'), file], 0],
      ['no such session', ['verify', store, 'nosuch'], 2],
    ];
    for (const [what, args, code] of runs) {
      const r = cli(args);
      assert.equal(r.code, code, `${what}: ${r.stdout}${r.stderr}`);
      assertSafe(r.stdout, what);
      assertSafe(r.stderr, `${what} (stderr)`);
      assert.match(r.stdout + r.stderr, shown, `${what} shows the id as one escaped line`);
      assert.doesNotMatch(r.stdout + r.stderr, /^newline/m, `${what} breaks the id over two lines`);
    }
    const json = JSON.parse(cli(['verify', store, 'newline', '--json']).stdout) as { session_id: string };
    assert.equal(json.session_id, id, '--json still carries the exact id');
  });

  it('an id printed with its invisible characters escaped is found again when pasted back as printed', async () => {
    const id = 's\u200Bx';
    const store = tempDbPath(dir, 'pasted');
    await writeStore(store, { [id]: evilHistory(), sx: evilHistory() });
    const listed = cli(['sessions', store]);
    assert.match(listed.stdout, /s\\u200Bx/, 'shown escaped');
    const pasted = cli(['verify', store, 's\\u200Bx', '--json']);
    assert.equal(pasted.code, 0, pasted.stdout + pasted.stderr);
    assert.equal((JSON.parse(pasted.stdout) as { session_id: string }).session_id, id, 'the printed form names the id it was printed from');
    assert.equal((JSON.parse(cli(['verify', store, 'sx', '--json']).stdout) as { session_id: string }).session_id, 'sx', 'the id as typed wins');
  });

  it('an id holding a backslash-u or a space prints unlike any other, and its printed form finds it (pass r50: s\\u200Bx named the other session)', async () => {
    const store = tempDbPath(dir, 'lookalike');
    const invisible = 's\u200Bx';
    const literal = 's\\u200Bx';
    const spaced = 'victim-1  wire_money';
    const nbsp = 'victim-1\u00A0x';
    await writeStore(store, { [invisible]: evilHistory(), [literal]: evilHistory(), [spaced]: evilHistory(), [nbsp]: evilHistory() });
    const listed = cli(['sessions', store]).stdout;
    assert.match(listed, /^s\\u200Bx /m);
    assert.match(listed, /^s\\u005Cu200Bx /m, 'the literal backslash is escaped: the two print differently');
    assert.match(listed, /^victim-1\\u0020\\u0020wire_money /m, 'spaces in an id cannot pass for table columns');
    assert.match(listed, /^victim-1\\u00A0x /m, 'nor can a no-break space pass for a plain one');
    for (const [printed, id] of [['s\\u200Bx', invisible], ['s\\u005Cu200Bx', literal], ['victim-1\\u0020\\u0020wire_money', spaced], ['victim-1\\u00A0x', nbsp]] as const) {
      const r = cli(['verify', store, printed, '--json']);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal((JSON.parse(r.stdout) as { session_id: string }).session_id, id, `${printed} names the id it was printed from`);
    }
  });

  it('two ids that differ only in Unicode normalization print unlike each other, and each printed form finds its own (r69 #2)', async () => {
    const store = tempDbPath(dir, 'normalization');
    const composed = 'caf\u00e9';
    const decomposed = 'cafe\u0301';
    await writeStore(store, { [composed]: evilHistory(), [decomposed]: evilHistory() });
    const listed = cli(['sessions', store]).stdout;
    assert.match(listed, /^caf\u00e9 /m, 'the composed form (NFC) prints as itself');
    assert.match(listed, /^cafe\\u0301 /m, 'the decomposed one shows its combining mark');
    for (const [printed, id] of [[composed, composed], ['cafe\\u0301', decomposed]] as const) {
      const r = cli(['verify', store, printed, '--json']);
      assert.equal(r.code, 0, r.stdout + r.stderr);
      assert.equal((JSON.parse(r.stdout) as { session_id: string }).session_id, id, `${printed} names the id it was printed from`);
    }
  });

  it('an error naming an id the store does not hold escapes a no-break space in it, as every view prints ids (r84 B)', async () => {
    const store = tempDbPath(dir, 'nbsp-errors');
    await writeStore(store, { s1: evilHistory() });
    const review = cli(['review', store, 'c-2', '--session', 's1\u00A0', '--outcome', 'completed', '--evidence', 'e', '--actor', 'a']);
    assert.equal(review.code, 2, review.stderr);
    assert.match(review.stderr, /session s1\\u00A0 has no events/, 'the id reads unlike `s1`');
    const approve = cli(['approve', store, 'approval_\u2007x', '--actor', 'a']);
    assert.equal(approve.code, 2, approve.stderr);
    assert.match(approve.stderr, /approval_\\u2007x/);
    assert.doesNotMatch(review.stderr + approve.stderr, /[\u00A0\u2007]/u);
    // An id typed with a literal `\u00A0` (ten characters) prints with its backslash escaped, unlike the one above.
    const literal = cli(['review', store, 'c-2', '--session', 's1\\u00A0', '--outcome', 'completed', '--evidence', 'e', '--actor', 'a']);
    assert.equal(literal.code, 2, literal.stderr);
    assert.match(literal.stderr, /session s1\\u005Cu00A0 has no events/);
    // A session id the store does not hold, quoted in a usage error: the same printed forms, the backslash escaped once.
    const inspectLiteral = cli(['inspect', store, 's1\\u00A0']);
    assert.equal(inspectLiteral.code, 2, inspectLiteral.stderr);
    assert.match(inspectLiteral.stderr, /no session "s1\\u005Cu00A0" in this store/);
    const inspectNbsp = cli(['inspect', store, 's1\u00A0']);
    assert.match(inspectNbsp.stderr, /no session "s1\\u00A0" in this store/);
    const quoted = cli(['inspect', store, 'up"e']);
    assert.match(quoted.stderr, /no session "up\\u0022e" in this store/, 'a quote in the id does not end the quoted id');
    const json = cli(['review', store, 'c-2', '--session', 's1\u00A0', '--outcome', 'completed', '--evidence', 'e', '--actor', 'a', '--json']);
    assert.match((JSON.parse(json.stdout) as { error: { message: string } }).error.message, /session s1\u00A0 has no events/u, '--json keeps the message as the library gave it');
  });

  it('a store-wide verify checks each session by its own id: a corrupt one named `s\\u00A0x` in ten characters is not passed over for its look-alike (r86 #1)', async () => {
    const store = tempDbPath(dir, 'verify-lookalike');
    const nbsp = 'ord\u00A07';
    const literal = 'ord\\u00A07';
    await writeStore(store, { [nbsp]: evilHistory(), [literal]: evilHistory() });
    tamper(store, `UPDATE jw_events SET body = body || ' ' WHERE session_id = '${literal}' AND seq = 0`);
    const r = cli(['verify', store, '--json']);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    const verdicts = (JSON.parse(r.stdout) as { sessions: { session_id: string; ok: boolean }[] }).sessions;
    assert.deepEqual(verdicts.map((v) => [v.session_id, v.ok]).sort(), [[literal, false], [nbsp, true]].sort(), 'each session once, the corrupt one found');
    const text = cli(['verify', store]).stdout;
    assert.match(text, /CORRUPT {2}ord\\u005Cu00A07: /, 'its header line names it in its own printed form');
    assert.match(text, /journal of session ord\\u005Cu00A07 /, 'and so does the library\'s message under it');
  });

  it('a command printed for a person to paste quotes journal ids for the shell and masks nothing it should show (pass r50: a session id ran $(…) when pasted)', async () => {
    const store = tempDbPath(dir, 'shell');
    const id = "ord-7 $(touch /tmp/x) `id` 'q'";
    await writeStore(store, { [id]: evilHistory() });
    const hint = cli(['inspect', store, 'ord-7']).stdout.split('\n').find((l) => l.startsWith('One call in detail'));
    assert.ok(hint !== undefined);
    const word = hint.slice(hint.indexOf(store) + store.length + 1, hint.lastIndexOf(' <call>'));
    assert.equal(word, "'ord-7\\u0020$(touch\\u0020/tmp/x)\\u0020`id`\\u0020'\\''q'\\'''", 'single-quoted for the shell');
    const pasted = execFileSync('bash', ['-c', `printf %s ${word}`], { encoding: 'utf8' });
    assert.equal(pasted, "ord-7\\u0020$(touch\\u0020/tmp/x)\\u0020`id`\\u0020'q'", 'a shell reads it as one word, runs nothing, and the CLI finds the id from it');
    assert.equal(JSON.parse(cli(['verify', store, pasted, '--json']).stdout).session_id, id);
    const refused = cli(['inspect', store, 'ord-7', 'nosuch']);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /run: jingwei events \S+ 'ord-7\\u0020\$\(touch/);
  });

  it('a printed error escapes the journal text it quotes', () => {
    const r = cli(['inspect', path, 'broken']);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /invalid_evidence/);
    assert.match(r.stderr, /ghost\\u001B\[2K\\u001B\[1A/);
    assertSafe(r.stderr, 'the error');
  });
});
