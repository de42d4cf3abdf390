/**
 * What a simulation run records: every request and its answer, the final state of every accepted
 * payload, every LiveFeed connection with its heartbeats and updates, and each key rotation. The
 * invariant checks and the report read only this, so both can be tested on recorded data, and a
 * faulty server shows up the same way in a test as in a real run.
 */
import type { IntakeLimit } from '../core/products.ts';
import type { ScenarioName, WindowGroup } from './scenarios.ts';

/** One intake request and its answer. Times are client epoch ms. */
export interface SendRecord {
  product: string;
  vin: string;
  /** Its window group in `RunRecord.groups`, or null for requests outside the plan (probes). */
  group: number | null;
  /** When the schedule said it was due: its latency counts from here. */
  plannedAt: number;
  /** When it left (later than due only when `--max-in-flight` held it back, or the client stalled). */
  sentAt: number;
  /** 0 while unanswered. */
  answeredAt: number;
  /** The HTTP status; 0 when no answer came (network error). */
  status: number;
  /** The intake id of a 202. */
  id?: string;
  /** The RateLimit-* headers, when present. */
  rateLimit?: { limit: number; remaining: number; reset: number };
  /** The problem title/detail of an error answer, or the network error. */
  error?: string;
}

/** The last known state of an accepted payload, read from the status endpoint. */
export interface IntakeOutcome {
  status: 'queued' | 'processing' | 'processed' | 'failed' | 'unknown';
  /** Server epoch ms. */
  receivedAt?: number;
  processedAt?: number;
  error?: string | null;
}

export interface UpdateRecord {
  vin: string;
  trailerId: string;
  fleetId: number;
  /** When the server made the update (server epoch ms). */
  ts: number;
  receivedAt: number;
  /** Index of the connection it came on, in `SubscriberRecord.connections`. */
  connection: number;
}

export interface ConnectionRecord {
  /** When the Subscribe call was made. */
  startedAt: number;
  heartbeats: number[];
  /** When the stream ended (by the server, or closed by the simulator). */
  endedAt?: number;
  /** The gRPC status it ended with (an SSE stream's end in the same codes); 1 (CANCELLED) when the simulator closed it. */
  endCode?: number;
}

export interface SubscriberRecord {
  index: number;
  /** The LiveFeed over gRPC, or `GET /api/v1/live` (Server-Sent Events). */
  transport: 'grpc' | 'sse';
  /** Index of its customer in `RunRecord.customers`. */
  customer: number;
  /** A slow reader (slow-subscriber scenario). */
  slow: boolean;
  connections: ConnectionRecord[];
  updates: UpdateRecord[];
  /** Why the client gave up reconnecting, if it did. */
  gaveUp?: string;
}

export interface RotationRecord {
  audience: 'partners' | 'customers';
  /** The product (partners) or customer label rotated. */
  subject: string;
  /** Index of the customer, for customer rotations. */
  customer?: number;
  /** Client epoch ms when the rotation was answered. */
  rotatedAt: number;
  /** The status a request with a token minted before the rotation got (must be 401). */
  oldTokenStatus?: number;
  /** The status authenticating with the old key got (must be 401). */
  oldKeyStatus?: number;
  /** Why the rotation itself failed, if it did. */
  error?: string;
}

/** One event of a webhook delivery, as the receiver read it. */
export interface WebhookEventRecord {
  type: string;
  /** The trailer's VIN (`data.vin`); '' when the event carried none. */
  vin: string;
  /** The event's `timestamp` (server epoch ms): the processed time of the payloads that made it. */
  ts: number;
  /** A short digest of the event's JSON: two events alike in type, VIN and time are one event twice only when it matches. */
  digest: string;
}

/** One request the receiver took at an endpoint's path. Times are client epoch ms. */
export interface WebhookDeliveryRecord {
  /** `webhook-id`: the same on every attempt of one delivery. */
  webhookId: string;
  receivedAt: number;
  /** Why a Standard Webhooks receiver would refuse it (a bad signature, no headers, a body that is no `{"events": [...]}`); absent when valid. */
  invalid?: string;
  events: WebhookEventRecord[];
}

/** A webhook endpoint the run registered, with what reached it. */
export interface WebhookEndpointRecord {
  index: number;
  /** Index of its customer in `RunRecord.customers`. */
  customer: number;
  /** The id the server gave it. */
  id: string;
  url: string;
  /** When the server answered its registration (client epoch ms): updates made after it are expected at it. */
  registeredAt: number;
  deliveries: WebhookDeliveryRecord[];
  /** Whether the simulator deleted it at the end of the run, and why not when it could not. */
  deleted: boolean;
  deleteError?: string;
}

export interface WebhookRecord {
  endpoints: WebhookEndpointRecord[];
  /** Requests to the receiver at no endpoint's path (an endpoint another run left behind, say): counted, not judged. */
  stray: number;
}

export interface RunRecord {
  scenario: ScenarioName;
  mode: 'embedded' | 'remote';
  seed: number;
  /** The limit the simulator assumes for each product it sent. */
  limits: Record<string, IntakeLimit>;
  groups: WindowGroup[];
  sends: SendRecord[];
  /** By intake id. */
  outcomes: Record<string, IntakeOutcome>;
  /** How long the simulator waited for payloads to be processed. */
  processingWaitMs: number;
  customers: Array<{ label: string }>;
  /** The customer index owning each VIN the run may see updates for. */
  ownership: Record<string, number>;
  subscribers: SubscriberRecord[];
  /** The heartbeat interval the server is expected to keep. */
  heartbeatIntervalMs: number;
  /** How late a heartbeat may be before it is a violation. */
  heartbeatSlackMs: number;
  /** Updates made this close to a connection's start or end are not expected on it. */
  liveMarginMs: number;
  /** Server clock minus client clock, ms. */
  clockOffsetMs: number;
  rotations: RotationRecord[];
  /** The webhook endpoints the run registered (`--webhooks`), absent when it registered none. */
  webhooks?: WebhookRecord;
  /** Set when `--abort-on-fail` stopped the traffic: when, and the thresholds breached then (with their figures). */
  aborted?: { at: number; breached: string[] };
  /** Client epoch ms: traffic start and end. */
  startedAt: number;
  trafficEndedAt: number;
  /** Client epoch ms: when the run (settling included) ended. */
  endedAt: number;
}
