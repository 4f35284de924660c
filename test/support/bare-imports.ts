import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** Every bare package name reachable from a compiled module through its relative imports (static or dynamic). */
export function bareImports(entry: string): Set<string> {
  const seen = new Set<string>();
  const bare = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const source = readFileSync(file, 'utf8');
    for (const match of source.matchAll(/(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
      const specifier = (match[1] ?? match[2])!;
      if (specifier.startsWith('.')) visit(resolve(dirname(file), specifier));
      else bare.add(specifier.startsWith('@') ? specifier.split('/').slice(0, 2).join('/') : specifier.split('/')[0]!);
    }
  };
  visit(entry);
  return bare;
}
