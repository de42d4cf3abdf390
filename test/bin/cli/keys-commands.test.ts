/**
 * `trailwire keys list` and `keys rotate [--revoke-previous]` (issue 17) run as separate processes
 * beside a running server on the same store — the SQLite file, and PostgreSQL when
 * TRAILWIRE_TEST_DATABASE_URL is set: the server picks the new key up at its next key refresh, the
 * tokens it minted before keep working, the new ones carry the new kid, and --revoke-previous ends the
 * previous key's tokens (401) and LiveFeed streams (UNAUTHENTICATED). Needs `npm run build`.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import jwt from 'jsonwebtoken';
import pg from 'pg';
import { pino } from 'pino';
import { PROTO_ROOT } from '../../../adapters/grpc/proto.ts';
import { type RunningServer, startServer, type ServerOptions } from '../../../adapters/server/index.ts';
import { runTrailwire } from '../../support/cli.ts';

const DATABASE_URL = process.env.TRAILWIRE_TEST_DATABASE_URL;
const livefeed = (
  grpc.loadPackageDefinition(protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, includeDirs: [PROTO_ROOT] })) as any
).livefeed.v1;
const kidOf = (token: string): string => jwt.decode(token, { complete: true })!.header.kid!;

async function until<T>(probe: () => Promise<T | undefined>, what: string, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface Backend {
  name: string;
  skip?: string;
  open(): { server: Partial<ServerOptions>; cli: string[]; cleanup(): Promise<void> };
}

const directory = mkdtempSync(join(tmpdir(), 'trailwire-keys-'));
after(() => rmSync(directory, { recursive: true, force: true }));

const BACKENDS: Backend[] = [
  {
    name: 'the SQLite file',
    open() {
      const db = join(directory, `${randomBytes(4).toString('hex')}.db`);
      return { server: { db }, cli: ['--db', db], cleanup: async () => {} };
    },
  },
  {
    name: 'PostgreSQL',
    skip: DATABASE_URL ? undefined : 'TRAILWIRE_TEST_DATABASE_URL is not set',
    open() {
      const schema = `tw_keys_${randomBytes(6).toString('hex')}`;
      return {
        server: { databaseUrl: DATABASE_URL, databaseSchema: schema },
        cli: ['--database-url', DATABASE_URL!, '--database-schema', schema],
        async cleanup() {
          const client = new pg.Client({ connectionString: DATABASE_URL });
          await client.connect();
          await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
          await client.end();
        },
      };
    },
  },
];

/** A server on `where` that re-reads the signing keys every 200 ms, with no intake worker. */
function startBeside(where: Partial<ServerOptions>): Promise<RunningServer> {
  return startServer({
    ...where,
    port: 0,
    grpcPort: 0,
    host: '127.0.0.1',
    intakeWorker: false,
    logger: pino({ level: 'silent' }),
    core: { signingKeys: { refreshSeconds: 0.2 }, limits: { read: { requests: 1_000_000, windowSeconds: 60 } } },
  });
}

/** Creates a customer and answers a function that authenticates it anew. */
async function customerAuthenticator(server: RunningServer): Promise<() => Promise<string>> {
  const { apiKey } = await server.trailwire.auth.createCustomer({ name: 'Acme' });
  return async () =>
    (await (await fetch(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } })).json()).access_token;
}

for (const backend of BACKENDS) {
  describe(`trailwire keys beside a running server on ${backend.name}`, { skip: backend.skip }, () => {
    it('rotates without a failed request, then revokes the previous key, its tokens and its streams', async () => {
      const { server: where, cli, cleanup } = backend.open();
      const server = await startBeside(where);
      try {
        const authenticate = await customerAuthenticator(server);
        const fleets = async (token: string): Promise<number> =>
          (await fetch(`${server.url}/api/v1/fleets`, { headers: { authorization: `Bearer ${token}` } })).status;

        const first = await authenticate();
        const listed = await runTrailwire(['keys', 'list', '--json', ...cli]);
        assert.equal(listed.code, 0, listed.stderr);
        assert.deepEqual(JSON.parse(listed.stdout).data.map((key: any) => [key.kid, key.alg, key.status, key.storage]), [[kidOf(first), 'RS256', 'current', 'database']]);

        // Requests keep flowing with the first token while another process rotates.
        let load = true;
        const statuses: number[] = [];
        const during = (async () => {
          while (load) statuses.push(await fleets(first));
        })();
        const rotated = await runTrailwire(['keys', 'rotate', '--json', ...cli]);
        assert.equal(rotated.code, 0, rotated.stderr);
        const { kid: second, revoked, previous } = JSON.parse(rotated.stdout);
        assert.deepEqual(revoked, []);
        assert.equal(previous[0].kid, kidOf(first));
        const audit = JSON.parse(rotated.stderr.trim().split('\n').at(-1)!);
        assert.equal(audit.audit, true);
        assert.equal(audit.command, 'keys rotate');
        assert.equal(audit.kid, second);
        const renewed = await until(async () => {
          const token = await authenticate();
          return kidOf(token) === second ? token : undefined;
        }, 'the server to sign with the new key');
        load = false;
        await during;
        assert.ok(statuses.length > 0 && statuses.every((status) => status === 200), `no request failed during the rollover: ${statuses}`);
        assert.equal(await fleets(first), 200, 'a token of the previous key still works');
        const jwks = await (await fetch(`${server.url}/.well-known/jwks.json`)).json();
        assert.deepEqual(jwks.keys.map((key: any) => key.kid).sort(), [kidOf(first), second].sort());
        const statusesAfter = JSON.parse((await runTrailwire(['keys', 'list', '--json', ...cli])).stdout).data;
        assert.deepEqual(statusesAfter.map((key: any) => key.status), ['previous', 'current']);
        assert.ok(Date.parse(statusesAfter[0].until) > Date.now() + 1700_000, 'previous until its last token expires');

        // A stream opened with a token of the (now previous) second key ends when it is revoked.
        const client = new livefeed.LiveFeed(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
        const metadata = new grpc.Metadata();
        metadata.set('authorization', `Bearer ${renewed}`);
        const stream = client.Subscribe({}, metadata);
        const ended = new Promise<grpc.ServiceError>((resolve) => stream.on('error', resolve));
        await new Promise((resolve) => stream.once('data', resolve));

        const third = await runTrailwire(['keys', 'rotate', '--revoke-previous', '--json', ...cli]);
        assert.equal(third.code, 0, third.stderr);
        const revokedNow = JSON.parse(third.stdout).revoked as string[];
        assert.deepEqual(revokedNow.sort(), [kidOf(first), second].sort());
        assert.equal((await ended).code, grpc.status.UNAUTHENTICATED, 'the stream of a revoked key ends');
        client.close();
        assert.equal(await fleets(renewed), 401);
        assert.equal(await fleets(first), 401);
        const fresh = await authenticate();
        assert.equal(kidOf(fresh), JSON.parse(third.stdout).kid);
        assert.equal(await fleets(fresh), 200);
      } finally {
        await server.close();
        await cleanup();
      }
    });

    it('rotates RS256 → ES256: the new tokens work on HTTP, the event stream and the LiveFeed within seconds, without a restart (issue 29)', async () => {
      const { server: where, cli, cleanup } = backend.open();
      const server = await startBeside(where);
      try {
        const authenticate = await customerAuthenticator(server);
        const before = await authenticate();
        assert.equal(jwt.decode(before, { complete: true })!.header.alg, 'RS256');
        // Verified (and cached) under RS256 before the rotation, as a running client's token would be.
        assert.equal((await fetch(`${server.url}/api/v1/fleets`, { headers: { authorization: `Bearer ${before}` } })).status, 200);

        const rotated = await runTrailwire(['keys', 'rotate', '--algorithm', 'ES256', '--json', ...cli]);
        assert.equal(rotated.code, 0, rotated.stderr);
        const { kid } = JSON.parse(rotated.stdout);
        const started = Date.now();
        const token = await until(async () => {
          const candidate = await authenticate();
          return kidOf(candidate) === kid ? candidate : undefined;
        }, 'the server to sign with the ES256 key');
        assert.equal(jwt.decode(token, { complete: true })!.header.alg, 'ES256');

        const http = await fetch(`${server.url}/api/v1/fleets`, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(http.status, 200, `HTTP takes the ES256 token: ${await http.text()}`);
        const sse = await fetch(`${server.url}/api/v1/live`, { headers: { authorization: `Bearer ${token}` } });
        assert.equal(sse.status, 200, 'the event stream takes it');
        assert.match(sse.headers.get('content-type') ?? '', /^text\/event-stream/);
        const reader = sse.body!.getReader();
        assert.match(new TextDecoder().decode((await reader.read()).value), /event: heartbeat/);
        await reader.cancel();
        const client = new livefeed.LiveFeed(`127.0.0.1:${server.grpcPort}`, grpc.credentials.createInsecure());
        try {
          const metadata = new grpc.Metadata();
          metadata.set('authorization', `Bearer ${token}`);
          const stream = client.Subscribe({}, metadata);
          const first = await new Promise<unknown>((resolve, reject) => {
            stream.once('data', resolve);
            stream.once('error', reject);
          });
          assert.ok(first, 'the LiveFeed takes it (a heartbeat arrives)');
          stream.cancel();
          stream.on('error', () => {});
        } finally {
          client.close();
        }
        assert.ok(Date.now() - started < 5000, 'within seconds of the rotation');
        assert.equal((await fetch(`${server.url}/api/v1/fleets`, { headers: { authorization: `Bearer ${before}` } })).status, 200, 'the RS256 token still works');
      } finally {
        await server.close();
        await cleanup();
      }
    });
  });
}

describe('trailwire keys list and the read commands write no key (issue 37)', () => {
  it('on a fresh store keys list makes none; after keys rotate --algorithm ES256, reads and serve keep one current ES256 key', async () => {
    const db = join(directory, 'read-only.db');
    const keysIn = async () => JSON.parse((await runTrailwire(['keys', 'list', '--json', '--db', db])).stdout).data.map((key: any) => [key.kid, key.alg, key.status]);
    const fresh = await runTrailwire(['keys', 'list', '--db', db]);
    assert.equal(fresh.code, 0, fresh.stderr);
    assert.equal(fresh.stdout.trim(), 'no signing keys');
    assert.deepEqual(await keysIn(), [], 'keys list made no key');

    const rotated = await runTrailwire(['keys', 'rotate', '--algorithm', 'ES256', '--json', '--db', db]);
    assert.equal(rotated.code, 0, rotated.stderr);
    const { kid } = JSON.parse(rotated.stdout);
    for (const read of [['grants', 'list'], ['partners', 'list'], ['customers', 'create', '--name', 'Acme']]) {
      const result = await runTrailwire([...read, '--db', db]);
      assert.equal(result.code, 0, `${read.join(' ')}: ${result.stderr}`);
    }
    assert.deepEqual(await keysIn(), [[kid, 'ES256', 'current']], 'one key, ES256, current: no command made an RS256 key');

    const server = await startServer({ db, port: 0, grpcPort: 0, host: '127.0.0.1', intakeWorker: false, logger: pino({ level: 'silent' }) });
    try {
      const { apiKey } = await server.trailwire.auth.createCustomer({ name: 'Acme' });
      const response = await fetch(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
      const { header } = jwt.decode((await response.json()).access_token, { complete: true })!;
      assert.deepEqual([header.kid, header.alg], [kid, 'ES256'], 'serve without --signing-algorithm signs with the ring');
    } finally {
      await server.close();
    }
    assert.deepEqual(await keysIn(), [[kid, 'ES256', 'current']]);
    await assert.rejects(
      startServer({ db, port: 0, grpcPort: 0, logger: pino({ level: 'silent' }), core: { signingAlgorithm: 'RS256' } }),
      /sign ES256 .*keys rotate --algorithm RS256/,
      'a server asking for RS256 is refused at start rather than adding a second current key',
    );
    assert.deepEqual(await keysIn(), [[kid, 'ES256', 'current']]);
  });
});

describe('serve --signing-key-file', () => {
  it('signs with the key of the file, which keys list shows as kept in a file and keys rotate refuses to replace', async () => {
    const keyFile = join(directory, 'jwt.pem');
    const { privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    writeFileSync(keyFile, privateKey.export({ format: 'pem', type: 'pkcs8' }), { mode: 0o600 });
    const db = join(directory, 'file-key.db');
    await assert.rejects(startServer({ db, signingKeyFile: join(directory, 'missing.pem'), port: 0, grpcPort: 0, logger: pino({ level: 'silent' }) }), /cannot be read/);
    const server = await startServer({ db, signingKeyFile: keyFile, port: 0, grpcPort: 0, host: '127.0.0.1', intakeWorker: false, logger: pino({ level: 'silent' }) });
    try {
      const { apiKey } = await server.trailwire.auth.createCustomer({ name: 'Acme' });
      const response = await fetch(`${server.url}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey } });
      const { header } = jwt.decode((await response.json()).access_token, { complete: true })!;
      assert.equal(header.alg, 'ES256');
      const listed = await runTrailwire(['keys', 'list', '--json', '--db', db]);
      assert.deepEqual(JSON.parse(listed.stdout).data.map((key: any) => [key.kid, key.status, key.storage]), [[header.kid, 'current', 'file']]);
      const refused = await runTrailwire(['keys', 'rotate', '--json', '--db', db]);
      assert.equal(refused.code, 1);
      assert.equal(JSON.parse(refused.stdout).error.code, 'conflict');
    } finally {
      await server.close();
    }
  });
});
