/**
 * Holds a SQLite file's write lock the way a process creating a new journal does between its first write and its
 * commit: a raw connection in rollback mode with an open IMMEDIATE transaction. Prints `{ held: true }` once it holds
 * the lock and rolls back after <hold ms> (the parent may be blocked in a synchronous open meanwhile).
 * argv: <sqlite path> <hold ms>
 */
import Database from 'better-sqlite3';

const [path, holdMs] = process.argv.slice(2) as [string, string];
const db = new Database(path);
db.exec('BEGIN IMMEDIATE');
process.stdout.write(JSON.stringify({ held: true }) + '\n');
setTimeout(() => {
  db.exec('ROLLBACK');
  db.close();
  process.stdout.write(JSON.stringify({ released: true }) + '\n');
}, Number(holdMs));
