/**
 * The standard gRPC health service, `grpc.health.v1.Health` (contract 8), so load balancers and
 * orchestrators can probe the LiveFeed port: `Check` answers the status of a service name (the empty
 * name stands for the whole server; an unknown name is NOT_FOUND, as the protocol says), `Watch`
 * streams the status now and at every change. Shutdown flips everything to NOT_SERVING first.
 *
 * `Watch` is unauthenticated (probes carry no token) and a stream lives until the client leaves, so
 * it is capped per connection and in total (issue 29: 10,000 uncapped streams on 100 connections
 * took 105 MB); a stream over a cap ends at once with RESOURCE_EXHAUSTED. A probe needs one stream.
 */
import * as grpc from '@grpc/grpc-js';
import { TrailwireError } from '../../core/errors.ts';
import { healthServiceDefinition } from './proto.ts';
import { grpcStatusOf } from './status-codes.ts';

export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

interface HealthCheckRequest {
  service: string;
}

interface HealthCheckResponse {
  status: ServingStatus;
}

type WatchCall = grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>;

export interface HealthWatchLimits {
  /** `Watch` streams open at once on this server; 0 refuses every `Watch` (`Check` still answers). Default 100. */
  maxWatches?: number;
  /** `Watch` streams open at once on one connection (one peer address and port). Default 2. */
  maxWatchesPerConnection?: number;
}

export const DEFAULT_HEALTH_WATCH_LIMITS = { maxWatches: 100, maxWatchesPerConnection: 2 } as const;

/** The serving status of each service name a server answers for. */
export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatus>();
  /** Open `Watch` calls by service name; a name leaves the map with its last call. */
  private readonly watchers = new Map<string, Set<WatchCall>>();
  /** Open `Watch` calls by connection (the peer), for the per-connection cap; emptied the same way. */
  private readonly watchesByPeer = new Map<string, number>();
  private watchCount = 0;
  private readonly limits: Required<HealthWatchLimits>;

  /** Starts with every name in `services` (and the whole server, `''`) SERVING. */
  constructor(services: string[] = [], limits: HealthWatchLimits = {}) {
    for (const service of ['', ...services]) this.statuses.set(service, 'SERVING');
    this.limits = { ...DEFAULT_HEALTH_WATCH_LIMITS, ...limits };
    for (const [name, value] of Object.entries(this.limits))
      if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`HealthStatus: \`${name}\` must be a whole number >= 0, got ${value}`);
  }

  /** `Watch` streams open now, and the connections and service names they are tracked under (all 0 once every stream ended). */
  get watches(): { streams: number; connections: number; services: number } {
    return { streams: this.watchCount, connections: this.watchesByPeer.size, services: this.watchers.size };
  }

  get(service: string): ServingStatus | undefined {
    return this.statuses.get(service);
  }

  set(service: string, status: ServingStatus): void {
    this.statuses.set(service, status);
    for (const call of this.watchers.get(service) ?? []) call.write({ status });
  }

  /** Marks every known service NOT_SERVING (the first step of a shutdown). */
  setAllNotServing(): void {
    for (const service of this.statuses.keys()) this.set(service, 'NOT_SERVING');
  }

  /** Ends every Watch stream (the server is going away). */
  endWatches(): void {
    for (const calls of this.watchers.values()) for (const call of calls) call.end();
    this.watchers.clear();
    this.watchesByPeer.clear();
    this.watchCount = 0;
  }

  /** The `grpc.health.v1.Health` implementation reading this status. */
  implementation(): grpc.UntypedServiceImplementation {
    const check: grpc.handleUnaryCall<HealthCheckRequest, HealthCheckResponse> = (call, callback) => {
      const status = this.statuses.get(call.request.service);
      if (status === undefined) callback({ code: grpc.status.NOT_FOUND, details: `Unknown service "${call.request.service}".` });
      else callback(null, { status });
    };
    const watch: grpc.handleServerStreamingCall<HealthCheckRequest, HealthCheckResponse> = (call) => {
      const { service } = call.request;
      const peer = call.getPeer();
      const onPeer = this.watchesByPeer.get(peer) ?? 0;
      if (this.watchCount >= this.limits.maxWatches || onPeer >= this.limits.maxWatchesPerConnection) {
        const scope = this.watchCount >= this.limits.maxWatches ? 'this server' : 'one connection';
        const error = new TrailwireError('rate_limited', `Too many health Watch streams on ${scope}; use Check, or close a Watch first.`);
        call.emit('error', { ...grpcStatusOf(error), metadata: new grpc.Metadata() });
        return;
      }
      let calls = this.watchers.get(service);
      if (!calls) {
        calls = new Set();
        this.watchers.set(service, calls);
      }
      calls.add(call);
      this.watchesByPeer.set(peer, onPeer + 1);
      this.watchCount++;
      // 'cancelled' fires once the call is over, whoever ended it; what it held goes with it.
      call.once('cancelled', () => {
        const held = this.watchers.get(service);
        if (!held?.delete(call)) return;
        if (held.size === 0) this.watchers.delete(service);
        const left = (this.watchesByPeer.get(peer) ?? 1) - 1;
        if (left > 0) this.watchesByPeer.set(peer, left);
        else this.watchesByPeer.delete(peer);
        this.watchCount--;
      });
      call.write({ status: this.statuses.get(service) ?? 'SERVICE_UNKNOWN' });
    };
    return { Check: check, Watch: watch };
  }
}

/** Adds `grpc.health.v1.Health` answering from `health` to `server`. */
export function addHealthService(server: grpc.Server, health: HealthStatus): void {
  server.addService(healthServiceDefinition, health.implementation());
}
