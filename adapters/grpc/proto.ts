/**
 * The protobuf definitions served by the gRPC adapter, loaded at runtime with @grpc/proto-loader from
 * the `.proto` files under `proto/` (no code generation step). The LiveFeed's response serializer is
 * replaced by a pass-through: the service encodes each live update once, however many streams it
 * goes to, and writes the same bytes to every one of them.
 */
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** The `proto/` directory of the package: the include root of every Trailwire `.proto` file. */
// Resolved through the package's own `trailwire/proto/*` export, so it is the same folder whether this
// module runs from the sources or compiled under dist/.
export const PROTO_ROOT = fileURLToPath(new URL('../../', import.meta.resolve('trailwire/proto/livefeed/v1/livefeed.proto')));

/** Loader options: field names exactly as in the `.proto` (snake_case), int64 as JS numbers. */
export const PROTO_LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
  includeDirs: [PROTO_ROOT],
};

/** Loads one of Trailwire's `.proto` files, by its path under `proto/`. */
export function loadTrailwireProto(file: string): protoLoader.PackageDefinition {
  return protoLoader.loadSync(file, PROTO_LOADER_OPTIONS);
}

const liveFeedPackage = loadTrailwireProto('livefeed/v1/livefeed.proto');
const healthPackage = loadTrailwireProto('grpc/health/v1/health.proto');

/** `livefeed.v1.LiveFeed` as proto-loader describes it (encoding and decoding messages). */
export const liveFeedProtoService = liveFeedPackage['livefeed.v1.LiveFeed'] as grpc.ServiceDefinition;

const subscribeMethod = liveFeedProtoService.Subscribe!;

/** Encodes a `LiveUpdateResponse` (a plain object with the proto's field names) to protobuf bytes. */
export const encodeLiveUpdateResponse = subscribeMethod.responseSerialize as (message: object) => Buffer;

/** Decodes protobuf bytes to a `LiveUpdateResponse` object (for clients and tests). */
export const decodeLiveUpdateResponse = subscribeMethod.responseDeserialize as (bytes: Buffer) => unknown;

/** The LiveFeed service definition whose responses are written as already-encoded bytes. */
export const liveFeedServiceDefinition: grpc.ServiceDefinition = {
  Subscribe: { ...subscribeMethod, responseSerialize: (bytes: Buffer) => bytes },
};

/** `grpc.health.v1.Health`. */
export const healthServiceDefinition = healthPackage['grpc.health.v1.Health'] as grpc.ServiceDefinition;
