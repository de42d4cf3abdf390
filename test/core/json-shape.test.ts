import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { compileJsonSchema, type JsonSchema } from '../../core/json-schema.ts';
import { type JsonShapeBounds, jsonShapeBoundsOf, JsonShapeScan } from '../../core/json-shape.ts';
import { builtInProducts } from '../../products/index.ts';

const text = (value: string) => new TextEncoder().encode(value);
/** The scan's answer for `json` fed in one chunk. */
const scanOnce = (bounds: JsonShapeBounds, json: string) => new JsonShapeScan(bounds).feed(text(json));
/** The scan's answer for `json` fed in chunks of `size` bytes (the first problem, or null). */
function scanInChunks(bounds: JsonShapeBounds, json: string, size: number) {
  const scan = new JsonShapeScan(bounds);
  const bytes = text(json);
  for (let at = 0; at < bytes.length; at += size) {
    const problem = scan.feed(bytes.subarray(at, at + size));
    if (problem) return problem;
  }
  return null;
}

describe('jsonShapeBoundsOf', () => {
  it("derives the built-in products' bounds from their schemas", () => {
    const bounds = Object.fromEntries(builtInProducts.map((product) => [product.name, jsonShapeBoundsOf(product.schema)]));
    assert.deepEqual(bounds, {
      'gps-basic': { objectMembers: 4, arrayItems: 0, depth: 2 },
      tpms: { objectMembers: 4, arrayItems: 32, depth: 3 },
      cargosafe: { objectMembers: 6, arrayItems: 0, depth: 1 },
    });
  });

  it('sets no bound where the schema sets none', () => {
    assert.equal(jsonShapeBoundsOf(true), null);
    assert.equal(jsonShapeBoundsOf({}), null);
    const open: JsonSchema = { type: 'object', properties: { a: { type: 'number' } } };
    assert.deepEqual(jsonShapeBoundsOf(open), null, 'additional properties of any kind: anything may nest');
    assert.deepEqual(
      jsonShapeBoundsOf({ type: 'object', additionalProperties: false, properties: { list: { type: 'array', items: { type: 'number' } } } }),
      { objectMembers: 1, arrayItems: Infinity, depth: 2 },
      'an array without maxItems',
    );
    assert.deepEqual(
      jsonShapeBoundsOf({ type: 'object', additionalProperties: { type: 'number' }, maxProperties: 10 }),
      { objectMembers: 10, arrayItems: 0, depth: 1 },
      'maxProperties bounds an open object',
    );
    const recursive: JsonSchema = {
      $defs: { node: { type: 'object', additionalProperties: false, properties: { child: { $ref: '#/$defs/node' } } } },
      $ref: '#/$defs/node',
    };
    assert.equal(jsonShapeBoundsOf(recursive), null, 'a recursive $ref: what nests inside is not bounded');
    assert.equal(jsonShapeBoundsOf({ maxItems: 3 }), null, 'no type: an object holding any array');
  });

  it('widens over anyOf and oneOf, narrows over allOf, and reads const and enum values', () => {
    const small = { type: 'object', additionalProperties: false, properties: { a: { type: 'number' } } };
    const large = { type: 'array', maxItems: 8, items: { type: 'number' } };
    assert.deepEqual(jsonShapeBoundsOf({ anyOf: [small, large] }), { objectMembers: 1, arrayItems: 8, depth: 1 });
    assert.deepEqual(jsonShapeBoundsOf({ oneOf: [small, large] }), { objectMembers: 1, arrayItems: 8, depth: 1 });
    assert.deepEqual(jsonShapeBoundsOf({ type: 'array', items: { type: 'number' }, allOf: [{ type: 'array', maxItems: 3, items: { type: 'number' } }] }), { objectMembers: 0, arrayItems: 3, depth: 1 });
    assert.deepEqual(jsonShapeBoundsOf({ enum: ['open', 'closed'] }), { objectMembers: 0, arrayItems: 0, depth: 0 });
    assert.deepEqual(jsonShapeBoundsOf({ const: { a: [1, 2, 3], b: 1 } }), { objectMembers: 2, arrayItems: 3, depth: 2 });
  });
});

describe('JsonShapeScan', () => {
  const gps = jsonShapeBoundsOf(builtInProducts.find((product) => product.name === 'gps-basic')!.schema)!;

  it("refuses an object at its first member past the bound, without reading on", () => {
    const scan = new JsonShapeScan(gps);
    assert.equal(scan.feed(text('{"k0":1,"k1":1,"k2":1,"k3":1')), null, 'four members: not yet');
    assert.deepEqual(scan.feed(text(',"k4":1')), { path: '', message: 'has an object of more than 4 members, more than the schema allows anywhere' });
  });

  it('refuses arrays past their items and nesting past the depth', () => {
    const tpms = jsonShapeBoundsOf(builtInProducts.find((product) => product.name === 'tpms')!.schema)!;
    const sensors = (n: number) => `{"readAt":"2026-01-01T00:00:00Z","sensors":[${Array.from({ length: n }, () => '{}').join(',')}]}`;
    assert.equal(scanOnce(tpms, sensors(32)), null);
    assert.match(scanOnce(tpms, sensors(33))!.message, /array of more than 32 items/);
    assert.match(scanOnce(gps, '{"position":{"latitude":{"x":1}}}')!.message, /more than 2 deep/);
    assert.match(scanOnce(gps, `${'['.repeat(100_000)}`)!.message, /more than 2 deep/, 'a deep body is refused at the third bracket');
  });

  it('reads braces, brackets, commas and escaped quotes inside strings as text', () => {
    const tricky = JSON.stringify({ timestamp: 1, position: { latitude: 1, longitude: 2 }, speedKph: '{[,,,,,,]}\\",{,,,', bearingDeg: 'a"b\\' });
    assert.equal(scanOnce(gps, tricky), null);
    // Whatever the chunk boundaries, the same answer (an escape or a string split across chunks).
    for (const size of [1, 2, 3, 7]) assert.equal(scanInChunks(gps, tricky, size), null, `chunks of ${size}`);
    const hostile = `{${Array.from({ length: 40 }, (_, i) => `"k\\"${i},":1`).join(',')}}`;
    for (const size of [1, 3, 64]) assert.match(scanInChunks(gps, hostile, size)!.message, /more than 4 members/, `chunks of ${size}`);
  });

  it("never refuses a payload its product accepts, padded however it is written", () => {
    for (const product of builtInProducts) {
      const bounds = jsonShapeBoundsOf(product.schema)!;
      const validate = compileJsonSchema(product.schema);
      for (const example of product.examples) {
        assert.deepEqual(validate(example), []);
        for (const json of [JSON.stringify(example), JSON.stringify(example, null, 2), JSON.stringify(example).replace(/,/g, ' ,\n ')])
          assert.equal(scanOnce(bounds, json), null, `${product.name}: ${json}`);
      }
    }
  });
});
