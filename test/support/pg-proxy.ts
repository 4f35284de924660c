/**
 * A TCP proxy in front of the test PostgreSQL server, for what a network does to a store: `freeze()` stops every
 * byte both ways without closing anything (a partition that drops packets, no reset), `thaw()` lets them through
 * again; `killNextAtStartup(terminate)` hands the next connection's startup answer to the client only together with
 * the server's FATAL for that backend, as a server ending a connection the moment it is ready (a restart, a
 * failover, pg_terminate_backend) does under load. `holdIdleAnswers()` keeps what the server sends on the open
 * connections until the client next writes on each, as a connection that died idle in a pool is met by the next
 * query sent on it; `refuseConnections()` cuts every connection opened while it lasts.
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
   * `then: 'unreachable'` cuts every connection with it and refuses new ones until `refuseConnections(false)`, so that
   * nothing can ask the server what became of it; a function is awaited before the connection is cut.
   */
  loseAnswerTo(marker: string, then?: 'unreachable' | (() => Promise<void>)): void;
  /** The next message from a client that contains `marker` never reaches the server, and the connection is cut. */
  dropRequest(marker: string): void;
  /**
   * A commit still on its way: the next message that contains `marker` is held here, and 50 ms later the client's
   * side of its connection is reset while the server's side stays open; `deliver()` then sends the held bytes on.
   */
  holdRequest(marker: string): { deliver(): void };
  /**
   * The next message that contains `marker` on another connection than a held one never reaches the server, whose
   * side of that connection is ended (its transaction rolls back); `then` is awaited, and the client's side is reset.
   */
  dropRequestThen(marker: string, then: () => Promise<void>): void;
  /**
   * What the server sends on the connections open now (a FATAL as it ends one, then its close) reaches each client
   * only when that client next writes on it: the answer its next query meets.
   */
  holdIdleAnswers(): void;
  /** While on, every new connection is cut as it opens (the server unreachable); the open ones go on. */
  refuseConnections(on: boolean): void;
  /** The local ports of the proxy's connections to the server (pg_stat_activity.client_port), to end their backends. */
  serverSidePorts(): number[];
  close(): Promise<void>;
}

/** One proxied connection's hold on what the server sent, while holdIdleAnswers lasts for it. */
interface Hold {
  bytes: Buffer[];
  closed: boolean;
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
  let unreachableAfterLoss = false;
  let beforeCut: (() => Promise<void>) | null = null;
  let dropOn: Buffer | null = null;
  let holdOn: { marker: Buffer; bytes: Buffer | null; upstream: net.Socket | null } | null = null;
  let dropThen: { marker: Buffer; then: () => Promise<void> } | null = null;
  let refusing = false;
  const sockets = new Set<net.Socket>();
  const upstreams = new Set<net.Socket>();
  const holds = new Map<net.Socket, Hold>();
  const pass = (to: net.Socket, bytes: Buffer) => {
    if (isFrozen) frozen.push(() => to.write(bytes));
    else to.write(bytes);
  };
  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    upstreams.add(upstream);
    const terminate = killer;
    killer = null;
    let held: Buffer | null = terminate ? Buffer.alloc(0) : null;
    let terminating = false;
    /** The answer being dropped, once a message with the marker went through. */
    let dropping: Buffer | null = null;
    /** This connection's server side outlives its client side (a held request), or the reverse (a dropped one). */
    const keep = { upstream: false, client: false };
    client.on('data', (bytes) => {
      if (dropOn !== null && bytes.includes(dropOn)) {
        dropOn = null;
        end();
        return;
      }
      if (holdOn !== null && holdOn.bytes === null && bytes.includes(holdOn.marker)) {
        holdOn.bytes = bytes;
        holdOn.upstream = upstream;
        keep.upstream = true;
        setTimeout(() => client.resetAndDestroy(), 50);
        return;
      }
      if (dropThen !== null && !keep.upstream && bytes.includes(dropThen.marker)) {
        const { then } = dropThen;
        dropThen = null;
        keep.client = true;
        upstream.destroy();
        void then().finally(() => client.resetAndDestroy());
        return;
      }
      const hold = holds.get(client);
      if (hold !== undefined) {
        holds.delete(client);
        if (!upstream.destroyed) upstream.write(bytes);
        for (const held of hold.bytes) client.write(held);
        if (hold.closed) end();
        return;
      }
      if (loseAfter !== null && bytes.includes(loseAfter)) {
        loseAfter = null;
        dropping = Buffer.alloc(0);
      }
      pass(upstream, bytes);
    });
    upstream.on('data', (bytes) => {
      const hold = holds.get(client);
      if (hold !== undefined) {
        hold.bytes.push(bytes);
        return;
      }
      if (dropping !== null) {
        dropping = Buffer.concat([dropping, bytes]);
        // ReadyForQuery ('Z', length 5, a status byte) ends the answer: the server has committed or rolled back.
        const z = dropping.length - 6;
        if (z >= 0 && dropping[z] === 0x5a && dropping.readInt32BE(z + 1) === 5) {
          const first = beforeCut;
          beforeCut = null;
          if (first !== null) {
            void first().then(end, end);
            return;
          }
          end();
          if (unreachableAfterLoss) {
            unreachableAfterLoss = false;
            refusing = true;
            for (const socket of sockets) socket.destroy();
          }
        }
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
    const clientEnded = () => {
      if (keep.upstream) client.destroy();
      else end();
    };
    client.on('error', clientEnded);
    client.on('close', clientEnded);
    const upstreamEnded = () => {
      const hold = holds.get(client);
      if (hold !== undefined) hold.closed = true;
      else if (!keep.client) end();
    };
    upstream.on('error', upstreamEnded);
    upstream.on('close', upstreamEnded);
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
    loseAnswerTo: (marker, then) => {
      loseAfter = Buffer.from(marker);
      unreachableAfterLoss = then === 'unreachable';
      beforeCut = typeof then === 'function' ? then : null;
    },
    dropRequest: (marker) => { dropOn = Buffer.from(marker); },
    holdRequest: (marker) => {
      const hold = { marker: Buffer.from(marker), bytes: null as Buffer | null, upstream: null as net.Socket | null };
      holdOn = hold;
      return {
        deliver: () => {
          if (hold.bytes !== null && hold.upstream !== null && !hold.upstream.destroyed) hold.upstream.write(hold.bytes);
          holdOn = null;
        },
      };
    },
    dropRequestThen: (marker, then) => { dropThen = { marker: Buffer.from(marker), then }; },
    holdIdleAnswers: () => {
      for (const socket of sockets) if (!upstreams.has(socket) && !socket.destroyed) holds.set(socket, { bytes: [], closed: false });
    },
    refuseConnections: (on) => { refusing = on; },
    serverSidePorts: () => [...upstreams].filter((u) => !u.destroyed && u.localPort !== undefined).map((u) => u.localPort!),
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
