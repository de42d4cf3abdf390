/**
 * The gRPC transport's error table: each `TrailwireError` code maps to one gRPC status, the way
 * `HTTP_STATUS_BY_CODE` does for HTTP. A test checks every code is mapped. Errors that are not
 * `TrailwireError`s become INTERNAL with a generic message: internals never reach a client.
 */
import { status } from '@grpc/grpc-js';
import { type ErrorCode, isTrailwireError } from '../../core/errors.ts';

/** The gRPC status of each error code. */
export const GRPC_STATUS_BY_CODE: Record<ErrorCode, status> = {
  validation_failed: status.INVALID_ARGUMENT,
  invalid_api_key: status.UNAUTHENTICATED,
  missing_token: status.UNAUTHENTICATED,
  invalid_token: status.UNAUTHENTICATED,
  wrong_audience: status.PERMISSION_DENIED,
  forbidden: status.PERMISSION_DENIED,
  partner_not_granted: status.PERMISSION_DENIED,
  not_found: status.NOT_FOUND,
  method_not_allowed: status.UNIMPLEMENTED,
  conflict: status.ALREADY_EXISTS,
  idempotency_key_reused: status.INVALID_ARGUMENT,
  payload_too_large: status.RESOURCE_EXHAUSTED,
  unsupported_media_type: status.INVALID_ARGUMENT,
  rate_limited: status.RESOURCE_EXHAUSTED,
  unavailable: status.UNAVAILABLE,
  store_unavailable: status.UNAVAILABLE,
  body_already_read: status.INTERNAL,
  internal: status.INTERNAL,
};

/** What a call ends with: a gRPC status code and the message the client sees. */
export interface GrpcStatusObject {
  code: status;
  details: string;
}

/** The status a call ends with for `error`. */
export function grpcStatusOf(error: unknown): GrpcStatusObject {
  if (isTrailwireError(error)) return { code: GRPC_STATUS_BY_CODE[error.code], details: error.message };
  return { code: status.INTERNAL, details: 'Internal server error' };
}
