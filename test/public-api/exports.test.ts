/**
 * The package's `exports` are its public API. Each subpath imports by the package's own name (as an
 * integrator's code does) and exposes exactly the runtime names documented for it in
 * docs/api-reference.md — a name added or dropped by accident fails here, and so does a subpath
 * nobody documented. Types are pinned by the other files of this folder, at `npm run typecheck`.
 */
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const CORE = [
  'AdminService', 'AuthService', 'CursorCodec', 'DEFAULT_FAILOVER_RETRY_INTERVAL_MS', 'DEFAULT_INTAKE_WORKER_OPTIONS', 'DEFAULT_LIMITS', 'ERROR_CODES', 'ERROR_DESCRIPTIONS',
  'EXAMPLE_RECEIVED_AT', 'EXAMPLE_VIN', 'FailoverWindowCounter', 'FixedWindowLimiter', 'HEADINGS', 'HTTP_STATUS_BY_CODE', 'IDEMPOTENCY_WINDOW_MS', 'INTAKE_STATUSES',
  'IntakeService', 'IntakeWorker', 'PartitionedIntakeQueue', 'JSON_SCHEMA_DIALECT', 'LiveHub', 'MAX_READING_LEAD_MS', 'MAX_WINDOW_SECONDS', 'ManualClock', 'MemoryLiveBus',
  'MemoryWindowCounter', 'PRODUCT_NAME_PATTERN', 'ProductRegistry', 'ReadService', 'SigningKeyRing', 'TAKE_DEFAULT', 'TAKE_MAX', 'TEXT_LINE_PATTERN',
  'TokenService', 'TrailwireError', 'cardinalHeading', 'checkCanonicalTelemetry', 'createProductRegistry', 'createTrailwire',
  'defineProduct', 'deriveTrailerStatus', 'invalidField', 'isProduct', 'isTrailwireError', 'loadProductModule', 'parseRfc3339',
  'parseVin', 'problemType', 'productOfScope', 'randomIds', 'requireAudience', 'systemClock', 'vinCheckDigit', 'withCheckDigit',
];

/** The runtime names of each subpath (type-only exports have no runtime name). */
const DOCUMENTED_EXPORTS: Record<string, readonly string[]> = {
  '.': CORE,
  './core': CORE,
  './koa': [
    'DEFAULT_INTAKE_BODY_LIMIT', 'INTAKE_PATH', 'LIVE_EVENTS_PATH', 'bearerAuth', 'buildOpenApiDocument', 'createAuthRouter', 'createHttpMetrics',
    'createIntakeRouter', 'createLiveEventsRoute', 'createOpsRouter', 'createPagesMiddleware', 'createReadRouter', 'createTrailwireApp', 'createTrailwireHandler',
    'createTrailwireMiddleware', 'problemMiddleware', 'registerDependencyMetrics',
    'requestIdMiddleware', 'trustedProxyList',
  ],
  './grpc': [
    'DEFAULT_HEALTH_WATCH_LIMITS', 'GRPC_STATUS_BY_CODE', 'HealthStatus', 'LIVE_FEED_SERVICE_NAME', 'PROTO_ROOT', 'addHealthService', 'addLiveFeedService',
    'createLiveFeedService', 'decodeLiveUpdateResponse', 'grpcStatusOf', 'startGrpcServer',
  ],
  './sqlite': [
    'DEFAULT_SQLITE_STORE_OPTIONS', 'STORE_COMPONENT', 'STORE_MIGRATIONS', 'SqliteIntakeQueue', 'applyMigrations', 'openSqliteIntake', 'openSqliteIntakeQueue',
    'openSqliteStore', 'readableByOthers', 'resolveSqliteStoreOptions',
  ],
  './nats': ['DEFAULT_JETSTREAM_INTAKE_LOG_OPTIONS', 'JetStreamIntakeLog', 'jetStreamOptionsOfUrl', 'openJetStreamIntakeLog', 'resolveJetStreamIntakeLogOptions'],
  './server': ['DEFAULT_DB_FILE', 'startServer'],
  './products': ['builtInProducts', 'cargosafe', 'gpsBasic', 'tpms'],
  './products/gps-basic': ['EARLIEST_TIMESTAMP', 'KM_PER_MILE', 'LATEST_TIMESTAMP_EXCLUSIVE', 'default', 'kphToMph'],
  './products/tpms': ['TPMS_THRESHOLDS', 'default', 'tpmsState'],
  './products/cargosafe': ['default'],
  './client': ['MAX_INTAKE_STATUS_IDS', 'TrailwireClient', 'TrailwireHttpError', 'subscribeLiveEvents', 'subscribeLiveFeed', 'subscribeWithClient'],
  './testing': ['runProductConformance'],
  './postgres': [
    'DEFAULT_POSTGRES_INTAKE_QUEUE_OPTIONS', 'DEFAULT_POSTGRES_STORE_OPTIONS', 'POSTGRES_QUEUE_COMPONENT', 'POSTGRES_QUEUE_MIGRATIONS',
    'INTAKE_PARTITIONS', 'POSTGRES_STORE_COMPONENT', 'POSTGRES_STORE_MIGRATIONS', 'PostgresIntakeQueue', 'applyPostgresMigrations', 'createPostgresPool',
    'openPostgresIntake', 'openPostgresIntakeIndex', 'openPostgresIntakeLog', 'POSTGRES_INDEX_COMPONENT', 'POSTGRES_INDEX_MIGRATIONS', 'openPostgresIntakeQueue', 'openPostgresStore', 'quoteSchema', 'resolvePostgresIntakeQueueOptions', 'resolvePostgresStoreOptions',
    'withTransaction', 'writeOrExplain',
  ],
  './redis': [
    'DEFAULT_REDIS_LIVE_BUS_OPTIONS', 'DEFAULT_REDIS_PROCESS_REGISTRY_OPTIONS', 'DEFAULT_REDIS_ROTATION_FEED_OPTIONS',
    'DEFAULT_REDIS_WINDOW_COUNTER_OPTIONS', 'RedisLiveBus', 'RedisProcessRegistry', 'RedisRotationFeed', 'RedisWindowCounter', 'openRedisLiveBus', 'openRedisRotationFeed',
  ],
};

/** Entries whose surface is settled elsewhere: they must import and carry these names. None left. */
const AT_LEAST: Record<string, readonly string[]> = {};

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { name: string; exports: Record<string, string> };
const specifier = (subpath: string) => (subpath === '.' ? packageJson.name : `${packageJson.name}/${subpath.slice(2)}`);

describe('package exports', () => {
  it('every subpath in package.json is documented here (or is a file pattern)', () => {
    const patterns = new Set(['./products/*', './proto/*', './package.json']);
    const products = ['./products/gps-basic', './products/tpms', './products/cargosafe'];
    const known = new Set([...Object.keys(DOCUMENTED_EXPORTS), ...Object.keys(AT_LEAST), ...patterns].filter((s) => !products.includes(s)));
    assert.deepEqual(Object.keys(packageJson.exports).sort(), [...known].sort());
  });

  for (const [subpath, names] of Object.entries(DOCUMENTED_EXPORTS))
    it(`${specifier(subpath)} exposes exactly its documented names`, async () => {
      const module = (await import(specifier(subpath))) as Record<string, unknown>;
      assert.deepEqual(Object.keys(module).sort(), [...names].sort());
      for (const name of names) assert.notEqual(module[name], undefined, `${name} is defined`);
    });

  for (const [subpath, names] of Object.entries(AT_LEAST))
    it(`${specifier(subpath)} imports and carries ${names.join(', ')}`, async () => {
      const module = (await import(specifier(subpath))) as Record<string, unknown>;
      for (const name of names) assert.equal(typeof module[name], 'function', name);
    });

  it('trailwire and trailwire/core are the same module', async () => {
    assert.equal((await import('trailwire')).createTrailwire, (await import('trailwire/core')).createTrailwire);
  });

  it('each built-in product module default-exports its product, the same one trailwire/products lists', async () => {
    const { builtInProducts } = await import('trailwire/products');
    for (const product of builtInProducts) {
      const module = (await import(`trailwire/products/${product.name}`)) as { default: unknown };
      assert.equal(module.default, product);
    }
  });

  it('the proto files and package.json resolve through their subpaths', () => {
    assert.ok(existsSync(fileURLToPath(import.meta.resolve('trailwire/proto/livefeed/v1/livefeed.proto'))));
    assert.equal(JSON.parse(readFileSync(fileURLToPath(import.meta.resolve('trailwire/package.json')), 'utf8')).name, 'trailwire');
  });

  it('internals stay internal', async () => {
    const core = (await import('trailwire/core')) as Record<string, unknown>;
    for (const name of ['statusView', 'KeyVersions', 'generateApiKey', 'hashApiKey', 'compileJsonSchema', 'timeOrderedIds'])
      assert.equal(core[name], undefined, `trailwire/core does not export ${name}`);
    const grpc = (await import('trailwire/grpc')) as Record<string, unknown>;
    for (const name of ['liveFeedServiceDefinition', 'encodeLiveUpdateResponse', 'HEARTBEAT_MESSAGE'])
      assert.equal(grpc[name], undefined, `trailwire/grpc does not export ${name}`);
    const sqlite = (await import('trailwire/sqlite')) as Record<string, unknown>;
    for (const name of ['IntakeThread', 'WriteLockHandoff']) assert.equal(sqlite[name], undefined, `trailwire/sqlite does not export ${name}`);
  });

  it('docs/api-reference.md names every documented export of every entry', () => {
    const reference = readFileSync(new URL('../../docs/api-reference.md', import.meta.url), 'utf8');
    for (const [subpath, names] of Object.entries({ ...DOCUMENTED_EXPORTS, ...AT_LEAST })) {
      assert.ok(reference.includes(`\`${specifier(subpath)}\``), `the reference has a section for ${specifier(subpath)}`);
      for (const name of names) if (name !== 'default') assert.ok(reference.includes(`\`${name}`), `${specifier(subpath)}: ${name} is in docs/api-reference.md`);
    }
  });
});
