import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  DEFAULT_RETRY_AFTER_SECONDS,
  ERROR_CODES,
  ERROR_DESCRIPTIONS,
  HTTP_STATUS_BY_CODE,
  problemType,
  storeUnavailable,
  TrailwireError,
} from '../../core/errors.ts';

describe('error codes', () => {
  it('every code has an HTTP status, a title and a description', () => {
    for (const code of ERROR_CODES) {
      const mapped = HTTP_STATUS_BY_CODE[code];
      assert.ok(mapped && mapped.status >= 400 && mapped.status < 600, code);
      assert.ok(mapped.title, code);
      assert.ok(ERROR_DESCRIPTIONS[code]?.length > 10, code);
    }
    assert.deepEqual(Object.keys(HTTP_STATUS_BY_CODE).sort(), [...ERROR_CODES].sort());
  });

  it('every code is documented in the README with its problem type', () => {
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
    for (const code of ERROR_CODES) assert.ok(readme.includes(`\`${code}\``), `README documents ${code}`);
    assert.ok(readme.includes(problemType('validation_failed')));
  });

  it('every refusal caused by a dependency is a 503; 500 is for bugs only, ours or the mounting host\'s (contract 6)', () => {
    const byStatus = (status: number) => ERROR_CODES.filter((code) => HTTP_STATUS_BY_CODE[code].status === status).sort();
    assert.deepEqual(byStatus(503), ['store_unavailable', 'unavailable']);
    assert.deepEqual(byStatus(500), ['body_already_read', 'internal']);
    assert.equal(storeUnavailable('the disk is full').retryAfterSeconds, undefined);
    assert.equal(storeUnavailable('the disk is full', undefined, 7).retryAfterSeconds, 7);
    assert.ok(DEFAULT_RETRY_AFTER_SECONDS >= 1);
  });

  it('errors are real Errors with a cause', () => {
    const cause = new Error('root');
    const error = new TrailwireError('internal', 'wrapped', { cause });
    assert.ok(error instanceof Error);
    assert.equal(error.cause, cause);
    assert.equal(error.code, 'internal');
  });
});
