/**
 * A TCP proxy in front of the test PostgreSQL server, for what a network does to a store: `freeze()` stops every
 * byte both ways without closing anything (a partition that drops packets, no reset), `thaw()` lets them through
 * again; `killNextAtStartup(terminate)` hands the next connection's startup answer to the client only together with
 * the server's FATAL for that backend, as a server ending a connection the moment it is ready (a restart, a
 * failover, pg_terminate_backend) does under load.
 */
import net from 'node:net';

export interface PgProxy {
  readonly url: string;
  freeze(): void;
  thaw(): void;
  /** The next connection: once its startup answer is complete, `terminate(pid)` ends its backend; both reach the client in one write. */
  killNextAtStartup(terminate: (pid: number) => Promise<void>): void;
  /**
   * The next message from a client that contains `marker` reaches the server; the server's whole answer to it (up to
   * its ReadyForQuery) is dropped and the connection cut: a commit that landed, whose answer was lost on the way back.
   */
  loseAnswerTo(marker: string): void;
  close(): Promise<void>;
}

/** The backend pid (BackendKeyData 'K') once the startup answer holds ReadyForQuery ('Z'), else null. */
function readyBackend(bytes: Buffer): number | null {
  let pid: number | null = null;
  for (let i = 0; i + 5 <= bytes.length;) {
    const type = String.fromCharCode(bytes[i]!);
    const length = bytes.readInt32BE(i + 1);
    if (type === 'K' && i + 9 <= bytes.length) pid = bytes.readInt32BE(i + 5);
    if (type === 'Z') return pid;
    i += 1 + length;
  }
  return null;
}

export async function startPgProxy(serverUrl: string): Promise<PgProxy> {
  const target = new URL(serverUrl);
  const frozen: Array<() => void> = [];
  let isFrozen = false;
  let killer: ((pid: number) => Promise<void>) | null = null;
  let loseAfter: Buffer | null = null;
  const sockets = new Set<net.Socket>();
  const pass = (to: net.Socket, bytes: Buffer) => {
    if (isFrozen) frozen.push(() => to.write(bytes));
    else to.write(bytes);
  };
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    const terminate = killer;
    killer = null;
    let held: Buffer | null = terminate ? Buffer.alloc(0) : null;
    let terminating = false;
    /** The answer being dropped, once a message with the marker went through. */
    let dropping: Buffer | null = null;
    client.on('data', (bytes) => {
      if (loseAfter !== null && bytes.includes(loseAfter)) {
        loseAfter = null;
        dropping = Buffer.alloc(0);
      }
      pass(upstream, bytes);
    });
    upstream.on('data', (bytes) => {
      if (dropping !== null) {
        dropping = Buffer.concat([dropping, bytes]);
        // ReadyForQuery ('Z', length 5, a status byte) ends the answer: the server has committed or rolled back.
        const z = dropping.length - 6;
        if (z >= 0 && dropping[z] === 0x5a && dropping.readInt32BE(z + 1) === 5) end();
        return;
      }
      if (held === null) return pass(client, bytes);
      held = Buffer.concat([held, bytes]);
      const pid = readyBackend(held);
      if (pid !== null && !terminating) {
        terminating = true;
        void terminate!(pid);
      }
      // The server's FATAL for a terminated backend carries SQLSTATE 57P01: deliver it with the startup answer.
      if (held.includes(Buffer.from('57P01'))) {
        client.write(held);
        held = null;
      }
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    for (const socket of [client, upstream]) {
      socket.on('error', end);
      socket.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  const url = new URL(serverUrl);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    freeze: () => { isFrozen = true; },
    thaw: () => {
      isFrozen = false;
      for (const write of frozen.splice(0)) write();
    },
    killNextAtStartup: (terminate) => { killer = terminate; },
    loseAnswerTo: (marker) => { loseAfter = Buffer.from(marker); },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
