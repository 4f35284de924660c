import { encodeEventText } from '../../event/codec.js';
import { integerOption, STORE_ARGUMENT, type Command } from '../command.js';
import { escapeOutput } from '../escape.js';
import { EXIT } from '../exit.js';
import { eventSummary, eventType, num, plural, safeId, shortId, table, timeText } from '../format.js';
import { loadSession, withStore } from '../session.js';

export const eventsCommand: Command = {
  name: 'events',
  summary: "print a session's journal, one event per line (readable, or the wire JSON lines)",
  arguments: [STORE_ARGUMENT, { name: 'session', required: true, help: 'a session id, or a unique part of one' }],
  options: {
    json: { type: 'boolean', help: 'print the wire JSON, one event per line (as export writes it, with invisible characters as JSON escapes)' },
    from: { type: 'string', value: 'seq', help: 'start at this sequence number (default 0)' },
    limit: { type: 'string', value: 'n', help: 'print at most n events' },
  },
  description: `
Prints the confirmed journal of one session in physical order, after verifying it (a damaged journal is reported,
never printed in part). The readable form shows, per event, its sequence number, when the store recorded it (- for
events written before the store kept times), turn, type and what it records;
ids are shortened to their last 8 characters (commands accept any unique part of an id). --json prints the exact
wire records instead.`,
  exitCodes: 'This command exits 1 when the journal is corrupt.',
  examples: ['jingwei events journal.db demo-1a2b3c4d', 'jingwei events journal.db demo-1a2b3c4d --json --from 10 --limit 5'],
  async run({ io, out, args, options }) {
    const from = integerOption('events', 'from', options.from, 0);
    const limit = integerOption('events', 'limit', options.limit, Number.MAX_SAFE_INTEGER);
    return withStore(args.store!, async (store) => {
      const { history, sessionId, progress } = await loadSession(store, args.session!, io);
      progress.done();
      const slice = history.slice(from, from + limit);
      if (options.json === true) {
        // The wire records; characters a terminal would act on are written as JSON escapes (the same values).
        let text = '';
        for (const e of slice) text += escapeOutput(encodeEventText(e)) + '\n';
        io.stdout.write(text);
        return EXIT.ok;
      }
      const s = out.style;
      out.line(s.bold(`Session ${safeId(sessionId)}: ${plural(history.length, 'event')}`) + (slice.length < history.length ? `, showing ${num(slice.length)} from seq ${num(from)}` : ''));
      if (slice.length === 0) return EXIT.ok;
      const rows = slice.map((e) => [String(e.seq), timeText(e.recordedAt), shortId(e.turnId), eventType(e), eventSummary(e, s)]);
      out.line(table(
        [{ header: 'SEQ', align: 'right' }, { header: 'RECORDED AT' }, { header: 'TURN' }, { header: 'TYPE' }, { header: 'WHAT' }],
        rows,
        s,
        out.width !== undefined ? { width: out.width } : {},
      ));
      return EXIT.ok;
    });
  },
};
