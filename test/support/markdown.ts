/** Markdown helpers for the tests that check the documents: relative links and heading anchors, as GitHub makes them. */

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens; repeats get -1, -2, ... */
export function headingAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const match = fenced ? null : /^#{1,6} +(.*?) *#* *$/.exec(line);
    if (!match) continue;
    const base = match[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

export interface MarkdownLink {
  readonly line: number;
  /** The path part, relative to the document; '' for a link to an anchor of the same document. */
  readonly path: string;
  readonly anchor: string | null;
}

/** Every relative link `[text](target)` outside code blocks and code spans; absolute URLs and mailto: are skipped. */
export function relativeLinks(markdown: string): MarkdownLink[] {
  const links: MarkdownLink[] = [];
  let fenced = false;
  markdown.split('\n').forEach((raw, index) => {
    if (raw.startsWith('```')) fenced = !fenced;
    if (fenced) return;
    const line = raw.replace(/`[^`]*`/g, '');
    for (const match of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const hash = target.indexOf('#');
      links.push({
        line: index + 1,
        path: hash < 0 ? target : target.slice(0, hash),
        anchor: hash < 0 ? null : target.slice(hash + 1),
      });
    }
  });
  return links;
}
