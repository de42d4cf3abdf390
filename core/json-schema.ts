/**
 * JSON Schema validation of untrusted payloads. Product schemas are JSON Schema draft 2020-12 — the
 * dialect of OpenAPI 3.1, so `/openapi.json` can publish them unchanged — compiled by Ajv in strict
 * mode (an unknown keyword, a type-specific keyword without its `type`, or a union type other than
 * `[T, "null"]` is a start-up error, not a silent hole). Ajv's errors
 * become Trailwire `FieldError`s whose `path` is a JSON pointer into the body (`/sensors/0/wheel`, the
 * root is ``) and whose message a partner's developer can act on. Validation never coerces, fills
 * defaults or removes properties: the payload that was validated is the payload that gets queued.
 *
 * The `date-time` format is Trailwire's own strict RFC 3339 `date-time` (a `T` separator, a time zone
 * `Z` or `±hh:mm`, real calendar dates), because the transforms turn such strings into epoch
 * milliseconds with `parseRfc3339` and the two must agree on every input.
 */
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FieldError } from './errors.ts';

/** The `$schema` of every product schema; a schema may omit it. */
export const JSON_SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** At most this many field errors are reported for one payload (a huge bad array stays a small 400). */
export const MAX_FIELD_ERRORS = 50;

/** A JSON Schema: an object of keywords, or `true` / `false`. */
export type JsonSchema = boolean | JsonSchemaObject;

export interface JsonSchemaObject {
  [keyword: string]: unknown;
}

// ajv-formats is CommonJS; under NodeNext its default import types as the module namespace.
const addFormats = addFormatsModule.default;

const RFC3339_DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Epoch milliseconds of an RFC 3339 `date-time` (`2026-01-01T12:00:00Z`, `2026-01-01T13:00:00.250+01:00`),
 * or `null` when the text is not one. Fractions finer than a millisecond are truncated; a leap second
 * (`:60`) counts as the first millisecond of the next minute, which is how epoch time treats it.
 */
export function parseRfc3339(text: string): number | null {
  const match = RFC3339_DATE_TIME.exec(text);
  if (match === null) return null;
  const [, year, month, day, hour, minute, second, fraction, zulu, sign, offsetHour, offsetMinute] = match;
  const y = Number(year);
  const mo = Number(month);
  const d = Number(day);
  const h = Number(hour);
  const mi = Number(minute);
  const s = Number(second);
  if (mo < 1 || mo > 12 || d < 1 || d > daysInMonth(y, mo)) return null;
  if (h > 23 || mi > 59 || s > 60 || (s === 60 && mi !== 59)) return null;
  let offsetMinutes = 0;
  if (zulu === undefined) {
    const oh = Number(offsetHour);
    const om = Number(offsetMinute);
    if (oh > 23 || om > 59) return null;
    offsetMinutes = (sign === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const millis = fraction === undefined ? 0 : Number(fraction.padEnd(3, '0').slice(0, 3));
  // setUTCFullYear, unlike Date.UTC, does not map years 0–99 to 1900–1999.
  const date = new Date(0);
  date.setUTCFullYear(y, mo - 1, d);
  date.setUTCHours(h, mi, s, millis);
  return date.getTime() - offsetMinutes * 60_000;
}

/** Whether `text` is an RFC 3339 `date-time` that `parseRfc3339` accepts. */
export function isRfc3339DateTime(text: string): boolean {
  return parseRfc3339(text) !== null;
}

function daysInMonth(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** How much of an invalid value's problems a validator describes. */
export interface DescribeOptions {
  /**
   * Every problem (up to `MAX_FIELD_ERRORS`) when true, the first one only when false. Default true.
   * Describing everything costs time in proportion to the problems (Ajv's `allErrors` builds an
   * error object for each): a 250 KB body of 24,000 unknown keys took ~22 ms of CPU to describe
   * (issue 29), so intake asks for everything only of a small body.
   */
  describeAll?: boolean;
}

/** Validates one untrusted value; answers `[]` when it is valid. */
export type SchemaValidator = (value: unknown, options?: DescribeOptions) => FieldError[];

/**
 * Compiles a draft 2020-12 schema into a validator. It decides at the first problem (Ajv without
 * `allErrors`), then describes every problem only when asked (`describeAll`, the default), so a
 * caller facing untrusted bodies bounds the cost of a refusal. Throws Ajv's error when the schema is
 * invalid or not strict; callers name the schema's owner in the message they rethrow.
 */
export function compileJsonSchema(schema: JsonSchema): SchemaValidator {
  // One Ajv per schema: schemas stay independent (two products may reuse an `$id`), and the cost is
  // paid once at start-up.
  const compile = (allErrors: boolean) => {
    const ajv = new Ajv2020({ strict: true, allErrors, coerceTypes: false, useDefaults: false });
    addFormats(ajv);
    ajv.addFormat('date-time', { type: 'string', validate: isRfc3339DateTime });
    return ajv.compile(schema);
  };
  const firstProblem = compile(false);
  const everyProblem = compile(true);
  return (value, options = {}) => {
    if (firstProblem(value)) return [];
    if (options.describeAll === false) return toFieldErrors(firstProblem.errors ?? []);
    everyProblem(value);
    return toFieldErrors(everyProblem.errors ?? []);
  };
}

/** Maps Ajv errors to field errors: JSON pointer paths (missing and extra properties included) and plain messages. */
export function toFieldErrors(errors: readonly ErrorObject[]): FieldError[] {
  const seen = new Set<string>();
  const result: FieldError[] = [];
  for (const error of errors) {
    const fieldError = toFieldError(error);
    const key = `${fieldError.path}\u0000${fieldError.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    result.push(fieldError);
    if (result.length === MAX_FIELD_ERRORS) break;
  }
  return result;
}

/** Appends one reference token to a JSON pointer, escaped as RFC 6901 requires. */
export function pointerTo(base: string, token: string | number): string {
  return `${base}/${String(token).replace(/~/g, '~0').replace(/\//g, '~1')}`;
}

function toFieldError(error: ErrorObject): FieldError {
  const path = error.instancePath;
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'required':
      return { path: pointerTo(path, String(params.missingProperty)), message: 'is required' };
    case 'dependentRequired':
      return {
        path: pointerTo(path, String(params.missingProperty)),
        message: `is required when ${String(params.property)} is present`,
      };
    case 'additionalProperties':
      return { path: pointerTo(path, String(params.additionalProperty)), message: 'is not an allowed property' };
    case 'unevaluatedProperties':
      return { path: pointerTo(path, String(params.unevaluatedProperty)), message: 'is not an allowed property' };
    case 'type':
      return { path, message: typeMessage(params.type) };
    case 'enum':
      return { path, message: `must be one of ${(params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}` };
    case 'const':
      return { path, message: `must be ${JSON.stringify(params.allowedValue)}` };
    case 'format':
      return {
        path,
        message:
          params.format === 'date-time'
            ? 'must be an RFC 3339 date-time with a time zone, e.g. 2026-01-01T12:00:00Z'
            : `must be a valid ${String(params.format)}`,
      };
    case 'minimum':
      return { path, message: `must be at least ${String(params.limit)}` };
    case 'maximum':
      return { path, message: `must be at most ${String(params.limit)}` };
    case 'exclusiveMinimum':
      return { path, message: `must be greater than ${String(params.limit)}` };
    case 'exclusiveMaximum':
      return { path, message: `must be less than ${String(params.limit)}` };
    case 'multipleOf':
      return { path, message: `must be a multiple of ${String(params.multipleOf)}` };
    case 'minLength':
      return { path, message: `must be at least ${String(params.limit)} characters long` };
    case 'maxLength':
      return { path, message: `must be at most ${String(params.limit)} characters long` };
    case 'pattern':
      return { path, message: `must match the pattern ${String(params.pattern)}` };
    case 'minItems':
      return { path, message: `must have at least ${String(params.limit)} item${params.limit === 1 ? '' : 's'}` };
    case 'maxItems':
      return { path, message: `must have at most ${String(params.limit)} item${params.limit === 1 ? '' : 's'}` };
    case 'uniqueItems':
      return { path, message: `must not repeat items (items ${String(params.j)} and ${String(params.i)} are identical)` };
    case 'minProperties':
      return { path, message: `must have at least ${String(params.limit)} properties` };
    case 'maxProperties':
      return { path, message: `must have at most ${String(params.limit)} properties` };
    case 'false schema':
      return { path, message: 'is not allowed' };
    default:
      return { path, message: error.message ?? 'is invalid' };
  }
}

function typeMessage(type: unknown): string {
  const types = (Array.isArray(type) ? type : String(type).split(',')).map(String);
  const named = types.map((t) => (t === 'null' ? 'null' : /^[aeiou]/.test(t) ? `an ${t}` : `a ${t}`));
  if (named.length === 1) return `must be ${named[0]}`;
  return `must be ${named.slice(0, -1).join(', ')} or ${named[named.length - 1]}`;
}
