/**
 * Product plugins and their registry (contract 4 and 10). A product is one partner integration: its
 * name (the token scope `product:<name>`), the JSON Schema of its intake payload, its default intake
 * limit per VIN, and a pure `transform` from (VIN, payload, received-at) to canonical telemetry.
 * Writing one is `export default defineProduct({ name, description, schema, limit, transform, examples })`;
 * `defineProduct` checks the whole definition at start-up and throws a `TypeError` naming the product
 * and the bad field, so a broken plugin never reaches a request. The `ProductRegistry` is what the
 * intake and the workers use: it refuses duplicates, answers an unknown product with a `forbidden`
 * error, validates bodies into precise field errors, refuses readings dated too far after the
 * server's clock at the fields a product declares as its times, applies operator limit overrides, and
 * checks that what a transform produced is valid canonical data before anything is written.
 */
import { isAbsolute, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { checkCanonicalTelemetry, isAheadOfClock, MAX_READING_LEAD_MS, type CanonicalTelemetry } from './canonical.ts';
import { TrailwireError, type FieldError } from './errors.ts';
import {
  compileJsonSchema,
  JSON_SCHEMA_DIALECT,
  MAX_FIELD_ERRORS,
  type DescribeOptions,
  type JsonSchema,
  type JsonSchemaObject,
  type SchemaValidator,
} from './json-schema.ts';
import { jsonShapeBoundsOf, type JsonShapeBounds } from './json-shape.ts';

/** A product name: lower case, digits and dashes, 2 to 41 characters (it appears in token scopes). */
export const PRODUCT_NAME_PATTERN = /^[a-z][a-z0-9-]{1,40}$/;

/**
 * The `pattern` of a free-text string in a product schema (a wheel position, a label): one line of
 * text, trimmed, with no C0 or C1 control character nor DEL — what a partner sends ends up in an
 * operator's terminal (`trailwire devices list`) and on web pages, where `ESC [2J` clears a screen
 * and OSC 52 writes a clipboard (issue 37). Written with `\x` ranges so every JSON Schema validator
 * reads it alike, with or without Unicode mode.
 */
export const TEXT_LINE_PATTERN = '^[^\\s\\x00-\\x1f\\x7f-\\x9f](?:[^\\x00-\\x1f\\x7f-\\x9f]*[^\\s\\x00-\\x1f\\x7f-\\x9f])?$';

/** The longest intake window a product may declare: one day. Longer usually means milliseconds by mistake. */
export const MAX_WINDOW_SECONDS = 86_400;

/**
 * The VIN and received-at time `defineProduct` uses to run the transform over the examples at start-up
 * (the conformance suite uses them too). The VIN is a valid one, check digit included.
 */
export const EXAMPLE_VIN = '1HGCM82633A004352';
export const EXAMPLE_RECEIVED_AT = Date.UTC(2026, 0, 1, 12, 0, 0);

/** A fixed-window intake limit per VIN: at most `requests` in each window of `windowSeconds`. */
export interface IntakeLimit {
  /** Requests allowed per window; a positive integer. */
  requests: number;
  /** The window length in seconds, a positive integer up to `MAX_WINDOW_SECONDS`; windows align to clock boundaries. */
  windowSeconds: number;
}

/**
 * The JSON Schema (draft 2020-12) of a product's payload. The root must be an object schema; keep it
 * strict — `additionalProperties: false`, numeric ranges, bounded strings and arrays — so that bad
 * input is answered with a precise 400. `description`s are published in the API docs.
 */
export interface ProductSchema extends JsonSchemaObject {
  $schema?: typeof JSON_SCHEMA_DIALECT;
  type: 'object';
  properties: Record<string, JsonSchema>;
  required?: readonly string[];
  additionalProperties?: JsonSchema;
  description?: string;
}

/** One time a payload states: where it is, and what it says. */
export interface ReadingTime {
  /** The JSON pointer of the field that holds the time, e.g. `/readAt`: a refusal names it. */
  pointer: string;
  /** The time, in integer epoch ms: the timestamp the transform gives the records this field dates. */
  at: number;
}

/** What a product author writes. `Payload` is the TypeScript shape of a payload the schema accepts. */
export interface ProductDefinition<Payload> {
  /** The product's name, matching `PRODUCT_NAME_PATTERN`; partner tokens carry it as `product:<name>`. */
  name: string;
  /** One sentence for the docs: what device or integration this is. */
  description: string;
  /** The payload's JSON Schema (draft 2020-12, compiled by Ajv in strict mode). */
  schema: ProductSchema;
  /** The default intake limit per VIN; operators may override it in config. */
  limit: IntakeLimit;
  /**
   * Turns one valid payload into canonical records. It must be pure: no clock (use `receivedAt`,
   * epoch ms, when the payload carries no time), no randomness, no I/O, no mutation of `payload`,
   * and the same output for the same input. It runs only on payloads that passed `schema` and
   * `validate`; throwing marks the payload for retry and then dead-letters it.
   */
  transform(vin: string, payload: Payload, receivedAt: number): CanonicalTelemetry;
  /**
   * Valid example payloads, at least one: checked at start-up, used by the docs, the simulator and
   * the conformance suite.
   */
  examples: readonly [Payload, ...Payload[]];
  /**
   * Optional rules the schema cannot express (for example unique ids inside an array). Runs only on
   * payloads the schema accepted, so it may rely on `Payload`; answers one field error per problem,
   * with JSON pointer paths into the body, or `[]`. Must be pure like `transform`.
   */
  validate?(payload: Payload): FieldError[];
  /**
   * Optional, and recommended whenever the payload carries its own time: where the payload states
   * the times its records are dated with, each as the epoch ms the transform derives from it. Intake
   * refuses a payload with any of them more than `MAX_READING_LEAD_MS` (5 minutes) after the server's
   * clock — 400 with a field error at that pointer — instead of queuing it. Without it, only the
   * transform dates a payload, and such a payload is dead-lettered by the worker instead. Runs only
   * on valid payloads; must be pure like `transform`, and agree with it (the conformance suite checks).
   */
  readingTimes?(payload: Payload): ReadingTime[];
}

const PRODUCT_BRAND = Symbol.for('trailwire.product');

/** A checked product, as returned by `defineProduct`. Immutable. */
export interface Product<Payload = unknown> {
  readonly [PRODUCT_BRAND]: true;
  readonly name: string;
  readonly description: string;
  readonly schema: Readonly<ProductSchema>;
  readonly limit: Readonly<IntakeLimit>;
  readonly examples: readonly Payload[];
  /**
   * Every problem of an untrusted payload (schema, then the definition's `validate`), or only the
   * first schema problem with `describeAll: false`; `[]` when valid.
   */
  validate(payload: unknown, options?: DescribeOptions): FieldError[];
  /** The payload typed as `Payload`, or a `TrailwireError('validation_failed')` listing the problems. */
  parse(payload: unknown): Payload;
  /** The definition's transform, unchanged: call it only with a payload that validated. */
  transform(vin: string, payload: Payload, receivedAt: number): CanonicalTelemetry;
  /**
   * The definition's `readingTimes`, its answer checked (a `TypeError` naming the product when it is
   * malformed); absent when the product declares none. Call it only with a payload that validated.
   */
  readonly readingTimes?: (payload: Payload) => ReadingTime[];
}

/** Whether `value` is a product made by `defineProduct` (of this or any other copy of Trailwire). */
export function isProduct(value: unknown): value is Product {
  return typeof value === 'object' && value !== null && (value as Record<symbol, unknown>)[PRODUCT_BRAND] === true;
}

/**
 * Checks a product definition and answers the product. Throws a `TypeError` naming the product and
 * the bad field when the name, description, schema (must compile in Ajv strict mode), limit,
 * transform, validate or readingTimes hook or an example is wrong — or when the transform throws on
 * an example or turns it into invalid canonical data, or `readingTimes` throws on one or answers
 * something other than a list of `{ pointer, at }`.
 */
export function defineProduct<Payload>(definition: ProductDefinition<Payload>): Product<Payload> {
  if (typeof definition !== 'object' || definition === null)
    throw new TypeError('defineProduct: the definition must be an object');
  const { name, description, schema, limit, transform, examples, validate: extraRules, readingTimes: declaredTimes } = definition;
  if (typeof name !== 'string' || !PRODUCT_NAME_PATTERN.test(name))
    throw new TypeError(
      `defineProduct: product name ${JSON.stringify(name)} must match ${PRODUCT_NAME_PATTERN} (it becomes the token scope "product:<name>")`,
    );
  const fail = (field: string, problem: string, cause?: unknown): never => {
    throw new TypeError(`product "${name}": \`${field}\` ${problem}`, cause === undefined ? undefined : { cause });
  };

  if (typeof description !== 'string' || description.trim() === '') fail('description', 'must be a non-empty string');
  const schemaValidator = checkSchema(schema, fail);
  checkLimit(limit, 'limit', fail);
  if (typeof transform !== 'function') fail('transform', 'must be a function (vin, payload, receivedAt) => CanonicalTelemetry');
  if (extraRules !== undefined && typeof extraRules !== 'function')
    fail('validate', 'must be a function (payload) => FieldError[] when present');
  if (declaredTimes !== undefined && typeof declaredTimes !== 'function')
    fail('readingTimes', 'must be a function (payload) => Array<{ pointer, at }> when present');
  const readingTimes =
    declaredTimes === undefined
      ? undefined
      : (payload: Payload): ReadingTime[] => {
          const times: unknown = declaredTimes.call(definition, payload);
          const problem = problemOfReadingTimes(times);
          if (problem !== null) throw new TypeError(`product "${name}": \`readingTimes\` ${problem}`);
          return times as ReadingTime[];
        };

  const validatePayload = (payload: unknown, options?: DescribeOptions): FieldError[] => {
    const schemaErrors = schemaValidator(payload, options);
    if (schemaErrors.length > 0 || extraRules === undefined) return schemaErrors;
    const ruleErrors = extraRules.call(definition, payload as Payload);
    if (!Array.isArray(ruleErrors))
      throw new TypeError(`product "${name}": \`validate\` must answer an array of field errors, got ${typeof ruleErrors}`);
    return ruleErrors.slice(0, MAX_FIELD_ERRORS);
  };

  if (!Array.isArray(examples) || examples.length === 0) fail('examples', 'must be an array of at least one valid payload');
  examples.forEach((example, index) => {
    const errors = validatePayload(example);
    if (errors.length > 0) fail(`examples[${index}]`, `does not validate: ${describeErrors(errors)}`);
    let telemetry: CanonicalTelemetry;
    try {
      telemetry = transform.call(definition, EXAMPLE_VIN, structuredClone(example), EXAMPLE_RECEIVED_AT);
    } catch (cause) {
      return fail('transform', `throws on examples[${index}]: ${messageOf(cause)}`, cause);
    }
    const problems = checkCanonicalTelemetry(telemetry);
    if (problems.length > 0) fail('transform', `turns examples[${index}] into invalid canonical telemetry: ${describeErrors(problems)}`);
    if (declaredTimes !== undefined) {
      let times: unknown;
      try {
        times = declaredTimes.call(definition, structuredClone(example));
      } catch (cause) {
        return fail('readingTimes', `throws on examples[${index}]: ${messageOf(cause)}`, cause);
      }
      const problem = problemOfReadingTimes(times);
      if (problem !== null) fail('readingTimes', `${problem} (on examples[${index}])`);
    }
  });

  const product: Product<Payload> = {
    [PRODUCT_BRAND]: true,
    name,
    description,
    schema: deepFreeze(structuredClone(schema)),
    limit: Object.freeze({ requests: limit.requests, windowSeconds: limit.windowSeconds }),
    examples: deepFreeze(structuredClone([...examples])),
    validate: validatePayload,
    parse(payload) {
      const errors = validatePayload(payload);
      if (errors.length > 0)
        throw new TrailwireError('validation_failed', `the payload does not match the schema of product "${name}"`, { errors });
      return payload as Payload;
    },
    transform: (vin, payload, receivedAt) => transform.call(definition, vin, payload, receivedAt),
    ...(readingTimes === undefined ? {} : { readingTimes }),
  };
  return Object.freeze(product);
}

/** The largest epoch ms a `Date` holds (year 275760): a reading time beyond it cannot be shown. */
const LATEST_DATE_MS = 8.64e15;

/** What is wrong with an answer of `readingTimes`, or `null` when it is a list of `{ pointer, at }`. */
function problemOfReadingTimes(times: unknown): string | null {
  if (!Array.isArray(times)) return `must answer an array of { pointer, at }, got ${describeValue(times)}`;
  for (const [index, time] of times.entries()) {
    if (typeof time !== 'object' || time === null || Array.isArray(time)) return `must answer objects { pointer, at }; [${index}] is ${describeValue(time)}`;
    if (typeof time.pointer !== 'string' || !(time.pointer === '' || time.pointer.startsWith('/')))
      return `[${index}].pointer must be a JSON pointer into the payload ("" or starting with "/"), got ${JSON.stringify(time.pointer)}`;
    if (typeof time.at !== 'number' || !Number.isSafeInteger(time.at) || time.at < 0 || time.at > LATEST_DATE_MS)
      return `[${index}].at must be an integer of epoch milliseconds, at least 0, got ${String(time.at)}`;
  }
  return null;
}

function checkSchema(schema: unknown, fail: (field: string, problem: string, cause?: unknown) => never): SchemaValidator {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return fail('schema', 'must be a JSON Schema object');
  const keywords = schema as JsonSchemaObject;
  if (keywords.$schema !== undefined && keywords.$schema !== JSON_SCHEMA_DIALECT)
    fail('schema.$schema', `must be "${JSON_SCHEMA_DIALECT}" or absent (product schemas are JSON Schema draft 2020-12)`);
  if (keywords.type !== 'object') fail('schema.type', 'must be "object" (an intake payload is a JSON object)');
  try {
    return compileJsonSchema(keywords);
  } catch (cause) {
    return fail('schema', `does not compile (JSON Schema draft 2020-12, Ajv strict mode): ${messageOf(cause)}`, cause);
  }
}

function checkLimit(limit: unknown, field: string, fail: (field: string, problem: string) => never): void {
  if (typeof limit !== 'object' || limit === null) return fail(field, 'must be an object { requests, windowSeconds }');
  const { requests, windowSeconds } = limit as Partial<IntakeLimit>;
  if (!isPositiveInteger(requests)) fail(`${field}.requests`, `must be a positive integer, got ${String(requests)}`);
  if (!isPositiveInteger(windowSeconds)) fail(`${field}.windowSeconds`, `must be a positive integer, got ${String(windowSeconds)}`);
  if ((windowSeconds as number) > MAX_WINDOW_SECONDS)
    fail(`${field}.windowSeconds`, `must be at most ${MAX_WINDOW_SECONDS} (one day), got ${String(windowSeconds)}: seconds, not milliseconds`);
}

function isPositiveInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value > 0;
}

/** Options of a `ProductRegistry`. */
export interface ProductRegistryOptions {
  /**
   * Operator overrides of products' default intake limits, by product name; a partial override keeps
   * the product's value for the other field. Default: none.
   */
  limitOverrides?: Record<string, Partial<IntakeLimit>>;
}

/**
 * The products installed on a server. Registration happens at start-up and fails loudly; lookups by
 * the name in a partner token answer `forbidden` for a product that is not installed.
 */
export class ProductRegistry {
  private readonly products = new Map<string, Product>();
  /** The shape each product's schema allows, derived once (`core/json-shape.ts`); null where it bounds nothing. */
  private readonly shapes = new Map<string, JsonShapeBounds | null>();
  private readonly limitOverrides: Record<string, Partial<IntakeLimit>>;

  constructor(options: ProductRegistryOptions = {}) {
    const overrides = options.limitOverrides ?? {};
    for (const [name, override] of Object.entries(overrides)) {
      const fail = (field: string, problem: string): never => {
        throw new TypeError(`ProductRegistry: \`${field}\` ${problem}`);
      };
      if (typeof override !== 'object' || override === null) fail(`limitOverrides.${name}`, 'must be an object { requests?, windowSeconds? }');
      if (override.requests !== undefined && !isPositiveInteger(override.requests))
        fail(`limitOverrides.${name}.requests`, `must be a positive integer, got ${String(override.requests)}`);
      if (override.windowSeconds !== undefined) checkLimit({ requests: 1, windowSeconds: override.windowSeconds }, `limitOverrides.${name}`, fail);
    }
    this.limitOverrides = { ...overrides };
  }

  /** Installs a product; throws when it is not a product or when its name is already registered. */
  register(product: Product<any>): this {
    if (!isProduct(product))
      throw new TypeError(`ProductRegistry.register: ${describeValue(product)} is not a product; create it with defineProduct({ ... })`);
    if (this.products.has(product.name)) throw new Error(`ProductRegistry.register: product "${product.name}" is already registered`);
    this.products.set(product.name, product);
    this.shapes.set(product.name, jsonShapeBoundsOf(product.schema));
    return this;
  }

  has(name: string): boolean {
    return this.products.has(name);
  }

  /** The product of a token's scope; `TrailwireError('forbidden')` when it is not installed. */
  get(name: string): Product {
    const product = this.products.get(name);
    if (product === undefined) throw new TrailwireError('forbidden', `the token's product "${name}" is not installed on this server`);
    return product;
  }

  /** The installed products, in registration order. */
  list(): Product[] {
    return [...this.products.values()];
  }

  /** The intake limit of a product: its default with the operator's override applied. */
  limitOf(name: string): IntakeLimit {
    const product = this.get(name);
    return { ...product.limit, ...this.limitOverrides[name] };
  }

  /**
   * The most members, items and nesting any payload of the product can have, to refuse a body's
   * text that breaks them before parsing it (`JsonShapeScan`); null when the schema bounds none.
   */
  shapeBoundsOf(name: string): JsonShapeBounds | null {
    this.get(name);
    return this.shapes.get(name)!;
  }

  /** Every problem of an untrusted intake body for the product (`[]` when valid); see `DescribeOptions`. */
  validate(name: string, payload: unknown, options?: DescribeOptions): FieldError[] {
    return this.get(name).validate(payload, options);
  }

  /**
   * The field errors of a valid payload's declared reading times (`readingTimes`) that lie more than
   * `MAX_READING_LEAD_MS` after `now` (contract 4, "Time sanity"), one per pointer; `[]` when none
   * does, or when the product declares none (then only its transform dates the payload, and the worker
   * judges that). Throws `internal` naming the product when its `readingTimes` throws or answers
   * malformed entries: a plugin bug, never the partner's.
   */
  readingsAhead(name: string, payload: unknown, now: number): FieldError[] {
    const product = this.get(name);
    if (product.readingTimes === undefined) return [];
    let times: ReadingTime[];
    try {
      times = product.readingTimes(payload);
    } catch (cause) {
      throw new TrailwireError('internal', `product "${name}" failed to read the payload's times: ${messageOf(cause)}`, { cause });
    }
    // One error per field: the latest time a field states is the one that decides. (Nothing is
    // built for the usual payload, whose times are all behind the clock: this runs on every 202.)
    let latestByPointer: Map<string, number> | undefined;
    for (const { pointer, at } of times)
      if (isAheadOfClock(at, now)) (latestByPointer ??= new Map()).set(pointer, Math.max(at, latestByPointer.get(pointer) ?? at));
    if (latestByPointer === undefined) return [];
    return [...latestByPointer]
      .slice(0, MAX_FIELD_ERRORS)
      .map(([path, at]) => ({
        path,
        message: `is ${new Date(at).toISOString()}, more than ${MAX_READING_LEAD_MS / 60_000} minutes after the server's clock (${new Date(now).toISOString()}): check the device's clock`,
      }));
  }

  /**
   * Runs the product's transform on a queued payload and checks the output. Throws
   * `validation_failed` when the payload does not validate (with `errors`), and `internal` naming
   * the product when its transform throws or produces invalid canonical telemetry — so a faulty
   * plugin fails the payload with a reason instead of writing bad records.
   */
  transform(name: string, vin: string, payload: unknown, receivedAt: number): CanonicalTelemetry {
    const product = this.get(name);
    const payloadErrors = product.validate(payload);
    if (payloadErrors.length > 0)
      throw new TrailwireError('validation_failed', `the payload does not match the schema of product "${name}": ${describeErrors(payloadErrors)}`, {
        errors: payloadErrors,
      });
    let telemetry: CanonicalTelemetry;
    try {
      telemetry = product.transform(vin, payload, receivedAt);
    } catch (cause) {
      throw new TrailwireError('internal', `product "${name}" failed to transform the payload: ${messageOf(cause)}`, { cause });
    }
    const problems = checkCanonicalTelemetry(telemetry);
    if (problems.length > 0)
      throw new TrailwireError('internal', `product "${name}" produced invalid canonical telemetry: ${describeErrors(problems)}`);
    return telemetry;
  }

  /** Throws when a limit override names a product that is not registered (a typo in config). */
  assertOverridesKnown(): void {
    const unknown = Object.keys(this.limitOverrides).filter((name) => !this.products.has(name));
    if (unknown.length > 0)
      throw new TypeError(
        `ProductRegistry: \`limitOverrides\` names ${unknown.map((n) => `"${n}"`).join(', ')}, which ${unknown.length === 1 ? 'is' : 'are'} not installed (installed: ${[...this.products.keys()].join(', ') || 'none'})`,
      );
  }
}

/** A registry with `products` registered in order; also checks that every limit override names one of them. */
export function createProductRegistry(products: Iterable<Product<any>>, options: ProductRegistryOptions = {}): ProductRegistry {
  const registry = new ProductRegistry(options);
  for (const product of products) registry.register(product);
  registry.assertOverridesKnown();
  return registry;
}

/** Where `loadProductModule` resolves relative paths. */
export interface LoadProductModuleOptions {
  /** Base directory of relative specifiers (`./my-product.ts`). Default: `process.cwd()`. */
  cwd?: string;
  /** How the module (its file URL or package name) is imported. Default: the runtime's `import()`. */
  importModule?: (target: string) => Promise<Record<string, unknown>>;
}

/**
 * Imports a product module — a file path (relative to `cwd`, or absolute) or a package name — and
 * answers its default export. Throws when the module cannot be loaded, or when its default export is
 * not a product made by `defineProduct`.
 */
export async function loadProductModule(specifier: string, options: LoadProductModuleOptions = {}): Promise<Product> {
  const isPath = specifier.startsWith('.') || isAbsolute(specifier);
  const target = isPath ? pathToFileURL(resolve(options.cwd ?? process.cwd(), specifier)).href : specifier;
  let module: Record<string, unknown>;
  try {
    module = options.importModule ? await options.importModule(target) : ((await import(target)) as Record<string, unknown>);
  } catch (cause) {
    throw new Error(`cannot load product module "${specifier}": ${messageOf(cause)}`, { cause });
  }
  const candidate = module.default;
  if (isProduct(candidate)) return candidate;
  if (typeof candidate === 'object' && candidate !== null && 'transform' in candidate && 'schema' in candidate)
    throw new TypeError(
      `product module "${specifier}": the default export is a product definition, not a product; wrap it: export default defineProduct({ ... })`,
    );
  throw new TypeError(
    `product module "${specifier}": the default export must be a product (export default defineProduct({ ... })), got ${describeValue(candidate)}`,
  );
}

function describeErrors(errors: readonly FieldError[]): string {
  const shown = errors.slice(0, 3).map((e) => `${e.path || '(root)'} ${e.message}`);
  return shown.join('; ') + (errors.length > 3 ? `; and ${errors.length - 3} more` : '');
}

function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing (undefined)';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a value of type ${typeof value}`;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  }
  return value;
}
