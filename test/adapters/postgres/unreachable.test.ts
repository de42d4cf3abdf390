/**
 * A PostgreSQL that cannot be reached is a `store_unavailable` refusal (503 with Retry-After at the
 * HTTP edge), answered within a bound — never a driver error that becomes a 500, never a hang
 * (contract 6, issue 28). No database needed: a closed port, and a port that accepts and never
 * answers, and a server that cuts the connection once a query arrives (what a query in flight meets
 * when PostgreSQL stops). The outage of a real cluster under load is `test/scale-out/faults.test.ts`.
 */
import assert from 'node:assert/strict';
import { createServer, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import type pg from 'pg';
import { createPostgresPool, explainPostgresFailure, isPostgresUnreachable, withTransaction } from '../../../adapters/postgres/pool.ts';
import { isTrailwireError } from '../../../core/errors.ts';
import { freePort } from '../../support/private-services.ts';

const isStoreUnavailable = (error: unknown) => {
  assert.ok(isTrailwireError(error), `a TrailwireError, got ${String(error)}`);
  assert.equal(error.code, 'store_unavailable');
  assert.ok(error.retryAfterSeconds! > 0, 'with a Retry-After');
  assert.ok(error.cause, "the driver's error is kept as the cause, for the log");
  return true;
};

/** AuthenticationOk then ReadyForQuery (idle): all a client needs to count as connected. */
const CONNECTED = Buffer.from([0x52, 0, 0, 0, 8, 0, 0, 0, 0, 0x5a, 0, 0, 0, 5, 0x49]);

/**
 * A server that lets clients connect and cuts each connection when its first query arrives, as a
 * PostgreSQL stopped in `immediate` mode does (its backends exit without an error message): with a
 * FIN (`end`) or a RST (`reset`).
 */
async function cutOnFirstQuery(how: 'end' | 'reset'): Promise<{ url: string; close(): void }> {
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    let connected = false;
    socket.on('error', () => {});
    socket.on('data', () => {
      if (!connected) {
        connected = true;
        socket.write(CONNECTED);
      } else if (how === 'end') socket.end();
      else socket.resetAndDestroy();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `postgres://postgres@127.0.0.1:${port}/none`,
    close() {
      for (const socket of sockets) socket.destroy();
      server.close();
    },
  };
}

describe('PostgreSQL unreachable', () => {
  it('tells an unreachable database from a failed statement', () => {
    for (const reachable of [{ code: '23505', message: 'duplicate key' }, { code: '42P01', message: 'relation does not exist' }, new Error('boom'), null, 'text'])
      assert.equal(isPostgresUnreachable(reachable), false, JSON.stringify(reachable));
    for (const unreachable of [
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' }),
      { code: '57P01', message: 'terminating connection due to administrator command' },
      { code: '57P03', message: 'the database system is starting up' },
      { code: '08006', message: 'connection failure' },
      new Error('Connection terminated unexpectedly'),
      new Error('timeout exceeded when trying to connect'),
      new Error('Query read timeout'),
    ])
      assert.equal(isPostgresUnreachable(unreachable), true, JSON.stringify(unreachable) ?? String(unreachable));
    const statementError = { code: '23505' };
    assert.equal(explainPostgresFailure(statementError), statementError, 'anything else passes unchanged');
  });

  it('a refused connection fails pool queries, connects and transactions with store_unavailable at once', async () => {
    const pool = createPostgresPool({ connectionString: `postgres://postgres@127.0.0.1:${await freePort()}/none`, poolSize: 2, connectTimeoutMs: 2000, queryTimeoutMs: 2000 });
    try {
      await assert.rejects(pool.query('SELECT 1'), isStoreUnavailable);
      await assert.rejects(pool.connect(), isStoreUnavailable);
      await assert.rejects(withTransaction(pool, async () => 1), isStoreUnavailable);
    } finally {
      await pool.end();
    }
  });

  it('a server that accepts and never answers fails within the connect timeout, not never', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const { port } = silent.address() as { port: number };
    const pool = createPostgresPool({ connectionString: `postgres://postgres@127.0.0.1:${port}/none`, poolSize: 2, connectTimeoutMs: 300, queryTimeoutMs: 300 });
    try {
      const started = performance.now();
      await assert.rejects(pool.query('SELECT 1'), isStoreUnavailable);
      assert.ok(performance.now() - started < 2000, 'within the timeout');
    } finally {
      for (const socket of sockets) socket.destroy();
      await pool.end();
      silent.close();
    }
  });

  for (const how of ['end', 'reset'] as const) {
    it(`a connection cut (${how === 'end' ? 'closed' : 'reset'}) while queries are in flight fails each with store_unavailable, never a raw driver error`, async () => {
      const server = await cutOnFirstQuery(how);
      const pool = createPostgresPool({ connectionString: server.url, poolSize: 2, connectTimeoutMs: 2000, queryTimeoutMs: 2000 });
      try {
        // The pool's own query: pg-pool answers it from the client's 'error' event (issue 37, item 9).
        await assert.rejects(pool.query('SELECT 1'), isStoreUnavailable);
        // A query in flight and one queued behind it on the same checked-out connection.
        const client = await pool.connect();
        client.on('error', () => {});
        const [running, queued] = [client.query('SELECT 1'), client.query('SELECT 2')];
        await assert.rejects(running, isStoreUnavailable);
        await assert.rejects(queued, isStoreUnavailable);
        client.release(true);
        await assert.rejects(withTransaction(pool, async (transaction) => transaction.query('SELECT 1')), isStoreUnavailable);
      } finally {
        await pool.end();
        server.close();
      }
    });
  }

  it('a pool with every connection taken fails a query that waited past the connect timeout with store_unavailable', async () => {
    const server = await cutOnFirstQuery('end');
    const pool = createPostgresPool({ connectionString: server.url, poolSize: 1, connectTimeoutMs: 200, queryTimeoutMs: 2000 });
    let held: pg.PoolClient | undefined;
    try {
      held = await pool.connect();
      await assert.rejects(pool.query('SELECT 1'), isStoreUnavailable);
    } finally {
      held?.release();
      await pool.end();
      server.close();
    }
  });
});
