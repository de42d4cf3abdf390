/**
 * The gRPC error table: every error code of the core has a gRPC status, the statuses a LiveFeed
 * client relies on are the ones the contract names, and nothing but a `TrailwireError` reveals its
 * message.
 */
import assert from 'node:assert/strict';
import { it } from 'node:test';
import { status } from '@grpc/grpc-js';
import { GRPC_STATUS_BY_CODE, grpcStatusOf } from '../../../adapters/grpc/status-codes.ts';
import { ERROR_CODES, TrailwireError } from '../../../core/errors.ts';

it('maps every error code to a gRPC status, and only the known codes', () => {
  const known = new Set<number>(Object.values(status).filter((value) => typeof value === 'number'));
  for (const code of ERROR_CODES) {
    assert.ok(Object.hasOwn(GRPC_STATUS_BY_CODE, code), `${code} has no gRPC status`);
    assert.ok(known.has(GRPC_STATUS_BY_CODE[code]), `${code} maps to ${GRPC_STATUS_BY_CODE[code]}, not a gRPC status`);
    assert.notEqual(GRPC_STATUS_BY_CODE[code], status.OK, `${code} must not end a call with OK`);
  }
  assert.deepEqual(Object.keys(GRPC_STATUS_BY_CODE).sort(), [...ERROR_CODES].sort());
});

it('answers the statuses the LiveFeed contract names', () => {
  assert.equal(GRPC_STATUS_BY_CODE.missing_token, status.UNAUTHENTICATED);
  assert.equal(GRPC_STATUS_BY_CODE.invalid_token, status.UNAUTHENTICATED);
  assert.equal(GRPC_STATUS_BY_CODE.wrong_audience, status.PERMISSION_DENIED);
  assert.equal(GRPC_STATUS_BY_CODE.unavailable, status.UNAVAILABLE);
  assert.equal(GRPC_STATUS_BY_CODE.rate_limited, status.RESOURCE_EXHAUSTED);
});

it('ends a call with the code and message of a TrailwireError, and INTERNAL without details otherwise', () => {
  assert.deepEqual(grpcStatusOf(new TrailwireError('wrong_audience', 'Customers only.')), { code: status.PERMISSION_DENIED, details: 'Customers only.' });
  const hidden = grpcStatusOf(new Error('connection to db-7.internal refused'));
  assert.equal(hidden.code, status.INTERNAL);
  assert.doesNotMatch(hidden.details, /db-7/);
});
