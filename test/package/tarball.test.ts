/**
 * The package as a user gets it: `npm pack`, then install the tarball into a fresh directory. Without the optional
 * drivers nothing native is built, no script of the package runs or is named by npm, the root entry works, and `jingwei/sqlite` says which package to install; with
 * `better-sqlite3` added, `jingwei/sqlite` opens, appends and loads. Also checks, by walking dist/, that the root
 * entry reaches neither driver and that no entry's published types need a driver's type package.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const DRIVERS = ['better-sqlite3', 'pg'];

/** The bare specifiers a module graph reaches from `entry`, following relative static and literal dynamic imports. */
function reachable(entry: string, options: { dynamic?: boolean } = {}): { files: Set<string>; bare: Set<string> } {
  const files = new Set<string>();
  const bare = new Set<string>();
  const pending = [entry];
  const specifiers = options.dynamic === false
    ? /(?:\bfrom\s*|\bimport\s+)['"]([^'"]+)['"]/g
    : /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"]([^'"]+)['"]/g;
  while (pending.length > 0) {
    const file = pending.pop()!;
    if (files.has(file)) continue;
    files.add(file);
    for (const match of readFileSync(file, 'utf8').matchAll(specifiers)) {
      const spec = match[1]!;
      if (spec.startsWith('.')) {
        let target = resolve(dirname(file), spec);
        if (file.endsWith('.d.ts')) target = target.replace(/\.js$/, '.d.ts');
        pending.push(target);
      } else {
        bare.add(spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]!);
      }
    }
  }
  return { files, bare };
}

describe('the module graph in dist/', () => {
  it('the root entry reaches neither driver, and only jingwei/testing loads node:test', () => {
    const main = reachable(join(root, 'dist/index.js'));
    for (const driver of DRIVERS) assert.ok(!main.bare.has(driver), `dist/index.js reaches ${driver}`);
    assert.ok(!main.bare.has('node:test'), 'the root entry loads node:test');
    for (const entry of ['backend.js', 'sqlite.js', 'postgres.js', 'ai-sdk.js', 'openai-agents.js', 'mcp.js']) {
      assert.ok(!reachable(join(root, 'dist', entry)).bare.has('node:test'), `dist/${entry} loads node:test`);
    }
    const testing = reachable(join(root, 'dist/testing/index.js'));
    assert.ok(testing.bare.has('node:test'));
    for (const driver of DRIVERS) assert.ok(!testing.bare.has(driver), `jingwei/testing reaches ${driver}`);
    assert.ok(reachable(join(root, 'dist/sqlite.js')).bare.has('better-sqlite3'));
    // The CLI loads a driver only when a command needs it, so it starts without either installed.
    const cli = reachable(join(root, 'dist/cli/main.js'), { dynamic: false });
    for (const driver of DRIVERS) assert.ok(!cli.bare.has(driver), `the CLI loads ${driver} at startup`);
    assert.ok(reachable(join(root, 'dist/postgres.js')).bare.has('pg'));
  });

  it("no entry's published types need a driver's type package", () => {
    for (const entry of ['index', 'backend', 'testing/index', 'sqlite', 'postgres']) {
      const types = reachable(join(root, 'dist', `${entry}.d.ts`));
      for (const driver of DRIVERS) assert.ok(!types.bare.has(driver), `dist/${entry}.d.ts needs ${driver}'s types`);
    }
  });
});

describe('the packed tarball in a fresh directory', { timeout: 15 * 60_000 }, () => {
  let work: string;
  let tarball: string;
  const npm = (args: string[], cwd: string) =>
    execFileSync('npm', [...args, '--no-audit', '--no-fund'], { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  const app = (name: string, allowDriverScripts: boolean): string => {
    const dir = join(work, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({
      name, private: true, type: 'module', ...(allowDriverScripts ? { allowScripts: { 'better-sqlite3': true } } : {}),
    }));
    return dir;
  };
  const run = (cwd: string, source: string) =>
    execFileSync(process.execPath, ['--input-type=module', '-e', source], { cwd, encoding: 'utf8' });

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'jingwei-pack-'));
    const out = npm(['pack', '--pack-destination', work, '--silent'], root).trim().split('\n').pop()!;
    tarball = join(work, out);
    assert.ok(existsSync(tarball), `npm pack wrote ${out}`);
  });
  after(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('installs no driver and builds nothing native; the root entry works; the driver entries name their package', () => {
    const dir = app('plain', false);
    // An install script of ours would run on every user's machine, and npm warns about each one it has not been
    // allowed to run: the published package has none.
    const install = spawnSync('npm', ['install', tarball, '--no-audit', '--no-fund'], { cwd: dir, encoding: 'utf8' });
    assert.equal(install.status, 0, install.stderr);
    assert.doesNotMatch(`${install.stdout}${install.stderr}`, /jingwei@[^\s]* \(/, 'npm names a script of jingwei');
    const { scripts = {} } = JSON.parse(readFileSync(join(dir, 'node_modules', 'jingwei', 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) assert.equal(scripts[hook], undefined, `the package has a ${hook} script`);
    for (const driver of DRIVERS) assert.equal(existsSync(join(dir, 'node_modules', driver)), false, `${driver} was installed`);
    const natives = readdirSync(join(dir, 'node_modules'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.node'));
    assert.deepEqual(natives, [], 'no native module in node_modules');
    const out = run(dir, `
      import { createToolRuntime, createMemoryStore } from 'jingwei';
      import { createJournalStore } from 'jingwei/backend';
      import { runStoreConformance } from 'jingwei/testing';
      const store = createMemoryStore();
      const owner = await store.acquire('s', { owner: 'h' });
      await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'hi' } }]);
      console.log(typeof createToolRuntime, typeof createJournalStore, typeof runStoreConformance, (await store.loadHistory('s')).length);
      for (const entry of ['jingwei/sqlite', 'jingwei/postgres']) {
        try { await import(entry); console.log(entry, 'loaded'); } catch (e) { console.log(entry, e.name, e.code, e.packageName); }
      }`);
    assert.deepEqual(out.trim().split('\n'), [
      'function function function 1',
      'jingwei/sqlite DriverMissingError driver_missing better-sqlite3',
      'jingwei/postgres DriverMissingError driver_missing pg',
    ]);
  });

  it('with better-sqlite3 installed beside it, jingwei/sqlite opens a journal, appends and loads', () => {
    const dir = app('with-sqlite', true);
    npm(['install', tarball, 'better-sqlite3@12.9'], dir);
    const journal = join(dir, 'journal.db');
    const out = run(dir, `
      import { openSqliteStore } from 'jingwei/sqlite';
      const store = openSqliteStore(${JSON.stringify(journal)});
      const owner = await store.acquire('s', { owner: 'h' });
      await owner.append([{ turnId: 't', kind: { type: 'user_message', text: 'hello' } }]);
      await store.close();
      const again = openSqliteStore(${JSON.stringify(journal)}, { mustExist: true });
      const history = await again.loadHistory('s');
      console.log(again.kind, history.length, history[0].kind.text);
      await again.close();`);
    assert.equal(out.trim(), 'sqlite 1 hello');
  });
});
