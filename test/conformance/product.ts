/**
 * The one conformance suite every product plugin must pass (STYLE.md "One conformance suite per
 * interface"): the definition is valid and registers; every example validates and transforms into
 * valid canonical telemetry; the transform is deterministic, reads neither the clock nor randomness,
 * and neither mutates nor aliases its input; the reading times it declares (what intake checks against
 * the clock) name fields of the payload and are exactly the times its transform dates records with;
 * and the schema rejects bad input precisely — bodies that
 * are not objects, an empty object, unknown properties at every level, a wrong type in every field,
 * missing fields at their own paths, control characters in every string field, hostile bodies, and the product's own invalid payloads at the
 * paths the product names. A product's test file calls `runProductConformance(product, options)`.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { type CanonicalTelemetry, checkCanonicalTelemetry } from '../../core/canonical.ts';
import type { FieldError } from '../../core/errors.ts';
import { pointerTo } from '../../core/json-schema.ts';
import {
  createProductRegistry,
  EXAMPLE_RECEIVED_AT,
  EXAMPLE_VIN,
  isProduct,
  MAX_WINDOW_SECONDS,
  PRODUCT_NAME_PATTERN,
  type Product,
} from '../../core/products.ts';

export interface InvalidPayloadCase {
  /** A body the product must reject. */
  payload: unknown;
  /** The JSON pointer one of the field errors must carry exactly, e.g. `/sensors/1/sensorId`. */
  path: string;
  /** What is wrong with it, for the test's name. */
  why?: string;
}

export interface ProductConformanceOptions {
  /** Product-specific bodies that must be rejected, each with an error at the given path. */
  invalidPayloads?: InvalidPayloadCase[];
}

/** Registers the conformance cases of `product` with node:test. */
export function runProductConformance(product: Product<any>, options: ProductConformanceOptions = {}): void {
  const examples: readonly unknown[] = product.examples;
  const transform = (payload: unknown, vin = EXAMPLE_VIN, receivedAt = EXAMPLE_RECEIVED_AT): CanonicalTelemetry =>
    product.transform(vin, payload, receivedAt);

  describe(`product conformance: ${String(product.name)}`, () => {
    it('is a product with a valid definition', () => {
      assert.ok(isProduct(product), 'made by defineProduct');
      assert.match(product.name, PRODUCT_NAME_PATTERN);
      assert.ok(product.description.trim().length > 0, 'has a description');
      assert.ok(Number.isSafeInteger(product.limit.requests) && product.limit.requests > 0, 'limit.requests is a positive integer');
      assert.ok(
        Number.isSafeInteger(product.limit.windowSeconds) && product.limit.windowSeconds > 0 && product.limit.windowSeconds <= MAX_WINDOW_SECONDS,
        'limit.windowSeconds is a positive integer of at most a day',
      );
      assert.equal(product.schema.type, 'object');
      assert.equal(product.schema.additionalProperties, false, 'the root schema refuses unknown properties');
      assert.ok(examples.length > 0, 'has at least one example');
      assert.ok(Object.isFrozen(product), 'the product is immutable');
    });

    it('registers under its name, once', () => {
      const registry = createProductRegistry([product]);
      assert.equal(registry.get(product.name), product);
      assert.deepEqual(registry.limitOf(product.name), { ...product.limit });
      assert.throws(() => registry.register(product), new RegExp(`"${product.name}" is already registered`));
    });

    it('accepts every example and transforms it into valid canonical telemetry', () => {
      const registry = createProductRegistry([product]);
      examples.forEach((example, index) => {
        assert.deepEqual(product.validate(example), [], `examples[${index}] validates`);
        const telemetry = registry.transform(product.name, EXAMPLE_VIN, example, EXAMPLE_RECEIVED_AT);
        assert.deepEqual(checkCanonicalTelemetry(telemetry), [], `examples[${index}] transforms into valid canonical telemetry`);
      });
    });

    it('turns its examples into records (at least one example yields something)', () => {
      const counts = examples.map((example) => {
        const telemetry = transform(structuredClone(example));
        return telemetry.gps.length + telemetry.devices.length + telemetry.cargosafe.length;
      });
      assert.ok(counts.some((count) => count > 0), `record counts per example: ${counts.join(', ')}`);
    });

    it('transforms deterministically, without reading the clock or randomness', (t) => {
      for (const example of examples) {
        t.mock.timers.enable({ apis: ['Date'], now: Date.UTC(2031, 5, 15) });
        const random = t.mock.method(Math, 'random', () => 0.25);
        const first = transform(structuredClone(example));
        t.mock.timers.reset();
        random.mock.restore();

        t.mock.timers.enable({ apis: ['Date'], now: Date.UTC(2019, 1, 3, 4, 5, 6, 7) });
        const random2 = t.mock.method(Math, 'random', () => 0.75);
        const second = transform(structuredClone(example));
        t.mock.timers.reset();
        random2.mock.restore();

        assert.deepEqual(second, first);
        assert.deepEqual(transform(structuredClone(example)), first, 'and again with the real clock');
      }
    });

    it('does not mutate or alias its input', () => {
      for (const example of examples) {
        // A frozen input makes any write in a strict-mode transform throw; a sloppy-mode write is
        // silently dropped there, so an unfrozen copy is compared afterwards too.
        const input = deepFreeze(structuredClone(example));
        const telemetry = transform(input);
        const unfrozen = structuredClone(example);
        transform(unfrozen);
        assert.deepEqual(unfrozen, example, 'the input is unchanged');
        const inputObjects = objectsOf(input);
        for (const object of objectsOf(telemetry))
          assert.ok(!inputObjects.has(object), 'the output does not share objects with the input (later steps may change it)');
      }
    });

    it(
      'declares where its payload states its times, agreeing with the transform',
      {
        skip:
          product.readingTimes === undefined
            ? 'the product declares no readingTimes: intake cannot date its payloads, only its transform does'
            : false,
      },
      () => {
        examples.forEach((example, index) => {
          const times = product.readingTimes!(structuredClone(example));
          const fields = new Set(nodesOf(example).map((node) => node.pointer));
          for (const { pointer } of times) assert.ok(fields.has(pointer), `examples[${index}]: the declared time ${JSON.stringify(pointer)} is not a field of the payload`);
          const declared = distinct(times.map((time) => time.at));
          // Received long after every declared time: a timestamp equal to receivedAt is the transform
          // dating an undated reading by its arrival (never ahead of the clock); every other timestamp
          // comes from the payload and must be declared, or a future-dated one would pass intake.
          const receivedAt = Math.max(EXAMPLE_RECEIVED_AT, ...declared) + 86_400_000;
          const telemetry = transform(structuredClone(example), EXAMPLE_VIN, receivedAt);
          const dated = distinct(
            [...telemetry.gps, ...telemetry.devices, ...telemetry.cargosafe].map((record) => record.timestamp).filter((timestamp) => timestamp !== receivedAt),
          );
          assert.deepEqual(
            dated.map(iso),
            declared.map(iso),
            `examples[${index}]: the transform's timestamps (left) are the declared reading times (right)`,
          );
        });
      },
    );

    it('rejects a body that is not a JSON object, at the root', () => {
      for (const body of [null, [], [examples[0]], 'text', 42, true]) {
        const errors = validateSafely(product, body);
        assert.ok(errors.some((e) => e.path === ''), `${JSON.stringify(body)} → ${show(errors)}`);
      }
    });

    it('rejects an empty object', () => {
      const errors = validateSafely(product, {});
      assert.ok(errors.length > 0, 'an empty object is invalid');
      for (const error of errors) assert.match(error.path, /^\/./, 'errors point into the body');
    });

    it('rejects an unknown property at every level, at its path', () => {
      for (const example of examples)
        for (const { pointer, value } of nodesOf(example)) {
          if (!isPlainObject(value)) continue;
          const path = pointerTo(pointer, 'unexpectedProperty');
          const errors = validateSafely(product, setAt(example, path, 1));
          assert.ok(errors.some((e) => e.path === path), `${path} → ${show(errors)}`);
        }
    });

    it('rejects a wrong type in every field, at its path', () => {
      for (const example of examples)
        for (const { pointer, value } of nodesOf(example)) {
          if (pointer === '' || value === null) continue;
          const wrong = wrongTypeFor(value);
          const errors = validateSafely(product, setAt(example, pointer, wrong));
          assert.ok(errors.some((e) => e.path === pointer), `${pointer} = ${JSON.stringify(wrong)} → ${show(errors)}`);
        }
    });

    it('reports a missing required field at its own path', () => {
      for (const example of examples)
        for (const { pointer, parentIsObject } of nodesOf(example)) {
          if (pointer === '' || !parentIsObject) continue;
          const errors = validateSafely(product, deleteAt(example, pointer));
          // An optional field may be left out; a required one is reported where it is missing.
          if (errors.length > 0) assert.ok(errors.some((e) => e.path === pointer), `without ${pointer} → ${show(errors)}`);
        }
    });

    it('refuses C0 and C1 control characters in every string field, at its path', () => {
      // What a partner sends reaches operators' terminals and web pages (issue 37): NUL, BEL, ESC
      // (ANSI sequences), DEL and CSI (U+009B, an escape sequence on its own in some terminals).
      for (const example of examples)
        for (const { pointer, value } of nodesOf(example)) {
          if (typeof value !== 'string' || value.length === 0) continue;
          for (const control of CONTROL_CHARACTERS) {
            // One character replaced, so a length bound cannot be what refuses it.
            const middle = Math.floor(value.length / 2);
            const hostile = value.slice(0, middle) + control + value.slice(middle + 1);
            const errors = validateSafely(product, setAt(example, pointer, hostile));
            assert.ok(errors.some((e) => e.path === pointer), `${pointer} = ${JSON.stringify(hostile)} → ${show(errors)}`);
          }
        }
    });

    it('answers field errors, without throwing, for hostile bodies', () => {
      let nested: unknown = 1;
      for (let depth = 0; depth < 2000; depth++) nested = [nested];
      const hostile = [
        JSON.parse('{"__proto__": {"polluted": true}}'),
        JSON.parse('{"constructor": {"prototype": {"polluted": true}}}'),
        { ...(examples[0] as object), nested },
        { ...(examples[0] as object), huge: 'x'.repeat(300_000) },
      ];
      for (const body of hostile) {
        const errors = validateSafely(product, body);
        assert.ok(errors.length > 0, 'rejected');
        for (const error of errors) {
          assert.equal(typeof error.path, 'string');
          assert.ok(error.message.length > 0 && error.message.length < 500, 'a short message');
        }
      }
      assert.equal(({} as Record<string, unknown>).polluted, undefined, 'no prototype pollution');
    });

    const invalidPayloads = options.invalidPayloads ?? [];
    it(
      'rejects its own invalid payloads at the expected paths',
      { skip: invalidPayloads.length === 0 ? 'the product test gives no invalidPayloads' : false },
      () => {
        for (const { payload, path, why } of invalidPayloads) {
          const errors = validateSafely(product, payload);
          assert.ok(errors.some((e) => e.path === path), `${why ?? JSON.stringify(payload)}: expected an error at ${path}, got ${show(errors)}`);
        }
      },
    );
  });
}

const CONTROL_CHARACTERS = ['\u0000', '\u0007', '\u001b', '\u007f', '\u009b'];

function distinct(timestamps: number[]): number[] {
  return [...new Set(timestamps)].sort((a, b) => a - b);
}

function iso(timestamp: number): string {
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? String(timestamp) : date.toISOString();
}

function validateSafely(product: Product<any>, body: unknown): FieldError[] {
  let errors: FieldError[];
  try {
    errors = product.validate(body);
  } catch (error) {
    assert.fail(`validate threw on ${preview(body)}: ${String(error)}`);
  }
  assert.ok(Array.isArray(errors), 'validate answers an array');
  return errors;
}

/** Every node of a JSON value with its JSON pointer, the root included. */
function nodesOf(value: unknown, pointer = '', parentIsObject = false): Array<{ pointer: string; value: unknown; parentIsObject: boolean }> {
  const nodes = [{ pointer, value, parentIsObject }];
  if (Array.isArray(value)) value.forEach((item, index) => nodes.push(...nodesOf(item, pointerTo(pointer, index), false)));
  else if (isPlainObject(value))
    for (const [key, item] of Object.entries(value)) nodes.push(...nodesOf(item, pointerTo(pointer, key), true));
  return nodes;
}

/** A JSON value of another type than `value`: what a sloppy client might send instead. */
function wrongTypeFor(value: unknown): unknown {
  if (typeof value === 'string') return 12345;
  if (typeof value === 'number') return String(value);
  if (typeof value === 'boolean') return String(value);
  if (Array.isArray(value)) return { items: value };
  return [value];
}

function tokensOf(pointer: string): string[] {
  return pointer
    .split('/')
    .slice(1)
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function setAt(root: unknown, pointer: string, replacement: unknown): unknown {
  const copy = structuredClone(root);
  const tokens = tokensOf(pointer);
  const last = tokens.pop()!;
  let parent = copy as Record<string, unknown>;
  for (const token of tokens) parent = parent[token] as Record<string, unknown>;
  parent[last] = replacement;
  return copy;
}

function deleteAt(root: unknown, pointer: string): unknown {
  const copy = structuredClone(root);
  const tokens = tokensOf(pointer);
  const last = tokens.pop()!;
  let parent = copy as Record<string, unknown>;
  for (const token of tokens) parent = parent[token] as Record<string, unknown>;
  delete parent[last];
  return copy;
}

function objectsOf(value: unknown, found = new Set<object>()): Set<object> {
  if (typeof value === 'object' && value !== null && !found.has(value)) {
    found.add(value);
    for (const item of Object.values(value)) objectsOf(item, found);
  }
  return found;
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function show(errors: FieldError[]): string {
  return errors.length === 0 ? 'no errors' : errors.map((e) => `${e.path || '(root)'} ${e.message}`).join('; ');
}

function preview(body: unknown): string {
  const text = JSON.stringify(body) ?? String(body);
  return text.length > 80 ? `${text.slice(0, 80)}…` : text;
}
