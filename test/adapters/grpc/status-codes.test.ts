import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { GRPC_STATUS_BY_CODE, grpcStatusOf } from '../../../adapters/grpc/status-codes.ts';
import { ERROR_CODES, TrailwireError } from '../../../core/errors.ts';

describe('gRPC status table', () => {
  it('maps every error code, and nothing else, to a gRPC status other than OK', () => {
    assert.deepEqual(Object.keys(GRPC_STATUS_BY_CODE).sort(), [...ERROR_CODES].sort());
    for (const code of ERROR_CODES) {
      const mapped = GRPC_STATUS_BY_CODE[code];
      assert.ok(typeof mapped === 'number' && mapped !== status.OK && status[mapped] !== undefined, code);
    }
  });

  it('gives the statuses a LiveFeed client relies on', () => {
    const expected: Array<[string, status]> = [
      ['missing_token', status.UNAUTHENTICATED],
      ['invalid_token', status.UNAUTHENTICATED],
      ['invalid_api_key', status.UNAUTHENTICATED],
      ['wrong_audience', status.PERMISSION_DENIED],
      ['forbidden', status.PERMISSION_DENIED],
      ['rate_limited', status.RESOURCE_EXHAUSTED],
      ['unavailable', status.UNAVAILABLE],
      ['internal', status.INTERNAL],
      ['validation_failed', status.INVALID_ARGUMENT],
      ['not_found', status.NOT_FOUND],
    ];
    for (const [code, grpcStatus] of expected)
      assert.equal(GRPC_STATUS_BY_CODE[code as keyof typeof GRPC_STATUS_BY_CODE], grpcStatus, code);
  });

  it('ends a call with the mapped status and the error message', () => {
    assert.deepEqual(grpcStatusOf(new TrailwireError('wrong_audience', 'This endpoint takes a customer token.')), {
      code: status.PERMISSION_DENIED,
      details: 'This endpoint takes a customer token.',
    });
  });

  it('never shows the client the message of an unexpected error', () => {
    assert.deepEqual(grpcStatusOf(new Error('SQLITE_BUSY: database is locked at /var/lib/trailwire.db')), {
      code: status.INTERNAL,
      details: 'Internal server error',
    });
    assert.equal(grpcStatusOf('a thrown string').code, status.INTERNAL);
  });
});
