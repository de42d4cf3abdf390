/**
 * The standard gRPC health service, `grpc.health.v1.Health` (contract 8), so load balancers and
 * orchestrators can probe the LiveFeed port: `Check` answers the status of a service name (the empty
 * name stands for the whole server; an unknown name is NOT_FOUND, as the protocol says), `Watch`
 * streams the status now and at every change. Shutdown flips everything to NOT_SERVING first.
 */
import * as grpc from '@grpc/grpc-js';
import { healthServiceDefinition } from './proto.ts';

export type ServingStatus = 'UNKNOWN' | 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

interface HealthCheckRequest {
  service: string;
}

interface HealthCheckResponse {
  status: ServingStatus;
}

type WatchCall = grpc.ServerWritableStream<HealthCheckRequest, HealthCheckResponse>;

/** The serving status of each service name a server answers for. */
export class HealthStatus {
  private readonly statuses = new Map<string, ServingStatus>();
  private readonly watchers = new Map<string, Set<WatchCall>>();

  /** Starts with every name in `services` (and the whole server, `''`) SERVING. */
  constructor(services: string[] = []) {
    for (const service of ['', ...services]) this.statuses.set(service, 'SERVING');
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
      let calls = this.watchers.get(service);
      if (!calls) {
        calls = new Set();
        this.watchers.set(service, calls);
      }
      calls.add(call);
      call.on('cancelled', () => this.watchers.get(service)?.delete(call));
      call.write({ status: this.statuses.get(service) ?? 'SERVICE_UNKNOWN' });
    };
    return { Check: check, Watch: watch };
  }
}

/** Adds `grpc.health.v1.Health` answering from `health` to `server`. */
export function addHealthService(server: grpc.Server, health: HealthStatus): void {
  server.addService(healthServiceDefinition, health.implementation());
}
