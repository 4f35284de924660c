/**
 * Many sessions of one SQLite store appending at once, so their writes share commits (docs/design.md#group-commit).
 * Each session appends `<session>-<n>` for n = 0, 1, … until the process is killed, and prints one JSON line
 * `{ session, seq, text }` as each append returns (a pipe write, synchronous on Linux: printed means acknowledged).
 * argv: <sqlite path> <number of sessions>
 */
import { openSqliteStore } from '../../../src/sqlite.js';
import { newTurnId } from '../../../src/ids.js';

const [path, count] = process.argv.slice(2) as [string, string];
const store = openSqliteStore(path);
const owners = [];
for (let k = 0; k < Number(count); k++) owners.push({ session: `s${k}`, owner: await store.acquire(`s${k}`, { owner: 'writer' }) });
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
await Promise.all(owners.map(async ({ session, owner }) => {
  for (let n = 0; ; n++) {
    const text = `${session}-${n}`;
    const [event] = await owner.append([{ turnId: newTurnId(), kind: { type: 'user_message', text } }]);
    process.stdout.write(`${JSON.stringify({ session, seq: event!.seq, text })}\n`);
  }
}));
