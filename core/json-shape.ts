/**
 * The shape a JSON Schema allows — the most members an object may have, the most items an array
 * may have, how deep containers may nest — and a scan of a body's text against it, chunk by chunk,
 * before the body is parsed (issue 29). `JSON.parse` of 250 KB holding one object of 24,000 unknown
 * keys takes 12–25 ms on the 2-core test machine, most of it building the object; a gps-basic
 * payload cannot have more than 4 members in any object, so the scan refuses that body at its fifth
 * key, in microseconds, without parsing it or reading the rest of it.
 *
 * The bounds are derived conservatively: a schema keyword this module does not reason about never
 * tightens a bound, and a schema that allows an unbounded container anywhere (an object without
 * `additionalProperties: false` or `maxProperties`, an array without `maxItems`, a recursive `$ref`,
 * a subschema that allows anything) has no bound on it. So the scan refuses only text that the
 * schema refuses once parsed — with one exception, said where the scan is used: members are counted
 * as written, so an object that repeats a name (which `JSON.parse` collapses to its last value) counts
 * each repeat.
 */
import type { FieldError } from './errors.ts';
import type { JsonSchema, JsonSchemaObject } from './json-schema.ts';

/** The most a schema allows anywhere in a value; `Infinity` where it sets no bound. */
export interface JsonShapeBounds {
  /** The most members of any one object. */
  objectMembers: number;
  /** The most items of any one array. */
  arrayItems: number;
  /** The deepest nesting of objects and arrays (a flat object is 1, a scalar 0). */
  depth: number;
}

const UNBOUNDED: JsonShapeBounds = Object.freeze({ objectMembers: Infinity, arrayItems: Infinity, depth: Infinity });
const NOTHING: JsonShapeBounds = Object.freeze({ objectMembers: 0, arrayItems: 0, depth: 0 });

/**
 * The shape bounds of every value `schema` accepts; `null` when it bounds none of them (then a scan
 * would refuse nothing). `$ref`s are followed within the schema (`#/$defs/...`, `#/definitions/...`).
 */
export function jsonShapeBoundsOf(schema: JsonSchema): JsonShapeBounds | null {
  const bounds = boundsOf(schema, schema, new Set());
  return bounds.objectMembers === Infinity && bounds.arrayItems === Infinity && bounds.depth === Infinity ? null : bounds;
}

function widest(a: JsonShapeBounds, b: JsonShapeBounds): JsonShapeBounds {
  return { objectMembers: Math.max(a.objectMembers, b.objectMembers), arrayItems: Math.max(a.arrayItems, b.arrayItems), depth: Math.max(a.depth, b.depth) };
}

function narrowest(a: JsonShapeBounds, b: JsonShapeBounds): JsonShapeBounds {
  return { objectMembers: Math.min(a.objectMembers, b.objectMembers), arrayItems: Math.min(a.arrayItems, b.arrayItems), depth: Math.min(a.depth, b.depth) };
}

const isObject = (value: unknown): value is JsonSchemaObject => typeof value === 'object' && value !== null && !Array.isArray(value);
const finiteOr = (value: unknown, fallback: number) => (typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : fallback);

function boundsOf(schema: unknown, root: JsonSchema, resolving: Set<string>): JsonShapeBounds {
  if (schema === false) return NOTHING;
  if (!isObject(schema)) return UNBOUNDED;
  // What the value's type allows: every keyword below only narrows it further.
  let bounds = typeBounds(schema, root, resolving);
  if ('const' in schema) bounds = narrowest(bounds, valueBounds(schema.const));
  if (Array.isArray(schema.enum)) bounds = narrowest(bounds, schema.enum.map(valueBounds).reduce(widest, NOTHING));
  if (typeof schema.$ref === 'string') bounds = narrowest(bounds, refBounds(schema.$ref, root, resolving));
  if (Array.isArray(schema.allOf)) for (const branch of schema.allOf) bounds = narrowest(bounds, boundsOf(branch, root, resolving));
  for (const keyword of ['anyOf', 'oneOf'] as const) {
    const branches = schema[keyword];
    if (Array.isArray(branches) && branches.length > 0)
      bounds = narrowest(bounds, branches.map((branch) => boundsOf(branch, root, resolving)).reduce(widest, NOTHING));
  }
  return bounds;
}

/** The bounds `type` and the container keywords set; no `type` allows objects and arrays alike. */
function typeBounds(schema: JsonSchemaObject, root: JsonSchema, resolving: Set<string>): JsonShapeBounds {
  const types = schema.type === undefined ? ['object', 'array'] : Array.isArray(schema.type) ? schema.type : [schema.type];
  let bounds = NOTHING;
  if (types.includes('object')) {
    const named = isObject(schema.properties) ? Object.values(schema.properties) : [];
    const closed = schema.additionalProperties === false && schema.patternProperties === undefined;
    const members = Math.min(closed ? named.length : Infinity, finiteOr(schema.maxProperties, Infinity));
    const children = [...named];
    if (!closed) children.push(schema.additionalProperties ?? true);
    if (isObject(schema.patternProperties)) children.push(...Object.values(schema.patternProperties));
    bounds = widest(bounds, containerBounds({ objectMembers: members, arrayItems: 0, depth: 1 }, children, root, resolving));
  }
  if (types.includes('array')) {
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    const items = Math.min(schema.items === false ? prefix.length : Infinity, finiteOr(schema.maxItems, Infinity));
    const children = [...prefix];
    if (schema.items !== false) children.push(schema.items ?? true);
    bounds = widest(bounds, containerBounds({ objectMembers: 0, arrayItems: items, depth: 1 }, children, root, resolving));
  }
  return bounds;
}

/** A container's own bounds widened by its children's, one level deeper. */
function containerBounds(own: JsonShapeBounds, children: unknown[], root: JsonSchema, resolving: Set<string>): JsonShapeBounds {
  const inner = children.map((child) => boundsOf(child, root, resolving)).reduce(widest, NOTHING);
  return widest(own, { ...inner, depth: inner.depth + 1 });
}

function refBounds(ref: string, root: JsonSchema, resolving: Set<string>): JsonShapeBounds {
  // A reference to itself, directly or not, allows nesting without end.
  if (resolving.has(ref) || !ref.startsWith('#')) return UNBOUNDED;
  let target: unknown = root;
  for (const token of ref.slice(1).split('/').slice(1)) {
    if (!isObject(target)) return UNBOUNDED;
    target = target[token.replace(/~1/g, '/').replace(/~0/g, '~')];
  }
  if (target === undefined) return UNBOUNDED;
  resolving.add(ref);
  const bounds = boundsOf(target, root, resolving);
  resolving.delete(ref);
  return bounds;
}

/** The shape of one JSON value (of a `const` or `enum`). */
function valueBounds(value: unknown): JsonShapeBounds {
  if (Array.isArray(value)) {
    const inner = value.map(valueBounds).reduce(widest, NOTHING);
    return widest({ objectMembers: 0, arrayItems: value.length, depth: 1 }, { ...inner, depth: inner.depth + 1 });
  }
  if (isObject(value)) {
    const inner = Object.values(value).map(valueBounds).reduce(widest, NOTHING);
    return widest({ objectMembers: Object.keys(value).length, arrayItems: 0, depth: 1 }, { ...inner, depth: inner.depth + 1 });
  }
  return NOTHING;
}

const OPEN_OBJECT = 0x7b; // {
const CLOSE_OBJECT = 0x7d; // }
const OPEN_ARRAY = 0x5b; // [
const CLOSE_ARRAY = 0x5d; // ]
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Reads a JSON text chunk by chunk, as it arrives, and answers the first place where it breaks the
 * bounds: an object or array with one member too many, or a container one level too deep. It tracks
 * strings (so a `{` or `,` inside one is text) and the open containers, nothing else: it is no JSON
 * parser, and text it lets through may still be malformed (`JSON.parse` says so afterwards). A few
 * instructions a byte, and a refusal comes at the first member too many, however long the text.
 */
export class JsonShapeScan {
  /** Per open container: whether it is an array, and the commas seen directly in it. */
  private readonly arrays: boolean[] = [];
  private readonly commas: number[] = [];
  private inString = false;
  private escaped = false;

  constructor(private readonly bounds: JsonShapeBounds) {}

  /** Reads the next chunk of the text; answers the problem once the text breaks the bounds, else null. */
  feed(chunk: Uint8Array): FieldError | null {
    const { arrays, commas } = this;
    let { inString, escaped } = this;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (inString) {
        if (escaped) escaped = false;
        else if (byte === BACKSLASH) escaped = true;
        else if (byte === QUOTE) inString = false;
        continue;
      }
      if (byte === QUOTE) inString = true;
      else if (byte === COMMA) {
        const depth = commas.length;
        if (depth === 0) continue;
        // n commas directly in a container: n + 1 members or items.
        const count = ++commas[depth - 1]! + 1;
        const isArray = arrays[depth - 1]!;
        if (count > (isArray ? this.bounds.arrayItems : this.bounds.objectMembers)) return this.refuse(isArray);
      } else if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) {
        const isArray = byte === OPEN_ARRAY;
        if (commas.length + 1 > this.bounds.depth) return this.refuse(isArray, 'depth');
        arrays.push(isArray);
        commas.push(0);
      } else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
        arrays.pop();
        commas.pop();
      }
    }
    this.inString = inString;
    this.escaped = escaped;
    return null;
  }

  private refuse(isArray: boolean, reason: 'count' | 'depth' = 'count'): FieldError {
    const { objectMembers, arrayItems, depth } = this.bounds;
    const message =
      reason === 'depth'
        ? `nests objects and arrays more than ${depth} deep, deeper than the schema allows anywhere`
        : isArray
            ? `has an array of more than ${arrayItems} items, more than the schema allows anywhere`
            : `has an object of more than ${objectMembers} members, more than the schema allows anywhere`;
    return { path: '', message };
  }
}
