/**
 * The settings of `trailwire serve` (contract 9, issue 15), as an operator gives them: a bad value
 * stops the start with a message naming the option (exit 1, nothing opened), and good values — from
 * options and from `TRAILWIRE_*` variables — take effect in a running server: the read limit answers
 * 429 on the third read, the authenticate and rotate limits on the next one past theirs,
 * `--trust-proxy` counts failed authentications per X-Forwarded-For address, `--body-limit` answers
 * 413, `--token-ttl` shows in the token's exp, ES256 signs, `--max-streams-per-customer` refuses a
 * stream, and `--no-verify-vin-check-digit` takes a VIN whose check digit is wrong (which
 * `trailers create` then assigns). A server started with the defaults answers the other way round.
 * Needs `npm run build`.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import jwt from 'jsonwebtoken';
import { PROTO_ROOT } from '../../../adapters/grpc/proto.ts';
import { DEFAULT_HEALTH_WATCH_LIMITS } from '../../../adapters/grpc/index.ts';
import { DEFAULT_CONNECTION_LIMITS } from '../../../adapters/server/connection-limits.ts';
import { DEFAULT_INTAKE_BODY_LIMIT } from '../../../adapters/koa/index.ts';
import { limitOf, SERVE_SETTING_DEFAULTS } from '../../../bin/cli/serve-settings.ts';
import { DEFAULT_LIMITS } from '../../../core/trailwire.ts';
import { DEFAULT_PARTNER_INTAKE } from '../../../core/partner-intake-rules.ts';
import { DEFAULT_TOKEN_TTL_SECONDS } from '../../../core/tokens.ts';
import { LIVE_REPLAY_DEFAULTS } from '../../../core/live-replay.ts';
import { vinCheckDigit, withCheckDigit } from '../../../core/vin.ts';
import { DEFAULT_MAX_WEBHOOK_ENDPOINTS } from '../../../core/webhook-service.ts';
import { REPO_ROOT, runTrailwire, TRAILWIRE_BIN } from '../../support/cli.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-serve-settings-'));
after(() => rmSync(directory, { recursive: true, force: true }));

describe('serve settings defaults', () => {
  it('are the core\'s and the HTTP adapter\'s own defaults (contract 3 and 7)', () => {
    const asText = ({ requests, windowSeconds }: { requests: number; windowSeconds: number }) => `${requests}/${windowSeconds}`;
    assert.equal(SERVE_SETTING_DEFAULTS.authenticateLimit, asText(DEFAULT_LIMITS.authenticate));
    assert.equal(SERVE_SETTING_DEFAULTS.failedAuthenticateLimit, asText(DEFAULT_LIMITS.failedAuthenticatePerAddress));
    assert.equal(SERVE_SETTING_DEFAULTS.rotateLimit, asText(DEFAULT_LIMITS.rotate));
    assert.equal(SERVE_SETTING_DEFAULTS.readLimit, asText(DEFAULT_LIMITS.read));
    assert.equal(SERVE_SETTING_DEFAULTS.liveConnectLimit, asText(DEFAULT_LIMITS.liveConnect));
    assert.equal(SERVE_SETTING_DEFAULTS.liveConnectAddressLimit, asText(DEFAULT_LIMITS.liveConnectPerAddress));
    assert.equal(SERVE_SETTING_DEFAULTS.tokenTtlSeconds, DEFAULT_TOKEN_TTL_SECONDS);
    assert.equal(SERVE_SETTING_DEFAULTS.bodyLimitBytes, DEFAULT_INTAKE_BODY_LIMIT);
    assert.equal(SERVE_SETTING_DEFAULTS.maxHealthWatches, DEFAULT_HEALTH_WATCH_LIMITS.maxWatches);
    assert.equal(SERVE_SETTING_DEFAULTS.maxHealthWatchesPerConnection, DEFAULT_HEALTH_WATCH_LIMITS.maxWatchesPerConnection);
    assert.equal(SERVE_SETTING_DEFAULTS.maxConnections, DEFAULT_CONNECTION_LIMITS.maxConnections);
    assert.equal(SERVE_SETTING_DEFAULTS.maxConnectionsPerAddress, DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress);
    assert.equal(SERVE_SETTING_DEFAULTS.sendTimeoutSeconds * 1000, DEFAULT_CONNECTION_LIMITS.sendTimeoutMs);
    assert.equal(SERVE_SETTING_DEFAULTS.liveReplaySeconds, LIVE_REPLAY_DEFAULTS.replaySeconds);
    assert.equal(SERVE_SETTING_DEFAULTS.partnerIntakeLimit, asText(DEFAULT_PARTNER_INTAKE.budget));
    assert.equal(SERVE_SETTING_DEFAULTS.partnerNewVinsPerDay, DEFAULT_PARTNER_INTAKE.newVinsPerDay);
    assert.equal(SERVE_SETTING_DEFAULTS.webhookMaxPerCustomer, DEFAULT_MAX_WEBHOOK_ENDPOINTS);
    assert.deepEqual(limitOf('--read-limit', ' 600 / 60 '), { requests: 600, windowSeconds: 60 });
  });
});

// Each case is its own `trailwire serve` child on its own (never created) database file that exits at
// once on the bad value: they share nothing, so they run side by side rather than one after another.
describe('serve with a bad setting', { concurrency: 4 }, () => {
  const cases: [string[], NodeJS.ProcessEnv, RegExp][] = [
    [['--read-limit', '600/0'], {}, /^trailwire: --read-limit 600\/0: window must be ≥ 1 s$/],
    [[], { TRAILWIRE_READ_LIMIT: '600/0' }, /^trailwire: --read-limit 600\/0: window must be ≥ 1 s$/],
    [['--authenticate-limit', '0/300'], {}, /^trailwire: --authenticate-limit 0\/300: requests must be ≥ 1$/],
    [['--failed-authenticate-limit', '30'], {}, /^trailwire: --failed-authenticate-limit 30: expected REQUESTS\/WINDOW_SECONDS/],
    [['--rotate-limit', '3/1.5'], {}, /^trailwire: --rotate-limit 3\/1\.5: expected REQUESTS\/WINDOW_SECONDS/],
    [['--live-replay-seconds', '-1'], {}, /^trailwire: --live-replay-seconds must be a whole number of seconds from 0 to 86400, got -1$/],
    [['--token-ttl', '30'], {}, /^trailwire: --token-ttl must be a whole number of seconds from 60 to 86400, got 30$/],
    [['--token-ttl', 'half-an-hour'], {}, /^trailwire: --token-ttl must be a whole number of seconds from 60 to 86400, got a value that is not a number$/],
    [['--body-limit', '0'], {}, /^trailwire: --body-limit must be a whole number of bytes from 1 to 16777216, got 0$/],
    [['--partner-intake-limit', '0/60'], {}, /^trailwire: --partner-intake-limit 0\/60: requests must be ≥ 1$/],
    [[], { TRAILWIRE_PARTNER_NEW_VINS_PER_DAY: '-1' }, /^trailwire: --partner-new-vins-per-day must be a whole number of VINs from 0 to 100000000, got -1$/],
    [['--max-streams-per-customer', '0'], {}, /^trailwire: --max-streams-per-customer must be a whole number of streams from 1 to 1000000, got 0$/],
    [['--signing-algorithm', 'HS256'], {}, /signing-algorithm, Given: "HS256", Choices: "RS256", "ES256"/],
    [[], { TRAILWIRE_PORT: '-5' }, /^trailwire: --port must be a whole number from 0 to 65535, got -5$/],
    [[], { TRAILWIRE_HEARTBEAT_MS: '0' }, /^trailwire: --heartbeat-ms must be a whole number of milliseconds ≥ 1, got 0$/],
    [[], { TRAILWIRE_TRUSTED_PROXIES: '10.0.0.0/8,10.0.0.0/33' }, /^trailwire: --trusted-proxies: A trusted proxy must be an IP address or a CIDR range such as 10\.0\.0\.0\/8, got "10\.0\.0\.0\/33"$/],
    [['--max-health-watches', '-1'], {}, /^trailwire: --max-health-watches must be a whole number of streams from 0 to 10000, got -1$/],
    [['--cors-origin', 'https://*.example.com'], {}, /^trailwire: --cors-origin "https:\/\/\*\.example\.com": wildcards are not supported; list each origin/],
    [[], { TRAILWIRE_WEBHOOK_MAX_PER_CUSTOMER: '0' }, /^trailwire: --webhook-max-per-customer must be a whole number of endpoints from 1 to 10000, got 0$/],
  ];
  for (const [args, env, message] of cases)
    it(`${[...args, ...Object.entries(env).map(([name, value]) => `${name}=${value}`)].join(' ')}: exit 1, the option named, nothing opened`, async () => {
      const db = join(directory, `bad-${Math.random().toString(36).slice(2)}.db`);
      const result = await runTrailwire(['serve', ...(env.TRAILWIRE_PORT ? [] : ['--port', '0']), '--grpc-port', '0', '--db', db, ...args], env);
      assert.equal(result.code, 1);
      assert.equal(result.stdout, '');
      assert.match(result.stderr.trim().split('\n').at(-1)!, message);
      assert.equal(existsSync(db), false, 'checked before the store is opened');
    });
});

/** A `trailwire serve --json` child process, once it printed its document. */
async function startServe(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ url: string; grpc: string; metrics?: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [TRAILWIRE_BIN, 'serve', '--port', '0', '--grpc-port', '0', '--host', '127.0.0.1', '--json', '--log-level', 'silent', ...args], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
  });
  const line = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => {
      buffered += chunk;
      const end = buffered.indexOf('\n');
      if (end >= 0) resolve(buffered.slice(0, end));
    });
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    child.on('exit', (code) => reject(new Error(`serve exited with ${code}: ${stderr}`)));
  });
  const { url, grpc, metrics } = JSON.parse(line);
  return { url, grpc, metrics, child };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.on('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

async function created(args: string[]): Promise<{ id: string | number; apiKey?: string }> {
  const result = await runTrailwire([...args, '--json']);
  assert.equal(result.code, 0, result.stderr);
  return JSON.parse(result.stdout);
}

interface Principals {
  customerKey: string;
  partnerKey: string;
  fleetId: number;
}

/** A customer with a fleet, and a gps-basic partner, made with the CLI in `db`. */
async function provision(db: string): Promise<Principals> {
  const [customer, partner] = await Promise.all([
    created(['customers', 'create', '--name', 'Acme', '--db', db]),
    created(['partners', 'create', '--name', 'Geo Co', '--product', 'gps-basic', '--db', db]),
  ]);
  const fleet = await created(['fleets', 'create', '--customer', String(customer.id), '--name', 'Reefers', '--db', db]);
  return { customerKey: customer.apiKey!, partnerKey: partner.apiKey!, fleetId: fleet.id as number };
}

const authenticate = (url: string, audience: 'customers' | 'partners', apiKey: string, address: string) =>
  fetch(`${url}/api/v1/${audience}/authenticate`, { method: 'POST', headers: { 'x-api-key': apiKey, 'x-forwarded-for': address } });

async function tokenOf(url: string, audience: 'customers' | 'partners', apiKey: string): Promise<{ token: string; expiresIn: number }> {
  const response = await authenticate(url, audience, apiKey, '198.51.100.1');
  assert.equal(response.status, 200);
  const body = (await response.json()) as { access_token: string; expires_in: number };
  return { token: body.access_token, expiresIn: body.expires_in };
}

/** A VIN whose check digit (position 9) is wrong. */
function vinWithWrongCheckDigit(): string {
  const valid = withCheckDigit(`1TWBD${Math.random().toString().slice(2, 14)}`.slice(0, 17));
  return valid.slice(0, 8) + (vinCheckDigit(valid) === '1' ? '2' : '1') + valid.slice(9);
}

function intake(url: string, token: string, vin: string, body: string): Promise<Response> {
  return fetch(`${url}/api/v1/telemetry/intake/${vin}`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body });
}

/** A gps-basic payload, with `padding` (JSON whitespace) to make it larger. */
const fix = (padding = '') => JSON.stringify({ timestamp: Math.floor(Date.now() / 1000) - 60, position: { latitude: 41.9, longitude: -87.6 }, speedKph: 0, bearingDeg: 0 }) + padding;

describe('serve settings in a running server', { timeout: 60_000 }, () => {
  let tuned: { url: string; grpc: string; metrics?: string; child: ChildProcess; db: string; principals: Principals };
  let defaults: { url: string; grpc: string; metrics?: string; child: ChildProcess; db: string; principals: Principals };
  before(async () => {
    const [tunedDb, defaultDb] = [join(directory, 'tuned.db'), join(directory, 'defaults.db')];
    const [tunedPrincipals, defaultPrincipals] = await Promise.all([provision(tunedDb), provision(defaultDb)]);
    // Windows of an hour: the few requests of a case do not straddle a window's end. The cases
    // authenticate the provisioned keys fewer than 5 times in all (--authenticate-limit 5/3600).
    const [tunedServe, defaultServe] = await Promise.all([
      startServe(
        [
          ...['--db', tunedDb, '--failed-authenticate-limit', '2/3600', '--authenticate-limit', '5/3600', '--rotate-limit', '1/3600'],
          ...['--body-limit', '1000', '--token-ttl', '120', '--signing-algorithm', 'ES256', '--no-verify-vin-check-digit'],
        ],
        { TRAILWIRE_READ_LIMIT: '2/3600', TRAILWIRE_TRUST_PROXY: 'true', TRAILWIRE_MAX_STREAMS_PER_CUSTOMER: '1', TRAILWIRE_METRICS_PORT: '0' },
      ),
      startServe(['--db', defaultDb, '--failed-authenticate-limit', '2/3600']),
    ]);
    tuned = { ...tunedServe, db: tunedDb, principals: tunedPrincipals };
    defaults = { ...defaultServe, db: defaultDb, principals: defaultPrincipals };
  });
  after(async () => {
    await Promise.all([tuned?.child, defaults?.child].filter((child) => child !== undefined).map((child) => stop(child!)));
  });

  it('--token-ttl sets the token\'s exp and expires_in; --signing-algorithm ES256 signs with ES256 (defaults: 1800, RS256)', async () => {
    for (const [server, ttl, alg] of [[tuned, 120, 'ES256'], [defaults, 1800, 'RS256']] as const) {
      const { token, expiresIn } = await tokenOf(server.url, 'customers', server.principals.customerKey);
      const decoded = jwt.decode(token, { complete: true })!;
      const claims = decoded.payload as jwt.JwtPayload;
      assert.equal(expiresIn, ttl);
      assert.equal(claims.exp! - claims.iat!, ttl);
      assert.equal(decoded.header.alg, alg);
      const jwks = (await (await fetch(`${server.url}/.well-known/jwks.json`)).json()) as { keys: { kid: string; alg: string }[] };
      assert.equal(jwks.keys.find((key) => key.kid === decoded.header.kid)?.alg, alg, 'the JWKS publishes the key that verifies it');
    }
  });

  it('TRAILWIRE_READ_LIMIT=2/3600: the third read is 429 with Retry-After (default: 600 a minute)', async () => {
    for (const [server, statuses] of [[tuned, [200, 200, 429]], [defaults, [200, 200, 200]]] as const) {
      const { token } = await tokenOf(server.url, 'customers', server.principals.customerKey);
      const responses: Response[] = [];
      for (let i = 0; i < 3; i++) responses.push(await fetch(`${server.url}/api/v1/fleets`, { headers: { authorization: `Bearer ${token}` } }));
      assert.deepEqual(responses.map((response) => response.status), statuses);
      const last = responses[2]!;
      if (last.status === 429) {
        assert.equal(last.headers.get('ratelimit-limit'), '2');
        assert.ok(Number(last.headers.get('retry-after')) > 0);
        assert.match(last.headers.get('content-type')!, /application\/problem\+json/);
      } else assert.equal(last.headers.get('ratelimit-limit'), '600');
    }
  });

  it('--body-limit 1000: a larger intake body is 413 problem+json, a smaller one 202 (default: 256 KiB)', async () => {
    const vin = withCheckDigit('1TWBL000000000001');
    const big = fix(' '.repeat(1200));
    for (const [server, bigStatus] of [[tuned, 413], [defaults, 202]] as const) {
      const { token } = await tokenOf(server.url, 'partners', server.principals.partnerKey);
      const refused = await intake(server.url, token, vin, big);
      assert.equal(refused.status, bigStatus);
      if (bigStatus === 413) {
        assert.match(refused.headers.get('content-type')!, /application\/problem\+json/);
        assert.equal(((await refused.json()) as { status: number }).status, 413);
        assert.equal((await intake(server.url, token, vin, fix())).status, 202);
      }
    }
  });

  it('--no-verify-vin-check-digit takes a VIN with a wrong check digit, which trailers create then assigns (default: 400)', async () => {
    const vin = vinWithWrongCheckDigit();
    for (const [server, status] of [[tuned, 202], [defaults, 400]] as const) {
      const { token } = await tokenOf(server.url, 'partners', server.principals.partnerKey);
      assert.equal((await intake(server.url, token, vin, fix())).status, status);
    }
    const unassigned = async () => JSON.parse((await runTrailwire(['trailers', 'list', '--unassigned', '--json', '--db', tuned.db])).stdout).data;
    for (const deadline = Date.now() + 10_000; !(await unassigned()).some((trailer: { vin: string }) => trailer.vin === vin); ) {
      assert.ok(Date.now() < deadline, 'intake processed the VIN within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const assigned = await runTrailwire(['trailers', 'create', '--fleet', String(tuned.principals.fleetId), '--vin', vin, '--json', '--db', tuned.db]);
    assert.equal(assigned.code, 0, assigned.stdout + assigned.stderr);
    const fresh = await runTrailwire(['trailers', 'create', '--fleet', String(tuned.principals.fleetId), '--vin', vinWithWrongCheckDigit(), '--json', '--db', tuned.db]);
    assert.equal(fresh.code, 1, 'a VIN intake does not know is still checked');
    assert.match(JSON.parse(fresh.stdout).error.message, /check digit/);
  });

  it('--authenticate-limit 5/3600: the sixth authentication of one key is 429; --rotate-limit 1/3600: the second rotation is 429', async () => {
    // A customer made while serve runs, so its key has counted nothing yet.
    const { apiKey } = await created(['customers', 'create', '--name', 'Counted', '--db', tuned.db]);
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await authenticate(tuned.url, 'customers', apiKey!, '198.51.100.2')).status);
    assert.deepEqual(statuses, [200, 200, 200, 200, 200, 429]);

    const other = await created(['customers', 'create', '--name', 'Rotating', '--db', tuned.db]);
    const rotate = async (key: string) => {
      const { token } = await tokenOf(tuned.url, 'customers', key);
      return fetch(`${tuned.url}/api/v1/customers/rotate`, { method: 'PUT', headers: { authorization: `Bearer ${token}` } });
    };
    const first = await rotate(other.apiKey!);
    assert.equal(first.status, 200);
    const second = await rotate(((await first.json()) as { api_key: string }).api_key);
    assert.equal(second.status, 429, 'one rotation an hour');
    assert.ok(Number(second.headers.get('retry-after')) > 0);
  });

  it('TRAILWIRE_MAX_STREAMS_PER_CUSTOMER=1: a second LiveFeed stream of one customer is RESOURCE_EXHAUSTED', async () => {
    const livefeed = (
      grpc.loadPackageDefinition(protoLoader.loadSync('livefeed/v1/livefeed.proto', { keepCase: true, includeDirs: [PROTO_ROOT] })) as any
    ).livefeed.v1;
    const { token } = await tokenOf(tuned.url, 'customers', tuned.principals.customerKey);
    const client = new livefeed.LiveFeed(tuned.grpc, grpc.credentials.createInsecure());
    const metadata = new grpc.Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    const firstStream = client.Subscribe({}, metadata);
    firstStream.on('error', () => {});
    try {
      await new Promise((resolve) => firstStream.once('data', resolve));
      const secondStream = client.Subscribe({}, metadata);
      const refused = await new Promise<grpc.ServiceError>((resolve) => secondStream.on('error', resolve));
      assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED);
    } finally {
      firstStream.cancel();
      client.close();
    }
  });

  it('TRAILWIRE_METRICS_PORT: /metrics answers on its own listener on 127.0.0.1, not on the HTTP port (default: on the HTTP port)', async () => {
    assert.match(tuned.metrics ?? '', /^http:\/\/127\.0\.0\.1:\d+\/metrics$/);
    const own = await fetch(tuned.metrics!);
    assert.equal(own.status, 200);
    assert.match(await own.text(), /trailwire_http_requests_total/);
    assert.equal((await fetch(`${tuned.url}/metrics`)).status, 404, 'not on the public port');
    assert.equal(defaults.metrics, undefined);
    assert.equal((await fetch(`${defaults.url}/metrics`)).status, 200);
  });

  it('TRAILWIRE_TRUST_PROXY=true: failed authentications count per X-Forwarded-For address, so one client cannot lock out another', async () => {
    for (const [server, otherClient] of [[tuned, 200], [defaults, 429]] as const) {
      const failures = [];
      for (let i = 0; i < 3; i++) failures.push((await authenticate(server.url, 'customers', 'twc_not-a-key', '203.0.113.7')).status);
      assert.deepEqual(failures, [401, 401, 429], 'the client with bad keys is stopped');
      // Without trust, every client is the proxy's address (127.0.0.1 here) and shares the lockout —
      // which is why this case runs last.
      assert.equal((await authenticate(server.url, 'customers', server.principals.customerKey, '203.0.113.8')).status, otherClient);
    }
  });
});
