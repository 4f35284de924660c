/**
 * A session owner in its own process, driven over stdin: `acquire <takeover 0|1>`, `acquire-lease <ms>` (a
 * heartbeating owner with that lease), `append <text>`, `append-and-die <text>` (SIGKILL right after the append
 * returns), `heartbeating`. Answers one JSON line per command.
 * argv: <sqlite path | postgres:// URL> <session> <owner name> [postgres schema]
 */
import { createInterface } from 'node:readline';
import type { SessionOwner } from '../../../src/store/types.js';
import { newTurnId } from '../../../src/ids.js';
import { openTarget } from '../../support/stores.js';

const [path, sessionId, name, schema] = process.argv.slice(2) as [string, string, string, string | undefined];
const store = await openTarget(path, schema);
let owner: SessionOwner | undefined;
const out = (v: unknown) => process.stdout.write(JSON.stringify(v) + '\n');

createInterface({ input: process.stdin }).on('line', (line) => {
  void (async () => {
    const [command, arg = ''] = line.split(' ', 2) as [string, string | undefined];
    try {
      if (command === 'acquire') {
        owner = await store.acquire(sessionId, { owner: name, takeover: arg === '1' });
        out({ ok: true, epoch: owner.epoch });
      } else if (command === 'acquire-lease') {
        owner = await store.acquire(sessionId, { owner: name, leaseMs: Number(arg) });
        out({ ok: true, epoch: owner.epoch });
      } else if (command === 'heartbeating') {
        out({ ok: true, heartbeating: owner!.heartbeating });
      } else if (command === 'append' || command === 'append-and-die') {
        const [event] = await owner!.append([{ turnId: newTurnId(), kind: { type: 'user_message', text: arg } }]);
        out({ ok: true, seq: event!.seq, eventId: event!.eventId });
        if (command === 'append-and-die') process.kill(process.pid, 'SIGKILL');
      } else if (command === 'exit') {
        await store.close();
        process.exit(0);
      }
    } catch (error) {
      out({ ok: false, code: (error as { code?: string }).code ?? 'unknown', message: String(error) });
    }
  })();
});
out({ ready: true });
