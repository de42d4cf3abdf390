/**
 * The settings of `trailwire serve` that tune the service rather than say where it runs (contract 9):
 * token lifetime, signing algorithm, the authenticate, failed-authenticate, rotate and read limits,
 * trusting a proxy's X-Forwarded-For, the intake body limit, the VIN check digit, the LiveFeed streams
 * per customer and `--product-limit`, the transport's exposure (trusted proxies, health Watch
 * and connection caps, the send timeout, a metrics listener of its own; issue 29), and each partner's
 * intake budget, new-VIN cap and whether customers must grant their partners (`--partner-intake-limit`,
 * `--partner-new-vins-per-day`, `--require-grants`), and where webhooks may go and how many a customer
 * may have (`--webhook-allow-http`, `--webhook-allow-private`, `--webhook-max-per-customer`) — each an option
 * with its `TRAILWIRE_<NAME>` variable (yargs'
 * `.env`). They are checked here, once, at start, with a message that names the option, and mapped
 * onto `ServerOptions`.
 */
import type { Argv } from 'yargs';
import { TrailwireError } from '../../core/errors.ts';
import type { IntakeLimit } from '../../core/products.ts';
import type { TrailwireOptions } from '../../core/trailwire.ts';
import type { ServerOptions } from '../../adapters/server/index.ts';
import { parseCorsOrigins } from '../../adapters/koa/cors.ts';
import { trustedProxyList } from '../../adapters/koa/client-address.ts';

/**
 * The defaults `--help` shows. Written out here so that `--help` loads neither the core nor the
 * adapters; `test/bin/cli/serve-settings.test.ts` holds them to the core's and the HTTP adapter's own.
 */
export const SERVE_SETTING_DEFAULTS = {
  tokenTtlSeconds: 1800,
  authenticateLimit: '10/300',
  failedAuthenticateLimit: '30/300',
  rotateLimit: '3/3600',
  readLimit: '600/60',
  liveConnectLimit: '120/60',
  liveConnectAddressLimit: '120/60',
  bodyLimitBytes: 262_144,
  maxStreamsPerCustomer: 100,
  maxHealthWatches: 100,
  maxHealthWatchesPerConnection: 2,
  maxConnections: 10_000,
  maxConnectionsPerAddress: 512,
  sendTimeoutSeconds: 20,
  metricsHost: '127.0.0.1',
  liveReplaySeconds: 300,
  partnerIntakeLimit: '60000/60',
  partnerNewVinsPerDay: 10_000,
  webhookMaxPerCustomer: 10,
} as const;

/** Bounds of the numeric settings, with why. */
const TOKEN_TTL_SECONDS = { min: 60, max: 86_400 };
// A body is held in memory whole and must arrive within the HTTP server's 30 s request timeout.
const BODY_LIMIT_BYTES = { min: 1, max: 16 * 1024 * 1024 };
const STREAMS_PER_CUSTOMER = { min: 1, max: 1_000_000 };
// 0 turns Watch off; each stream holds memory until its client leaves, so no more than a few thousand.
const HEALTH_WATCHES = { min: 0, max: 10_000 };
// 0 turns a cap off; a process's file descriptors end far below a million.
const CONNECTIONS = { min: 0, max: 1_000_000 };
// 0 turns the deadline off; past 10 minutes it no longer protects anything.
const SEND_TIMEOUT_SECONDS = { min: 0, max: 600 };
// 0 keeps no window (no resume); a day is far more than a reconnect needs, and the window is also bounded by count.
const LIVE_REPLAY_SECONDS = { min: 0, max: 86_400 };
const NEW_VINS_PER_DAY = { min: 0, max: 100_000_000 };
const WEBHOOKS_PER_CUSTOMER = { min: 1, max: 10_000 };

/** The serve settings as yargs parses them. */
export interface ServeSettingArguments {
  'token-ttl': number;
  'live-replay-seconds': number;
  'signing-algorithm'?: 'RS256' | 'ES256';
  'authenticate-limit': string;
  'failed-authenticate-limit': string;
  'rotate-limit': string;
  'read-limit': string;
  'live-connect-limit': string;
  'live-connect-address-limit': string;
  'trust-proxy': boolean;
  'body-limit': number;
  'verify-vin-check-digit': boolean;
  'max-streams-per-customer': number;
  'product-limit': string[];
  // The transport's exposure (issue 29): proxies, health Watch caps.
  'trusted-proxies': string[];
  'cors-origin': string[];
  'max-health-watches': number;
  'max-health-watches-per-connection': number;
  'max-connections': number;
  'max-connections-per-address': number;
  'send-timeout': number;
  'metrics-port'?: number;
  'metrics-host': string;
  // What one partner may do to intake (issue 29).
  'partner-intake-limit': string;
  'partner-new-vins-per-day': number;
  'require-grants': boolean;
  // Webhooks (issue 40).
  'webhook-allow-http': boolean;
  'webhook-allow-private': boolean;
  'webhook-max-per-customer': number;
}

const LIMIT_FORMAT = 'REQUESTS/WINDOW_SECONDS';

/** Adds the serve settings' options to the `serve` command. */
export function withServeSettings<T>(yargs: Argv<T>): Argv<T & ServeSettingArguments> {
  const d = SERVE_SETTING_DEFAULTS;
  return yargs
    .option('token-ttl', {
      type: 'number',
      default: d.tokenTtlSeconds,
      describe: `Lifetime of the access tokens authenticate issues, in seconds (${TOKEN_TTL_SECONDS.min} to ${TOKEN_TTL_SECONDS.max}) (env TRAILWIRE_TOKEN_TTL)`,
    })
    .option('signing-algorithm', {
      choices: ['RS256', 'ES256'] as const,
      describe:
        "Algorithm of the token-signing key the store generates when it has none (default RS256). The keys keep their algorithm: while a key of another one signs, serve refuses to start (change it with `keys rotate --algorithm`); unset, serve signs with the store's. A --signing-key-file decides by its key instead (env TRAILWIRE_SIGNING_ALGORITHM)",
    })
    .option('authenticate-limit', {
      type: 'string',
      default: d.authenticateLimit,
      describe: `Authentications per API key presented, as ${LIMIT_FORMAT} (env TRAILWIRE_AUTHENTICATE_LIMIT)`,
    })
    .option('failed-authenticate-limit', {
      type: 'string',
      default: d.failedAuthenticateLimit,
      describe: `Failed authentications per client address (then even good keys from it wait), as ${LIMIT_FORMAT} (env TRAILWIRE_FAILED_AUTHENTICATE_LIMIT)`,
    })
    .option('rotate-limit', {
      type: 'string',
      default: d.rotateLimit,
      describe: `Key rotations per partner or customer, as ${LIMIT_FORMAT} (env TRAILWIRE_ROTATE_LIMIT)`,
    })
    .option('read-limit', {
      type: 'string',
      default: d.readLimit,
      describe: `Read requests per customer (and intake status polls per partner), as ${LIMIT_FORMAT} (env TRAILWIRE_READ_LIMIT)`,
    })
    .option('live-connect-limit', {
      type: 'string',
      default: d.liveConnectLimit,
      describe: `Live streams opened per customer (LiveFeed and SSE together), as ${LIMIT_FORMAT} (env TRAILWIRE_LIVE_CONNECT_LIMIT)`,
    })
    .option('live-connect-address-limit', {
      type: 'string',
      default: d.liveConnectAddressLimit,
      describe: `Live streams opened per client address, as ${LIMIT_FORMAT} (env TRAILWIRE_LIVE_CONNECT_ADDRESS_LIMIT)`,
    })
    .option('trust-proxy', {
      type: 'boolean',
      default: false,
      describe: 'Take client addresses from X-Forwarded-For: behind a reverse proxy, so failed-authenticate limits count per client, not per proxy (env TRAILWIRE_TRUST_PROXY)',
    })
    .option('body-limit', {
      type: 'number',
      default: d.bodyLimitBytes,
      describe: `Largest intake body in bytes, at most ${BODY_LIMIT_BYTES.max}; a larger one is refused 413 (env TRAILWIRE_BODY_LIMIT)`,
    })
    .option('verify-vin-check-digit', {
      type: 'boolean',
      default: true,
      describe: 'Verify the VIN check digit (position 9); --no-verify-vin-check-digit accepts any 17 VIN characters (env TRAILWIRE_VERIFY_VIN_CHECK_DIGIT)',
    })
    .option('max-streams-per-customer', {
      type: 'number',
      default: d.maxStreamsPerCustomer,
      describe: 'Live streams one customer may hold in this process, LiveFeed and GET /api/v1/live together; the next is refused (RESOURCE_EXHAUSTED, HTTP 429) (env TRAILWIRE_MAX_STREAMS_PER_CUSTOMER)',
    })
    .option('live-replay-seconds', {
      type: 'number',
      default: d.liveReplaySeconds,
      describe: 'How long a live update stays resumable: a LiveFeed or /api/v1/live client that reconnects within it gets what it missed; later, a reset signal and a snapshot. 0 keeps no window (env TRAILWIRE_LIVE_REPLAY_SECONDS)',
    })
    .option('product-limit', {
      type: 'string',
      array: true,
      default: [] as string[],
      describe: "Override a product's intake limit per VIN: NAME=REQUESTS or NAME=REQUESTS/WINDOW_SECONDS; repeatable (env TRAILWIRE_PRODUCT_LIMIT)",
    })
    // The transport's exposure (issue 29), kept together.
    .option('trusted-proxies', {
      type: 'string',
      array: true,
      default: [] as string[],
      describe:
        'Reverse proxies to trust, as addresses or CIDR ranges (repeatable or comma-separated); the client address is the right-most X-Forwarded-For entry that is not one of them. Implies --trust-proxy (env TRAILWIRE_TRUSTED_PROXIES)',
    })
    .option('cors-origin', {
      type: 'string',
      array: true,
      default: [] as string[],
      describe:
        "An origin (https://app.example.com) whose web pages may call authenticate, the read API and GET /api/v1/live from a browser; repeatable or comma-separated. Default: none, no CORS (env TRAILWIRE_CORS_ORIGIN)",
    })
    .option('max-health-watches', {
      type: 'number',
      default: d.maxHealthWatches,
      describe: 'grpc.health.v1.Health/Watch streams open at once on the gRPC port (unauthenticated); 0 serves Check only (env TRAILWIRE_MAX_HEALTH_WATCHES)',
    })
    .option('max-health-watches-per-connection', {
      type: 'number',
      default: d.maxHealthWatchesPerConnection,
      describe: 'grpc.health.v1.Health/Watch streams open at once on one gRPC connection (env TRAILWIRE_MAX_HEALTH_WATCHES_PER_CONNECTION)',
    })
    .option('max-connections', {
      type: 'number',
      default: d.maxConnections,
      describe: 'Connections open at once, on the HTTP port and apart on the gRPC port; the next is closed as it arrives; 0: no cap (env TRAILWIRE_MAX_CONNECTIONS)',
    })
    .option('max-connections-per-address', {
      type: 'number',
      default: d.maxConnectionsPerAddress,
      describe:
        'Connections open at once from one peer address, on the HTTP port and apart on the gRPC port; trusted proxies (--trusted-proxies, or every peer with --trust-proxy alone) are exempt; 0: no cap (env TRAILWIRE_MAX_CONNECTIONS_PER_ADDRESS)',
    })
    .option('send-timeout', {
      type: 'number',
      default: d.sendTimeoutSeconds,
      describe: 'Seconds a client may take to read an HTTP answer once the server has it ready; then the connection is closed (event streams excepted) (env TRAILWIRE_SEND_TIMEOUT)',
    })
    .option('metrics-port', {
      type: 'number',
      describe: 'Serve GET /metrics on this port (on --metrics-host) and not on the HTTP port (env TRAILWIRE_METRICS_PORT). Default: on the HTTP port',
    })
    .option('metrics-host', {
      type: 'string',
      default: d.metricsHost,
      describe: 'Interface of the --metrics-port listener (env TRAILWIRE_METRICS_HOST)',
    })
    // What one partner may do to intake (issue 29), kept together.
    .option('partner-intake-limit', {
      type: 'string',
      default: d.partnerIntakeLimit,
      describe: `Intake requests per partner, refusals included, as ${LIMIT_FORMAT}; \`trailwire partners set-limit\` sets a partner's own (env TRAILWIRE_PARTNER_INTAKE_LIMIT)`,
    })
    .option('partner-new-vins-per-day', {
      type: 'number',
      default: d.partnerNewVinsPerDay,
      describe: "New VINs (unknown to the store) each partner may send to per UTC day, 0 for none; `trailwire partners set-limit` sets a partner's own (env TRAILWIRE_PARTNER_NEW_VINS_PER_DAY)",
    })
    .option('require-grants', {
      type: 'boolean',
      default: false,
      describe: 'Every customer takes intake for its registered trailers only from the partners it granted (`trailwire grants add`); without it, a customer with no grants takes intake from any partner of the product (env TRAILWIRE_REQUIRE_GRANTS)',
    })
    .option('webhook-allow-http', {
      type: 'boolean',
      default: false,
      describe: 'Customers may register plain http:// webhook URLs; without it, https only (env TRAILWIRE_WEBHOOK_ALLOW_HTTP)',
    })
    .option('webhook-allow-private', {
      type: 'boolean',
      default: false,
      describe:
        'Webhooks may go to private, loopback, link-local and other non-public addresses (checked after DNS, at each connection); without it, public addresses only (env TRAILWIRE_WEBHOOK_ALLOW_PRIVATE)',
    })
    .option('webhook-max-per-customer', {
      type: 'number',
      default: d.webhookMaxPerCustomer,
      describe: 'Webhook endpoints each customer may register (env TRAILWIRE_WEBHOOK_MAX_PER_CUSTOMER)',
    }) as Argv<T & ServeSettingArguments>;
}

/** What the serve settings set in `ServerOptions`; `core` is merged into the server's core options. */
export type ServeSettings = Pick<
  ServerOptions,
  'trustProxy' | 'trustedProxies' | 'corsOrigins' | 'intakeBodyLimitBytes' | 'maxStreamsPerCustomer' | 'healthWatch' | 'connectionLimits' | 'metrics'
> & {
  core: Pick<TrailwireOptions, 'tokens' | 'signingAlgorithm' | 'limits' | 'verifyVinCheckDigit' | 'productLimits' | 'live' | 'partnerIntake' | 'webhooks'>;
};

/** Checks the serve settings, throwing a `validation_failed` that names the first bad option, and maps them. */
export function serveSettingsOf(args: ServeSettingArguments): ServeSettings {
  return {
    trustProxy: args['trust-proxy'],
    trustedProxies: trustedProxiesOf(args['trusted-proxies']),
    corsOrigins: parseCorsOrigins(args['cors-origin'].flatMap((value) => String(value).split(/[\s,]+/)).filter((entry) => entry !== '')),
    healthWatch: {
      maxWatches: integerIn('--max-health-watches', args['max-health-watches'], HEALTH_WATCHES, 'streams'),
      maxWatchesPerConnection: integerIn('--max-health-watches-per-connection', args['max-health-watches-per-connection'], HEALTH_WATCHES, 'streams'),
    },
    connectionLimits: {
      maxConnections: integerIn('--max-connections', args['max-connections'], CONNECTIONS, 'connections'),
      maxConnectionsPerAddress: integerIn('--max-connections-per-address', args['max-connections-per-address'], CONNECTIONS, 'connections'),
      sendTimeoutMs: integerIn('--send-timeout', args['send-timeout'], SEND_TIMEOUT_SECONDS, 'seconds') * 1000,
    },
    ...(args['metrics-port'] === undefined
      ? {}
      : { metrics: { port: integerIn('--metrics-port', args['metrics-port'], { min: 0, max: 65_535 }, ''), host: args['metrics-host'] } }),
    intakeBodyLimitBytes: integerIn('--body-limit', args['body-limit'], BODY_LIMIT_BYTES, 'bytes'),
    maxStreamsPerCustomer: integerIn('--max-streams-per-customer', args['max-streams-per-customer'], STREAMS_PER_CUSTOMER, 'streams'),
    core: {
      tokens: { ttlSeconds: integerIn('--token-ttl', args['token-ttl'], TOKEN_TTL_SECONDS, 'seconds') },
      signingAlgorithm: args['signing-algorithm'],
      limits: {
        authenticate: limitOf('--authenticate-limit', args['authenticate-limit']),
        failedAuthenticatePerAddress: limitOf('--failed-authenticate-limit', args['failed-authenticate-limit']),
        rotate: limitOf('--rotate-limit', args['rotate-limit']),
        read: limitOf('--read-limit', args['read-limit']),
        liveConnect: limitOf('--live-connect-limit', args['live-connect-limit']),
        liveConnectPerAddress: limitOf('--live-connect-address-limit', args['live-connect-address-limit']),
      },
      verifyVinCheckDigit: args['verify-vin-check-digit'],
      live: { replay: { replaySeconds: integerIn('--live-replay-seconds', args['live-replay-seconds'], LIVE_REPLAY_SECONDS, 'seconds') } },
      productLimits: productLimitsOf(args['product-limit']),
      partnerIntake: {
        budget: limitOf('--partner-intake-limit', args['partner-intake-limit']),
        newVinsPerDay: integerIn('--partner-new-vins-per-day', args['partner-new-vins-per-day'], NEW_VINS_PER_DAY, 'VINs'),
        requireGrants: args['require-grants'],
      },
      webhooks: {
        rules: { allowHttp: args['webhook-allow-http'], allowPrivate: args['webhook-allow-private'] },
        maxEndpointsPerCustomer: integerIn('--webhook-max-per-customer', args['webhook-max-per-customer'], WEBHOOKS_PER_CUSTOMER, 'endpoints'),
      },
    },
  };
}

/** `REQUESTS/WINDOW_SECONDS`, e.g. `600/60`: both whole numbers, at least 1 request in at least 1 s. */
export function limitOf(option: string, text: string): { requests: number; windowSeconds: number } {
  const match = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(String(text));
  if (!match) throw invalidSetting(`${option} ${text}: expected ${LIMIT_FORMAT} in whole numbers, e.g. 600/60`);
  const [requests, windowSeconds] = [Number(match[1]), Number(match[2])];
  if (requests < 1) throw invalidSetting(`${option} ${text}: requests must be ≥ 1`);
  if (windowSeconds < 1) throw invalidSetting(`${option} ${text}: window must be ≥ 1 s`);
  if (!Number.isSafeInteger(requests) || !Number.isSafeInteger(windowSeconds)) throw invalidSetting(`${option} ${text}: the numbers are too large`);
  return { requests, windowSeconds };
}

/** `--product-limit NAME=REQUESTS[/WINDOW_SECONDS]`, parsed into `productLimits`; the core checks the names. */
function productLimitsOf(specs: readonly string[]): Record<string, Partial<IntakeLimit>> {
  const limits: Record<string, Partial<IntakeLimit>> = {};
  for (const spec of specs) {
    const match = /^([^=\s]+)=(\d+)(?:\/(\d+))?$/.exec(spec);
    if (!match) throw invalidSetting(`--product-limit ${spec}: expected NAME=REQUESTS or NAME=REQUESTS/WINDOW_SECONDS`);
    limits[match[1]!] = { requests: Number(match[2]), ...(match[3] === undefined ? {} : { windowSeconds: Number(match[3]) }) };
  }
  return limits;
}

/** `--trusted-proxies a,b --trusted-proxies c` (and the variable's `a,b`): every entry checked, naming a bad one. */
function trustedProxiesOf(values: readonly string[]): string[] {
  const entries = values.flatMap((value) => String(value).split(',')).map((entry) => entry.trim()).filter((entry) => entry !== '');
  try {
    trustedProxyList(entries);
  } catch (error) {
    throw invalidSetting(`--trusted-proxies: ${(error as Error).message}`);
  }
  return entries;
}

/** A port option (`--port`, `--grpc-port`): 0 (any free port) to 65535. */
export function portOf(option: string, value: number): number {
  return integerIn(option, value, { min: 0, max: 65_535 }, '');
}

/** A whole number option of at least 1, e.g. `--heartbeat-ms`. */
export function positiveIntegerOf(option: string, value: number, unit: string): number {
  return integerIn(option, value, { min: 1, max: Number.MAX_SAFE_INTEGER }, unit);
}

function integerIn(option: string, value: number, bounds: { min: number; max: number }, unit: string): number {
  if (Number.isInteger(value) && value >= bounds.min && value <= bounds.max) return value;
  const range = bounds.max === Number.MAX_SAFE_INTEGER ? `≥ ${bounds.min}` : `from ${bounds.min} to ${bounds.max}`;
  const got = Number.isNaN(value) ? 'a value that is not a number' : String(value);
  throw invalidSetting(`${option} must be a whole number${unit ? ` of ${unit}` : ''} ${range}, got ${got}`);
}

function invalidSetting(message: string): TrailwireError {
  return new TrailwireError('validation_failed', message);
}
