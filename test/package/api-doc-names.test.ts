/**
 * docs/api.md names the public API: every function, class, constant and type it sets in bold code must be exported,
 * as a value or a type, by some entry point of the built package, so a reader never imports a name that is not
 * there. Fields, methods and options (`store.attention(…)`, `Type.field`, `onEvent?: …`) are left to their types.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { it } from 'node:test';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const pkg = JSON.parse(readFileSync(`${root}package.json`, 'utf8')) as { exports: Record<string, string | { types?: string }> };

function exportedNames(): Set<string> {
  const files = Object.values(pkg.exports).flatMap((target) => (typeof target === 'object' && target.types ? [`${root}${target.types.slice(2)}`] : []));
  const program = ts.createProgram(files, { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, noEmit: true, skipLibCheck: true });
  const checker = program.getTypeChecker();
  const names = new Set<string>();
  for (const file of files) {
    const source = program.getSourceFile(file);
    const module = source ? checker.getSymbolAtLocation(source) : undefined;
    assert.ok(module, `${file} is a module`);
    for (const symbol of checker.getExportsOfModule(module)) names.add(symbol.name);
  }
  return names;
}

/** The name a bold code span of api.md documents as an export, or null for a field, a method or an option. */
function documentedName(span: string): string | null {
  const text = span.replace(/^(new|interface|class|type)\s+/, '');
  const match = /^([A-Za-z_][A-Za-z0-9_]*)(.?)/.exec(text);
  if (match === null) return null;
  const [, name, next] = match;
  if (next === '.' || next === '?' || next === ':') return null;
  // A lowercase word on its own is a field or a value (`location`, `jingweiHalted`); a call is a function.
  if (/^[a-z]/.test(name!) && next !== '(') return null;
  return name!;
}

it('every export docs/api.md names in bold code is exported by an entry point', () => {
  const exported = exportedNames();
  const doc = readFileSync(`${root}docs/api.md`, 'utf8');
  const missing = new Set<string>();
  let checked = 0;
  for (const [, span] of doc.matchAll(/\*\*`([^`]+)`\*\*/g)) {
    const name = documentedName(span!);
    if (name === null) continue;
    checked += 1;
    if (!exported.has(name)) missing.add(name);
  }
  assert.ok(checked > 100, `only ${checked} names were checked: is the pattern still right?`);
  assert.deepEqual([...missing].sort(), [], 'named in docs/api.md but exported by no entry point');
});
