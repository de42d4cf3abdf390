/**
 * Every response the test client receives is held to the app's own `/openapi.json` (issue 31): its
 * status is declared for the operation, its content type is one the operation declares, its JSON body
 * matches the declared schema, and the headers the document marks `required` are there. A new route,
 * a new status or a changed body that the document does not say fails the test that met it, so the
 * document cannot drift from what the server answers.
 *
 * Outside the document, on purpose: the people's pages (`/`, `/live`, `/docs` and their assets), whose
 * only documented answer is a problem (a 4xx or 5xx there must still be a valid problem), and the
 * protocol-level answers to `OPTIONS` (CORS preflight, `Allow`) and `HEAD`.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

type Json = Record<string, any>;

const addFormats = addFormatsModule.default;

/** One checker per served document (every test app serves its own, per its mounts and products). */
export interface ResponseChecker {
  /** Throws an Error naming the request, the status and what the document does not say. */
  check(method: string, pathAndQuery: string, status: number, headers: Headers, body: unknown): void;
}

const escapePointer = (segment: string) => segment.replace(/~/g, '~0').replace(/\//g, '~1');

/** A checker for `document`, the app's served OpenAPI 3.1 document. */
export function responseChecker(document: Json): ResponseChecker {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  ajv.addSchema(document, 'openapi.json');
  const validators = new Map<string, ValidateFunction>();
  const validatorOf = (pointer: string) => {
    let validate = validators.get(pointer);
    if (!validate) validators.set(pointer, (validate = ajv.compile({ $ref: `openapi.json#${pointer}` })));
    return validate;
  };
  const prefix = new URL(document.servers?.[0]?.url ?? '/', 'http://x').pathname.replace(/\/$/, '');
  // Concrete paths before templated ones, as OpenAPI matches them (`.../intake/status` before `.../intake/{VIN}`).
  const parametersOf = (template: string) => template.split('{').length;
  const templates = Object.keys(document.paths ?? {})
    .sort((a, b) => parametersOf(a) - parametersOf(b))
    .map((template) => ({
      template,
      pattern: new RegExp(`^${prefix}${template.replace(/[.]/g, '\\.').replace(/\{[^}]+\}/g, '[^/]+')}$`),
    }));
  const resolve = (response: Json): { response: Json; pointer: string | null } =>
    typeof response.$ref === 'string' ? { response: pointerGet(document, response.$ref.slice(1)), pointer: response.$ref.slice(1) } : { response, pointer: null };

  return {
    check(method, pathAndQuery, status, headers, body) {
      const where = `${method} ${pathAndQuery} answered ${status}`;
      const upper = method.toUpperCase();
      if (upper === 'OPTIONS' || upper === 'HEAD') return;
      const path = pathAndQuery.split('?')[0]!;
      const contentType = (headers.get('content-type') ?? '').split(';')[0]!.trim();
      const match = templates.find(({ pattern }) => pattern.test(path));
      if (!match) {
        // Not an API path (a page, or nothing): only its problems are the document's business.
        if (status >= 400) checkBody(`/components/schemas/Problem`, contentType === 'application/problem+json', where, body, validatorOf);
        return;
      }
      const pathItem = document.paths[match.template] as Json;
      const operation = pathItem[method.toLowerCase()] as Json | undefined;
      let declared: Json | undefined;
      let pointer: string;
      if (operation) {
        declared = operation.responses?.[String(status)];
        pointer = `/paths/${escapePointer(match.template)}/${method.toLowerCase()}/responses/${status}`;
        if (!declared) throw new Error(`${where}: status ${status} is not declared for ${upper} ${match.template} in /openapi.json`);
      } else {
        // Another method on a known path: the shared 405 every operation declares.
        declared = Object.values(pathItem).find((other: Json) => other?.responses?.['405'])?.responses['405'];
        pointer = '';
        if (status !== 405 || !declared) throw new Error(`${where}: ${upper} is not an operation of ${match.template}; expected a declared 405`);
        const allow = headers.get('allow') ?? '';
        const methods = Object.keys(pathItem).map((name) => name.toUpperCase()).sort();
        if (!methods.every((name) => allow.toUpperCase().includes(name))) throw new Error(`${where}: Allow "${allow}" does not list ${methods.join(', ')}`);
      }
      const resolved = resolve(declared);
      if (resolved.pointer) pointer = resolved.pointer;
      for (const [name, header] of Object.entries((resolved.response.headers ?? {}) as Json)) {
        if (header.required && !headers.has(name)) throw new Error(`${where}: the required header ${name} is missing`);
      }
      const content = (resolved.response.content ?? {}) as Json;
      if (Object.keys(content).length === 0) return;
      if (!(contentType in content)) throw new Error(`${where}: content type "${contentType}" is not one of ${Object.keys(content).join(', ')}`);
      const schema = `${pointer}/content/${escapePointer(contentType)}/schema`;
      // An NDJSON export: each line one record of the declared schema.
      if (contentType === 'application/x-ndjson') {
        for (const line of String(body).split('\n').filter(Boolean)) validateAgainst(schema, where, JSON.parse(line), validatorOf);
        return;
      }
      if (!contentType.includes('json')) return;
      validateAgainst(schema, where, body, validatorOf);
    },
  };
}

function checkBody(schemaPointer: string, isProblem: boolean, where: string, body: unknown, validatorOf: (pointer: string) => ValidateFunction): void {
  if (!isProblem) throw new Error(`${where}: a refusal outside the API's paths is application/problem+json too`);
  validateAgainst(schemaPointer, where, body, validatorOf);
}

function validateAgainst(pointer: string, where: string, body: unknown, validatorOf: (pointer: string) => ValidateFunction): void {
  const validate = validatorOf(pointer);
  if (!validate(body)) {
    const errors = (validate.errors ?? []).slice(0, 5).map((error) => `${error.instancePath || '(body)'} ${error.message}`).join('; ');
    throw new Error(`${where}: the body does not match ${pointer} of /openapi.json: ${errors}\n${JSON.stringify(body).slice(0, 500)}`);
  }
}

function pointerGet(document: Json, pointer: string): Json {
  return pointer
    .split('/')
    .slice(1)
    .reduce((node: Json, segment) => node?.[segment.replace(/~1/g, '/').replace(/~0/g, '~')], document);
}
