/**
 * `trailwire/core`: the framework-free core. Start with `createTrailwire({ store })`; the rest is
 * what an integrator or a backend author needs to call it, extend it, or implement one of its seams
 * (store, window counter, live bus, intake queue).
 */
export { createTrailwire, DEFAULT_LIMITS, type LimitSetting, type LimitSettings, type Trailwire, type TrailwireOptions } from './trailwire.ts';
export { ERROR_CODES, ERROR_DESCRIPTIONS, HTTP_STATUS_BY_CODE, invalidField, isTrailwireError, problemType, TrailwireError } from './errors.ts';
export type { ErrorCode, FieldError, TrailwireErrorOptions } from './errors.ts';
export { type Clock, type IdGenerator, ManualClock, randomIds, systemClock } from './clock.ts';
export type * from './model.ts';
export { HEADINGS } from './model.ts';
export type * from './store.ts';
export type * from './canonical.ts';
export { FixedWindowLimiter, MemoryWindowCounter, type RateLimitState, type WindowCounter } from './rate-limit.ts';
export { CursorCodec, type Page, TAKE_DEFAULT, TAKE_MAX } from './paging.ts';
export { type AccessClaims, type IssuedToken, productOfScope, requireAudience, TokenService } from './tokens.ts';
export { AuthService, type RotationListener } from './auth-service.ts';
export { ReadService, type QueryParams } from './read-service.ts';
export { AdminService } from './admin-service.ts';
export { SigningKeyRing, type SigningAlgorithm } from './signing-keys.ts';
export { deriveTrailerStatus, statusView } from './trailer-status.ts';
export { parseVin, vinCheckDigit, withCheckDigit } from './vin.ts';
export { cardinalHeading } from './heading.ts';
export {
  createProductRegistry,
  defineProduct,
  loadProductModule,
  type IntakeLimit,
  type Product,
  type ProductDefinition,
  ProductRegistry,
} from './products.ts';
