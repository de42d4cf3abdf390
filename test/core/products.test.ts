import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { MAX_READING_LEAD_MS, type CanonicalTelemetry } from '../../core/canonical.ts';
import { TrailwireError } from '../../core/errors.ts';
import {
  createProductRegistry,
  defineProduct,
  isProduct,
  loadProductModule,
  ProductRegistry,
  TEXT_LINE_PATTERN,
  type ProductDefinition,
} from '../../core/products.ts';

interface Meter {
  meterId: string;
  value: number;
  at: number;
}

/** A small valid definition; tests break one field at a time. */
function meterDefinition(overrides: Partial<ProductDefinition<Meter>> = {}): ProductDefinition<Meter> {
  return {
    name: 'meter',
    description: 'A test meter.',
    limit: { requests: 10, windowSeconds: 60 },
    schema: {
      type: 'object',
      additionalProperties: false,
      required: ['meterId', 'value', 'at'],
      properties: {
        meterId: { type: 'string', minLength: 1, maxLength: 10, pattern: TEXT_LINE_PATTERN },
        value: { type: 'number', minimum: 0, maximum: 100 },
        at: { type: 'integer', minimum: 0 },
      },
    },
    examples: [{ meterId: 'm1', value: 5, at: 1_000 }],
    transform: (_vin, payload): CanonicalTelemetry => ({
      gps: [],
      devices: [
        {
          kind: 'meter',
          serial: payload.meterId,
          position: null,
          timestamp: payload.at,
          metrics: { value: payload.value },
          state: { isWarning: payload.value > 50, isFault: false },
        },
      ],
      cargosafe: [],
    }),
    ...overrides,
  };
}

const VIN = '1HGCM82633A004352';

describe('defineProduct', () => {
  it('answers an immutable product carrying the definition', () => {
    const product = defineProduct(meterDefinition());
    assert.ok(isProduct(product));
    assert.equal(product.name, 'meter');
    assert.deepEqual(product.limit, { requests: 10, windowSeconds: 60 });
    assert.ok(Object.isFrozen(product) && Object.isFrozen(product.schema) && Object.isFrozen(product.examples[0]));
    assert.deepEqual(product.transform(VIN, { meterId: 'x', value: 60, at: 5 }, 0).devices[0]!.state, { isWarning: true, isFault: false });
  });

  it('keeps its own copy of the schema and examples', () => {
    const definition = meterDefinition();
    const product = defineProduct(definition);
    definition.examples[0].value = 1000;
    (definition.schema.properties.value as { maximum: number }).maximum = 1;
    assert.equal(product.examples[0]!.value, 5);
    assert.deepEqual(product.validate({ meterId: 'm', value: 50, at: 0 }), []);
  });

  it('refuses names that cannot be a token scope, naming the bad name', () => {
    for (const name of ['Meter', 'm', '1meter', 'meter_1', 'me ter', 'm'.repeat(42), '', 'product:meter'])
      assert.throws(() => defineProduct(meterDefinition({ name })), {
        name: 'TypeError',
        message: new RegExp(`product name ${JSON.stringify(name).replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} must match`),
      });
    for (const name of ['ab', 'a'.repeat(41), 'gps-basic-v2']) assert.equal(defineProduct(meterDefinition({ name })).name, name);
  });

  const refusals: Array<[string, Partial<ProductDefinition<Meter>>, RegExp]> = [
    ['an empty description', { description: ' ' }, /product "meter": `description` must be a non-empty string/],
    ['a schema that is not an object', { schema: 'x' as never }, /product "meter": `schema` must be a JSON Schema object/],
    [
      'another JSON Schema dialect',
      { schema: { ...meterDefinition().schema, $schema: 'http://json-schema.org/draft-07/schema#' as never } },
      /product "meter": `schema.\$schema` must be "https:\/\/json-schema.org\/draft\/2020-12\/schema"/,
    ],
    ['a root that is not an object schema', { schema: { type: 'array' as never, properties: {} } }, /`schema.type` must be "object"/],
    [
      'a keyword Ajv strict mode does not know',
      { schema: { type: 'object', properties: { meterId: { type: 'string', minLenght: 1 } } } },
      /product "meter": `schema` does not compile \(JSON Schema draft 2020-12, Ajv strict mode\): .*minLenght/,
    ],
    ['a limit of zero requests', { limit: { requests: 0, windowSeconds: 60 } }, /`limit.requests` must be a positive integer, got 0/],
    ['fractional requests', { limit: { requests: 1.5, windowSeconds: 60 } }, /`limit.requests` must be a positive integer, got 1.5/],
    ['a missing window', { limit: { requests: 1 } as never }, /`limit.windowSeconds` must be a positive integer, got undefined/],
    ['a window in milliseconds', { limit: { requests: 1, windowSeconds: 300_000 } }, /`limit.windowSeconds` must be at most 86400 \(one day\), got 300000: seconds, not milliseconds/],
    ['a transform that is not a function', { transform: 'x' as never }, /product "meter": `transform` must be a function/],
    ['a validate hook that is not a function', { validate: {} as never }, /product "meter": `validate` must be a function/],
    ['a readingTimes hook that is not a function', { readingTimes: '/at' as never }, /product "meter": `readingTimes` must be a function/],
    [
      'a readingTimes hook that throws on an example',
      { readingTimes: () => { throw new Error('no clock'); } },
      /product "meter": `readingTimes` throws on examples\[0\]: no clock/,
    ],
    ['reading times that are not a list', { readingTimes: (p) => ({ pointer: '/at', at: p.at }) as never }, /`readingTimes` must answer an array of \{ pointer, at \}, got a value of type object \(on examples\[0\]\)/],
    ['a reading time without a JSON pointer', { readingTimes: (p) => [{ pointer: 'at', at: p.at }] }, /`readingTimes` \[0\]\.pointer must be a JSON pointer into the payload/],
    ['a reading time in seconds with a fraction', { readingTimes: (p) => [{ pointer: '/at', at: p.at / 1000 + 0.5 }] }, /`readingTimes` \[0\]\.at must be an integer of epoch milliseconds, at least 0, got 1\.5/],
    ['no examples', { examples: [] as never }, /product "meter": `examples` must be an array of at least one valid payload/],
    [
      'an invalid example',
      { examples: [{ meterId: 'm1', value: 5, at: 1 }, { meterId: 'm2', value: 500, at: 1 }] },
      /product "meter": `examples\[1\]` does not validate: \/value must be at most 100/,
    ],
    [
      'an example the validate hook refuses',
      { validate: (p) => (p.meterId === 'm1' ? [{ path: '/meterId', message: 'is reserved' }] : []) },
      /`examples\[0\]` does not validate: \/meterId is reserved/,
    ],
    [
      'a transform that throws on an example',
      { transform: () => { throw new Error('boom'); } },
      /product "meter": `transform` throws on examples\[0\]: boom/,
    ],
    [
      'a transform that yields invalid canonical data',
      { transform: () => ({ gps: [{ timestamp: 1, lat: 91, long: 0, speed: 0, heading: 'N' }], devices: [], cargosafe: [] }) },
      /product "meter": `transform` turns examples\[0\] into invalid canonical telemetry: \/gps\/0\/lat must be a finite number from -90 to 90/,
    ],
  ];
  for (const [what, overrides, message] of refusals)
    it(`refuses ${what}, naming the product and the field`, () => {
      assert.throws(() => defineProduct(meterDefinition(overrides)), { name: 'TypeError', message });
    });

  it('refuses a definition that is not an object', () => {
    assert.throws(() => defineProduct(null as never), { name: 'TypeError', message: /definition must be an object/ });
  });
});

describe('Product.validate and parse', () => {
  const withHook = defineProduct(
    meterDefinition({
      validate: (payload) => (payload.meterId.startsWith('x') ? [{ path: '/meterId', message: 'must not start with x' }] : []),
    }),
  );

  it('runs the validate hook only on payloads the schema accepted', () => {
    assert.deepEqual(withHook.validate({}), [
      { path: '/meterId', message: 'is required' },
      { path: '/value', message: 'is required' },
      { path: '/at', message: 'is required' },
    ]);
    assert.deepEqual(withHook.validate({ meterId: 'x1', value: 1, at: 1 }), [{ path: '/meterId', message: 'must not start with x' }]);
    assert.deepEqual(withHook.validate({ meterId: 'm1', value: 1, at: 1 }), []);
  });

  it('parse answers the payload or a validation_failed error with the field errors', () => {
    const payload = { meterId: 'm1', value: 1, at: 1 };
    assert.equal(withHook.parse(payload), payload);
    assert.throws(() => withHook.parse({ meterId: 'm1', value: 'high', at: 1 }), (error: unknown) => {
      assert.ok(error instanceof TrailwireError);
      assert.equal(error.code, 'validation_failed');
      assert.match(error.message, /product "meter"/);
      assert.deepEqual(error.errors, [{ path: '/value', message: 'must be a number' }]);
      return true;
    });
  });

  it('refuses a validate hook that does not answer an array', () => {
    const product = defineProduct(meterDefinition({ validate: (p) => (p.value === 7 ? (undefined as never) : []) }));
    assert.throws(() => product.validate({ meterId: 'm', value: 7, at: 1 }), { name: 'TypeError', message: /`validate` must answer an array/ });
  });
});

describe('ProductRegistry.readingsAhead', () => {
  const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
  const dated = defineProduct(meterDefinition({ readingTimes: (p) => [{ pointer: '/at', at: p.at }] }));
  const registry = createProductRegistry([dated]);
  const reading = (at: number) => ({ meterId: 'm', value: 1, at });

  it('accepts a reading dated up to exactly 5 minutes after the clock, and any time before it', () => {
    assert.equal(MAX_READING_LEAD_MS, 300_000);
    for (const at of [NOW + MAX_READING_LEAD_MS, NOW, NOW - 365 * 86_400_000, 0]) assert.deepEqual(registry.readingsAhead('meter', reading(at), NOW), [], new Date(at).toISOString());
  });

  it('refuses a reading dated more than 5 minutes after the clock at its pointer, naming both times', () => {
    assert.deepEqual(registry.readingsAhead('meter', reading(NOW + MAX_READING_LEAD_MS + 1), NOW), [
      { path: '/at', message: "is 2026-06-01T12:05:00.001Z, more than 5 minutes after the server's clock (2026-06-01T12:00:00.000Z): check the device's clock" },
    ]);
  });

  it('reports each field once, with the latest time it states', () => {
    const batch = createProductRegistry([
      defineProduct(meterDefinition({ readingTimes: (p) => [{ pointer: '/at', at: p.at }, { pointer: '/at', at: p.at + 60_000 }, { pointer: '/value', at: NOW }] })),
    ]);
    const errors = batch.readingsAhead('meter', reading(NOW + 3_600_000), NOW);
    assert.deepEqual(errors.map((e) => e.path), ['/at']);
    assert.match(errors[0]!.message, /^is 2026-06-01T13:01:00\.000Z/);
  });

  it('checks nothing for a product that declares no reading times (its transform alone dates a payload)', () => {
    assert.deepEqual(createProductRegistry([defineProduct(meterDefinition())]).readingsAhead('meter', reading(NOW + 86_400_000), NOW), []);
  });

  it('reports a readingTimes hook that fails on a valid payload as internal, naming the product', () => {
    const fragile = defineProduct(
      meterDefinition({
        readingTimes: (p) => {
          if (p.value === 13) throw new Error('unlucky');
          return p.value === 14 ? [{ pointer: '/at', at: Number.NaN }] : [];
        },
      }),
    );
    const fragileRegistry = createProductRegistry([fragile]);
    assert.throws(() => fragileRegistry.readingsAhead('meter', { ...reading(1), value: 13 }, NOW), {
      code: 'internal',
      message: `product "meter" failed to read the payload's times: unlucky`,
    });
    assert.throws(() => fragileRegistry.readingsAhead('meter', { ...reading(1), value: 14 }, NOW), {
      code: 'internal',
      message: /product "meter" failed to read the payload's times: product "meter": `readingTimes` \[0\]\.at must be an integer of epoch milliseconds/,
    });
  });
});

describe('ProductRegistry', () => {
  const meter = defineProduct(meterDefinition());
  const gauge = defineProduct(meterDefinition({ name: 'gauge', limit: { requests: 5, windowSeconds: 300 } }));

  it('registers products and lists them in registration order', () => {
    const registry = new ProductRegistry().register(meter).register(gauge);
    assert.deepEqual(registry.list().map((p) => p.name), ['meter', 'gauge']);
    assert.equal(registry.get('gauge'), gauge);
    assert.equal(registry.has('meter'), true);
    assert.equal(registry.has('nope'), false);
  });

  it('refuses a second product with the same name, naming it', () => {
    const registry = createProductRegistry([meter]);
    assert.throws(() => registry.register(defineProduct(meterDefinition())), /ProductRegistry.register: product "meter" is already registered/);
    assert.throws(() => createProductRegistry([meter, gauge, meter]), /product "meter" is already registered/);
  });

  it('refuses what is not a product made by defineProduct', () => {
    assert.throws(() => new ProductRegistry().register(meterDefinition() as never), {
      name: 'TypeError',
      message: /is not a product; create it with defineProduct/,
    });
  });

  it('answers an unknown product with forbidden, naming it', () => {
    const registry = createProductRegistry([meter]);
    for (const call of [() => registry.get('reefer'), () => registry.limitOf('reefer'), () => registry.validate('reefer', {})])
      assert.throws(call, (error: unknown) => {
        assert.ok(error instanceof TrailwireError);
        assert.equal(error.code, 'forbidden');
        assert.equal(error.message, `the token's product "reefer" is not installed on this server`);
        return true;
      });
  });

  it('gives each product its default limit unless the operator overrides it, wholly or partly', () => {
    const registry = createProductRegistry([meter, gauge], { limitOverrides: { meter: { requests: 1000 }, gauge: { requests: 2, windowSeconds: 1 } } });
    assert.deepEqual(registry.limitOf('meter'), { requests: 1000, windowSeconds: 60 });
    assert.deepEqual(registry.limitOf('gauge'), { requests: 2, windowSeconds: 1 });
    assert.deepEqual(createProductRegistry([meter]).limitOf('meter'), { requests: 10, windowSeconds: 60 });
  });

  it('refuses bad limit overrides, naming the field', () => {
    assert.throws(() => new ProductRegistry({ limitOverrides: { meter: { requests: -1 } } }), {
      name: 'TypeError',
      message: /`limitOverrides.meter.requests` must be a positive integer, got -1/,
    });
    assert.throws(() => new ProductRegistry({ limitOverrides: { meter: { windowSeconds: 0.5 } } }), /`limitOverrides.meter.windowSeconds` must be a positive integer/);
    assert.throws(() => createProductRegistry([meter], { limitOverrides: { metre: { requests: 1 } } }), {
      name: 'TypeError',
      message: /`limitOverrides` names "metre", which is not installed \(installed: meter\)/,
    });
  });

  it('validates a body against the product schema into field errors', () => {
    const registry = createProductRegistry([meter]);
    assert.deepEqual(registry.validate('meter', { meterId: 'm', value: 1, at: 1 }), []);
    assert.deepEqual(registry.validate('meter', { meterId: '', value: 1, at: 1, extra: true }), [
      { path: '/extra', message: 'is not an allowed property' },
      { path: '/meterId', message: 'must be at least 1 characters long' },
      { path: '/meterId', message: `must match the pattern ${TEXT_LINE_PATTERN}` },
    ]);
    assert.deepEqual(registry.validate('meter', { meterId: 'm\u001b[2J', value: 1, at: 1 }), [
      { path: '/meterId', message: `must match the pattern ${TEXT_LINE_PATTERN}` },
    ]);
    assert.deepEqual(registry.validate('meter', 'text'), [{ path: '', message: 'must be an object' }]);
  });

  describe('transform', () => {
    it('answers the canonical telemetry of a valid payload', () => {
      const registry = createProductRegistry([meter]);
      assert.deepEqual(registry.transform('meter', VIN, { meterId: 'm', value: 1, at: 7 }, 0).devices[0]!.timestamp, 7);
    });

    it('refuses a payload that does not validate with validation_failed', () => {
      const registry = createProductRegistry([meter]);
      assert.throws(() => registry.transform('meter', VIN, { meterId: 'm', value: -1, at: 7 }, 0), {
        code: 'validation_failed',
        errors: [{ path: '/value', message: 'must be at least 0' }],
      });
    });

    it('reports a transform that throws as internal, naming the product and keeping the cause', () => {
      const cause = new Error('division by zero');
      const flaky = defineProduct(
        meterDefinition({
          transform: (vin, payload) => {
            if (payload.value === 13) throw cause;
            return meterDefinition().transform(vin, payload, 0);
          },
        }),
      );
      assert.throws(() => createProductRegistry([flaky]).transform('meter', VIN, { meterId: 'm', value: 13, at: 1 }, 0), {
        code: 'internal',
        message: 'product "meter" failed to transform the payload: division by zero',
        cause,
      });
    });

    it('reports invalid canonical output as internal, naming the product and the field', () => {
      const sloppy = defineProduct(
        meterDefinition({
          transform: (vin, payload) => {
            const telemetry = meterDefinition().transform(vin, payload, 0);
            if (payload.value === 0) telemetry.devices[0]!.metrics.ratio = Number.NaN;
            return telemetry;
          },
        }),
      );
      assert.throws(() => createProductRegistry([sloppy]).transform('meter', VIN, { meterId: 'm', value: 0, at: 1 }, 0), {
        code: 'internal',
        message: 'product "meter" produced invalid canonical telemetry: /devices/0/metrics/ratio must be a finite number',
      });
    });
  });
});

describe('loadProductModule', () => {
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-products-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const coreUrl = pathToFileURL(fileURLToPath(new URL('../../core/products.ts', import.meta.url))).href;
  const write = (file: string, source: string): string => {
    writeFileSync(join(dir, file), source);
    return join(dir, file);
  };
  const definitionSource = `{
    name: 'widget', description: 'A widget.', limit: { requests: 1, windowSeconds: 1 },
    schema: { type: 'object', additionalProperties: false, required: ['n'], properties: { n: { type: 'integer' } } },
    examples: [{ n: 1 }],
    transform: (_vin, p) => ({ gps: [], devices: [], cargosafe: [{ serial: 'w' + p.n, timestamp: 1, doorOpen: false, loadPercent: 0, temperatureC: 0, humidityPercent: 0 }] }),
  }`;
  write('widget.ts', `import { defineProduct } from '${coreUrl}';\nexport default defineProduct(${definitionSource});\n`);
  write('plain.ts', `export default ${definitionSource};\n`);
  write('named.ts', `import { defineProduct } from '${coreUrl}';\nexport const widget = defineProduct(${definitionSource});\n`);
  write('broken.ts', `throw new Error('cannot start');\n`);

  it('loads the default export of a module by relative or absolute path', async () => {
    const relative = await loadProductModule('./widget.ts', { cwd: dir });
    assert.ok(isProduct(relative));
    assert.equal(relative.name, 'widget');
    assert.equal(await loadProductModule(join(dir, 'widget.ts')), relative);
  });

  it('tells the author to wrap a plain definition in defineProduct', async () => {
    await assert.rejects(loadProductModule('./plain.ts', { cwd: dir }), {
      name: 'TypeError',
      message: 'product module "./plain.ts": the default export is a product definition, not a product; wrap it: export default defineProduct({ ... })',
    });
  });

  it('refuses a module without a product as its default export', async () => {
    await assert.rejects(loadProductModule('./named.ts', { cwd: dir }), {
      name: 'TypeError',
      message: 'product module "./named.ts": the default export must be a product (export default defineProduct({ ... })), got nothing (undefined)',
    });
  });

  it('names the module that cannot be loaded, keeping the cause', async () => {
    await assert.rejects(loadProductModule('./broken.ts', { cwd: dir }), (error: unknown) => {
      assert.ok(error instanceof Error);
      assert.equal(error.message, 'cannot load product module "./broken.ts": cannot start');
      assert.ok(error.cause instanceof Error);
      return true;
    });
    await assert.rejects(loadProductModule('./missing.ts', { cwd: dir }), /cannot load product module "\.\/missing\.ts"/);
    await assert.rejects(loadProductModule('trailwire-no-such-package'), /cannot load product module "trailwire-no-such-package"/);
  });
});

describe('the product conformance suite', () => {
  // Runs the suite against deliberately faulty products in a child process and checks that each
  // fault fails the case that should catch it — a suite that cannot fail protects nobody.
  const root = fileURLToPath(new URL('../../', import.meta.url));
  const dir = mkdtempSync(join(tmpdir(), 'trailwire-conformance-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const url = (path: string) => pathToFileURL(join(root, path)).href;
  const file = join(dir, 'faulty-products.ts');
  writeFileSync(
    file,
    `import { defineProduct, TEXT_LINE_PATTERN } from '${url('core/products.ts')}';
import { runProductConformance } from '${url('test/conformance/product.ts')}';
const base = {
  description: 'A faulty test product.', limit: { requests: 1, windowSeconds: 1 },
  schema: { type: 'object', additionalProperties: false, required: ['id', 'metrics'],
    properties: { id: { type: 'string', minLength: 1, pattern: TEXT_LINE_PATTERN }, metrics: { type: 'object', additionalProperties: false,
      required: ['value'], properties: { value: { type: 'number', minimum: 0 } } } } },
  examples: [{ id: 'a', metrics: { value: 1 } }],
  transform: (_vin, p, at) => ({ gps: [], devices: [{ kind: 'k', serial: p.id, position: null, timestamp: at,
    metrics: { value: p.metrics.value }, state: { isWarning: false, isFault: false } }], cargosafe: [] }),
};
const withTransform = (name, change) => defineProduct({ ...base, name,
  transform: (vin, p, at) => { const t = base.transform(vin, p, at); change(t, p); return t; } });
const loose = { ...base.schema.properties, metrics: { ...base.schema.properties.metrics, properties: { value: {} } } };
runProductConformance(defineProduct({ ...base, name: 'sound' }), { invalidPayloads: [{ payload: { id: 'a', metrics: { value: -1 } }, path: '/metrics/value' }] });
runProductConformance(withTransform('mutating', (_t, p) => { p.id = p.id + '!'; }));
runProductConformance(withTransform('clock-reading', (t) => { t.devices[0].timestamp = Date.now(); }));
runProductConformance(withTransform('random', (t) => { t.devices[0].metrics.noise = Math.random(); }));
runProductConformance(withTransform('aliasing', (t, p) => { t.devices[0].metrics = p.metrics; }));
runProductConformance(defineProduct({ ...base, name: 'lax', schema: { ...base.schema, additionalProperties: true } }));
runProductConformance(defineProduct({ ...base, name: 'loose-types', schema: { ...base.schema, properties: loose } }));
runProductConformance(defineProduct({ ...base, name: 'optional', schema: { ...base.schema, required: [] } }));
runProductConformance(defineProduct({ ...base, name: 'control-text', schema: { ...base.schema, properties: { ...base.schema.properties, id: { type: 'string', minLength: 1 } } } }));
runProductConformance(defineProduct({ ...base, name: 'wrong-path' }), { invalidPayloads: [{ payload: { id: 'a', metrics: { value: -1 } }, path: '/metrics' }] });
runProductConformance(defineProduct({ ...base, name: 'receipt-dated', readingTimes: () => [] }));
const dated = { ...base,
  schema: { ...base.schema, required: [...base.schema.required, 'at'], properties: { ...base.schema.properties, at: { type: 'integer', minimum: 0 } } },
  examples: [{ id: 'a', metrics: { value: 1 }, at: 1767268800000 }],
  transform: (_vin, p) => ({ gps: [], devices: [{ kind: 'k', serial: p.id, position: null, timestamp: p.at,
    metrics: { value: p.metrics.value }, state: { isWarning: false, isFault: false } }], cargosafe: [] }),
  readingTimes: (p) => [{ pointer: '/at', at: p.at }] };
runProductConformance(defineProduct({ ...dated, name: 'dated' }));
runProductConformance(defineProduct({ ...dated, name: 'misdated', readingTimes: (p) => [{ pointer: '/at', at: p.at - 1000 }] }));
runProductConformance(defineProduct({ ...dated, name: 'undeclared-time', readingTimes: () => [] }));
runProductConformance(defineProduct({ ...dated, name: 'wrong-time-field', readingTimes: (p) => [{ pointer: '/when', at: p.at }] }));
`,
  );

  // The child must not think it runs inside this test (node:test marks that in the environment).
  const { NODE_TEST_CONTEXT: _inherited, ...env } = process.env;
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=tap', file], { cwd: root, env, encoding: 'utf8' });
  const failures = new Map<string, string[]>();
  let suite = '';
  for (const line of run.stdout.split('\n')) {
    const top = /^# Subtest: product conformance: (.+)$/.exec(line);
    if (top) suite = top[1]!;
    const failed = /^ {4}not ok \d+ - (.+)$/.exec(line);
    if (failed) failures.set(suite, [...(failures.get(suite) ?? []), failed[1]!]);
  }
  const expected: Record<string, string[]> = {
    sound: [],
    mutating: ['does not mutate or alias its input'],
    'clock-reading': ['transforms deterministically, without reading the clock or randomness'],
    random: ['transforms deterministically, without reading the clock or randomness'],
    aliasing: ['does not mutate or alias its input'],
    lax: ['is a product with a valid definition', 'rejects an unknown property at every level, at its path', 'answers field errors, without throwing, for hostile bodies'],
    'loose-types': ['rejects a wrong type in every field, at its path'],
    optional: ['rejects an empty object'],
    'control-text': ['refuses C0 and C1 control characters in every string field, at its path'],
    'wrong-path': ['rejects its own invalid payloads at the expected paths'],
    'receipt-dated': [],
    dated: [],
    misdated: ['declares where its payload states its times, agreeing with the transform'],
    'undeclared-time': ['declares where its payload states its times, agreeing with the transform'],
    'wrong-time-field': ['declares where its payload states its times, agreeing with the transform'],
  };
  for (const [name, cases] of Object.entries(expected))
    it(`${cases.length === 0 ? 'passes a sound product' : `fails "${name}" on: ${cases.join('; ')}`}`, () => {
      assert.ok(run.stdout.includes(`# Subtest: product conformance: ${name}`), `the suite ran for ${name}\n${run.stderr}\n${run.stdout.slice(0, 3000)}`);
      assert.deepEqual(failures.get(name) ?? [], cases);
    });
});
