/**
 * One simulation run against a Trailwire deployment (embedded or remote — see `embedded.ts` and
 * `remote.ts` for how a target is made): opens the LiveFeed subscribers and registers the webhook
 * endpoints (`webhook-endpoints.ts`), sends the scenario's plan of intake requests on time, rotates
 * keys when the scenario says so, then waits for every accepted payload to be processed and its live
 * updates and webhook events to arrive, deletes the endpoints, and answers the `RunRecord` that the
 * invariant checks and the report read. Every answer is recorded as it came: intake requests are
 * never retried, so a 429 or a 5xx is seen, not hidden.
 *
 * The load is an open model: each request is sent when the schedule says it is due, however many
 * are still unanswered (unless `maxInFlight` caps them, when a due request waits for a free slot),
 * and its latency counts from that due time. A server that stalls therefore shows as the late
 * answers it causes, not as requests the simulator quietly did not send (coordinated omission).
 */
import PQueue from 'p-queue';
import type { ArrivalSchedule } from './arrival-schedule.ts';
import type { IntakeLimit } from '../core/products.ts';
import { builtInProducts } from '../products/index.ts';
import { TrailwireClient } from './client/http-client.ts';
import { subscribeLiveEvents } from './client/live-events-client.ts';
import { subscribeWithClient, type LiveUpdate } from './client/live-feed-client.ts';
import { expectedUpdates } from './expected-updates.ts';
import { readBackOutcomes } from './read-back.ts';
import type { ConnectionRecord, IntakeOutcome, RotationRecord, RunRecord, SendRecord, SubscriberRecord } from './run-record.ts';
import { planSends, SCENARIO_DEFINITIONS, type PlannedSend, type ScenarioName } from './scenarios.ts';
import { judgeThresholds, quantile, requestFigures, type Threshold } from './thresholds.ts';
import type { SimulatedProduct, TrafficGenerator } from './traffic.ts';
import { openWebhookEndpoints, type WebhookEndpoints, type WebhookEndpointsOptions } from './webhook-endpoints.ts';

/** Where to send, with what keys, and what the simulator may assume about the deployment. */
export interface SimulationTarget {
  mode: 'embedded' | 'remote';
  /** Base URL of the data API (and the auth API unless `authUrl`). */
  baseUrl: string;
  authUrl?: string;
  /** `host:port` of the LiveFeed. */
  grpcTarget: string;
  /** A partner key per product the scenario sends. */
  partnerKeys: Partial<Record<SimulatedProduct, string>>;
  customers: Array<{ label: string; apiKey: string }>;
  /** The VINs to drive, in order (index = the plan's `vinIndex`); their trailers are in `traffic`. */
  vins: string[];
  /** A VIN of no customer's fleet, for probes that must not touch the plan's quotas. */
  probeVin: string;
  /** The customer index owning each VIN (VINs in no fleet are absent). */
  ownership: Record<string, number>;
  /** The intake limit of each product, as the simulator assumes it. */
  limits: Record<string, IntakeLimit>;
  /** The server's heartbeat interval, as the simulator assumes it. */
  heartbeatIntervalMs: number;
  /** Server clock minus client clock, ms. */
  clockOffsetMs: number;
}

export interface SimulationOptions {
  scenario: ScenarioName;
  seed: number;
  /** When intake requests fall due (a constant rate, or stages). */
  arrivals: ArrivalSchedule;
  /**
   * This process's part of a run shared by `count` processes (`--shard i/n`): it drives the VINs
   * whose index is `index - 1` modulo `count`. Default: all of them.
   */
  shard?: { index: number; count: number };
  /** LiveFeed (gRPC) subscribers, spread over the customers. */
  subscribers: number;
  /** `GET /api/v1/live` (Server-Sent Events) subscribers beside them, spread the same way. Default 0. */
  sseSubscribers?: number;
  /**
   * Webhook endpoints to register, spread over the customers, and where their receiver listens and
   * is reached (`webhook-endpoints.ts`). Default: none.
   */
  webhooks?: Pick<WebhookEndpointsOptions, 'endpoints' | 'listen' | 'url'>;
  /** Wait for the next window boundary before the traffic starts, so the first window is whole. Default false. */
  alignToWindow?: boolean;
  /** Keep sends this far from window edges. Default 100 ms. */
  windowMarginMs?: number;
  /** How late a heartbeat may be. Default: max(1,000 ms, a quarter of the interval). */
  heartbeatSlackMs?: number;
  /** Updates this close to a connection's start or end are not expected on it. Default 100 ms. */
  liveMarginMs?: number;
  /** How long to wait, after the traffic, for accepted payloads to be processed. Default 30 s. */
  processingWaitMs?: number;
  /** A slow subscriber takes one message per this many ms while the traffic runs. Default 200 ms. */
  slowReadMs?: number;
  /**
   * The most intake requests in flight at once; a due request waits for a free slot, and its wait
   * counts in its latency. Default: no cap (the open model).
   */
  maxInFlight?: number;
  /** Judged every half second during the traffic with `abortOnFail`, which stops the traffic at the first breach. */
  thresholds?: readonly Threshold[];
  /** Stop sending at the first breached threshold (the run's tail — processing, live, checks — still runs). Default false. */
  abortOnFail?: boolean;
  /** Called about twice a second while the traffic runs, and while the statuses of its accepted payloads are read after it. */
  onProgress?: (progress: SimulationProgress) => void;
  /** Told each step before the traffic as it starts. */
  onStage?: (text: string) => void;
}

export interface SimulationProgress {
  elapsedMs: number;
  durationMs: number;
  sent: number;
  /** Requests per second over the last second. */
  rate: number;
  accepted: number;
  limited: number;
  clientErrors: number;
  serverErrors: number;
  /** Of the latest requests. */
  p50Ms: number;
  p99Ms: number;
  liveUpdates: number;
  /**
   * Once the traffic is over: the accepted payloads whose final state (processed or failed) their
   * status has told, of all of them (read 100 to a request: `read-back.ts`).
   */
  checking?: { settled: number; accepted: number };
}

/** Runs one simulation; `traffic` must hold a trailer for each of `target.vins`, in order. */
export async function runSimulation(target: SimulationTarget, options: SimulationOptions, traffic: TrafficGenerator): Promise<RunRecord> {
  const definition = SCENARIO_DEFINITIONS[options.scenario];
  const products = Object.keys(definition.mix) as SimulatedProduct[];
  const defaults = {
    windowMarginMs: 100,
    heartbeatSlackMs: Math.max(1000, Math.round(target.heartbeatIntervalMs / 4)),
    liveMarginMs: 100,
    processingWaitMs: 30_000,
    slowReadMs: 200,
    maxInFlight: Infinity,
    alignToWindow: false,
    abortOnFail: false,
  };
  // An option given as undefined (a flag left out upstream) keeps its default.
  const settings = { ...defaults, ...Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)) } as typeof defaults & SimulationOptions;
  for (const product of products) {
    if (!target.partnerKeys[product]) throw new TypeError(`The ${options.scenario} scenario sends ${product}: give a partner key for it`);
    if (!target.limits[product]) throw new TypeError(`No intake limit known for ${product}`);
  }
  if (target.customers.length === 0 && options.subscribers + (options.sseSubscribers ?? 0) > 0) throw new TypeError('Subscribers need at least one customer key');
  if (target.customers.length === 0 && (options.webhooks?.endpoints ?? 0) > 0) throw new TypeError('Webhook endpoints need at least one customer key');

  const clientOf = (audience: 'partners' | 'customers', apiKey: string) =>
    new TrailwireClient({ baseUrl: target.baseUrl, authUrl: target.authUrl, audience, apiKey });
  const partners = new Map(products.map((product) => [product, clientOf('partners', target.partnerKeys[product]!)] as const));
  const customers = target.customers.map((customer) => clientOf('customers', customer.apiKey));
  options.onStage?.(`authenticating ${partners.size} partner${partners.size === 1 ? '' : 's'} and ${customers.length} customer${customers.length === 1 ? '' : 's'}`);
  await Promise.all([...partners.values(), ...customers].map((client) => client.accessToken()));

  // Subscribers first, so that they listen before the first payload is processed.
  let trafficRunning = false;
  let lastUpdateAt = 0;
  let liveUpdates = 0;
  const subscriberRecords: SubscriberRecord[] = [];
  const subscriptions: Array<{ pause(): void; resume(): void; close(): void }> = [];
  const sseSubscribers = options.sseSubscribers ?? 0;
  const allSubscribers = options.subscribers + sseSubscribers;
  // The gRPC subscribers first, then the SSE ones, each spread over the customers the same way.
  for (let index = 0; index < allSubscribers; index++) {
    const transport = index < options.subscribers ? 'grpc' : 'sse';
    const customer = index % target.customers.length;
    // One in four of each customer's subscribers reads slowly (its second, sixth...), so every
    // customer with a slow subscriber also has fast ones to compare; with too few, the last one.
    const round = Math.floor(index / target.customers.length);
    const slow = definition.slowSubscribers && (round % 4 === 1 || (allSubscribers <= target.customers.length && index === allSubscribers - 1));
    const record: SubscriberRecord = { index, transport, customer, slow, connections: [], updates: [] };
    subscriberRecords.push(record);
    const current = (): ConnectionRecord | undefined => record.connections.at(-1);
    const ended = (endCode: number) => {
      const connection = current();
      if (connection && connection.endedAt === undefined) {
        connection.endedAt = Date.now();
        connection.endCode = endCode;
      }
    };
    const handlers = {
      onConnecting: () => record.connections.push({ startedAt: Date.now(), heartbeats: [] }),
      onHeartbeat: () => current()?.heartbeats.push(Date.now()),
      onUpdate: (update: LiveUpdate) => {
        const now = Date.now();
        lastUpdateAt = now;
        liveUpdates++;
        record.updates.push({
          vin: update.trailer.vin ?? '',
          trailerId: update.trailer.id,
          fleetId: update.fleetId,
          ts: update.ts,
          receivedAt: now,
          connection: record.connections.length - 1,
        });
        if (slow && trafficRunning) {
          subscription.pause();
          setTimeout(() => subscription.resume(), settings.slowReadMs).unref();
        }
      },
      onGiveUp: (error: Error) => (record.gaveUp = error.message),
    };
    const subscription =
      transport === 'grpc'
        ? subscribeWithClient(customers[customer]!, { target: target.grpcTarget, reconnectBaseMs: 100, jitterMs: 100 }, { ...handlers, onDisconnect: (disconnect) => ended(disconnect.code) })
        : subscribeLiveEvents(
            { baseUrl: target.baseUrl, token: () => customers[customer]!.accessToken(), onTokenRejected: () => customers[customer]!.dropToken(), reconnectBaseMs: 100, jitterMs: 100 },
            { ...handlers, onDisconnect: (disconnect) => ended(grpcCodeOfHttpEnd(disconnect.status)) },
          );
    subscriptions.push(subscription);
  }
  let webhooks: WebhookEndpoints | undefined;
  try {
    return await drive();
  } finally {
    // Idempotent: after a normal end they are closed already; after a failure nothing keeps the process alive.
    for (const subscription of subscriptions) subscription.close();
    // After a failure, the endpoints registered so far are deleted all the same.
    await webhooks?.close();
  }

  async function drive(): Promise<RunRecord> {
    if (options.subscribers > 0) options.onStage?.(`opening ${options.subscribers} LiveFeed subscriber${options.subscribers === 1 ? '' : 's'} at ${target.grpcTarget}`);
    if (sseSubscribers > 0) options.onStage?.(`opening ${sseSubscribers} SSE subscriber${sseSubscribers === 1 ? '' : 's'} at ${target.baseUrl}/api/v1/live`);
    await waitFor(() => subscriberRecords.every((s) => s.connections.some((c) => c.heartbeats.length > 0) || s.gaveUp), 10_000);
    if (options.webhooks && options.webhooks.endpoints > 0)
      webhooks = await openWebhookEndpoints(customers, { ...options.webhooks, clockOffsetMs: target.clockOffsetMs, onStage: options.onStage });

    // The plan, started at a window boundary when asked (so a short run still has whole windows).
    let startAt = Math.max(Date.now() + 200, webhooks?.readyAt ?? 0);
    if (settings.alignToWindow) {
      const windowMs = Math.min(...products.map((product) => target.limits[product]!.windowSeconds * 1000));
      const serverStart = startAt + target.clockOffsetMs;
      startAt = Math.ceil(serverStart / windowMs) * windowMs - target.clockOffsetMs;
    }
    const { arrivals } = options;
    const plan = planSends({
      scenario: options.scenario,
      seed: options.seed,
      vins: target.vins.length,
      arrivals,
      startAt,
      limits: target.limits,
      marginMs: settings.windowMarginMs,
      clockOffsetMs: target.clockOffsetMs,
      reports: (product, vinIndex) => traffic.reports(product, vinIndex) && (!options.shard || vinIndex % options.shard.count === options.shard.index - 1),
    });

    const sends: SendRecord[] = [];
    const rotations: RotationRecord[] = [];
    const pendingRotations: Array<{ at: number; run: () => Promise<void> }> = [];
    if (definition.rotation) {
      const firstProduct = products[0]!;
      pendingRotations.push({
        at: startAt + arrivals.durationMs * definition.rotation.partnerAt,
        run: async () => {
          rotations.push(await rotatePartner(target, partners.get(firstProduct)!, firstProduct));
        },
      });
      if (customers.length > 0)
        pendingRotations.push({
          at: startAt + arrivals.durationMs * definition.rotation.customerAt,
          run: async () => {
            rotations.push(await rotateCustomer(target, customers[0]!, 0));
          },
        });
    }

    const meter = new ProgressMeter();
    options.onStage?.(
      `sending ${plan.sends.length} payloads for ${target.vins.length} trailer${target.vins.length === 1 ? '' : 's'} over ${Math.round(arrivals.durationMs / 1000)} s` +
        (startAt - Date.now() > 500 ? `, from the next window boundary in ${((startAt - Date.now()) / 1000).toFixed(1)} s` : ''),
    );
    await sleepUntil(startAt);
    trafficRunning = true;
    const progressTimer = options.onProgress
      ? setInterval(() => options.onProgress!(meter.snapshot(Date.now() - startAt, arrivals.durationMs, liveUpdates)), 500)
      : undefined;
    // The plan says when each request is due; only `maxInFlight` (when set) holds a due request
    // back, and its latency still counts from when it was due.
    const inFlight = new PQueue({ concurrency: settings.maxInFlight });
    let sendFailure: { error: unknown } | undefined;
    let aborted: RunRecord['aborted'];
    const rotationTasks: Array<Promise<void>> = [];
    let next = 0;
    const judgeTimer =
      settings.abortOnFail && settings.thresholds?.length
        ? setInterval(() => {
            if (aborted) return;
            const now = Date.now();
            // Handed to the queue but not started (the cap holds them): the queue runs them in plan order.
            const waitingDue = plan.sends.slice(sends.length, next).map((send) => send.at);
            const breached = judgeThresholds(settings.thresholds!, requestFigures(sends, arrivals, startAt, { now, waitingDue })).filter((result) => !result.passed);
            if (breached.length > 0) aborted = { at: now, breached: breached.map((result) => `${result.threshold} (${result.actual})`) };
          }, 500)
        : undefined;
    try {
      while ((next < plan.sends.length || pendingRotations.length > 0) && !aborted) {
        const now = Date.now();
        while (pendingRotations.length > 0 && pendingRotations[0]!.at <= now) rotationTasks.push(pendingRotations.shift()!.run());
        while (next < plan.sends.length && plan.sends[next]!.at <= now) {
          const planned = plan.sends[next++]!;
          inFlight.add(() => sendOne(planned, target, partners.get(planned.product)!, traffic, sends, meter)).catch((error: unknown) => (sendFailure ??= { error }));
        }
        const nextAt = Math.min(plan.sends[next]?.at ?? Infinity, pendingRotations[0]?.at ?? Infinity);
        if (nextAt > Date.now()) await sleep(Math.min(nextAt - Date.now(), 20));
      }
      // An aborted run sends nothing more: what the queue still holds is dropped, what is in flight answered.
      inFlight.clear();
      await Promise.all([inFlight.onIdle(), ...rotationTasks]);
      if (sendFailure) throw sendFailure.error;
    } finally {
      clearInterval(progressTimer);
      clearInterval(judgeTimer);
    }
    const trafficEndedAt = Date.now();
    trafficRunning = false;
    const trafficProgress = meter.snapshot(trafficEndedAt - startAt, arrivals.durationMs, liveUpdates);
    options.onProgress?.(trafficProgress);
    for (const subscription of subscriptions) subscription.resume();

    const checking = { settled: 0, accepted: 0 };
    const checkingTimer = options.onProgress ? setInterval(() => options.onProgress!({ ...trafficProgress, liveUpdates, checking: { ...checking } }), 500) : undefined;
    const outcomes = await readBackOutcomes(sends, partners, settings.processingWaitMs, checking).finally(() => clearInterval(checkingTimer));
    options.onProgress?.({ ...trafficProgress, liveUpdates, checking });
    // Processed payloads are published at once, but a loaded machine may take a while to carry
    // them: wait until every subscriber has the latest update of each of its customer's trailers
    // (coalescing never skips that one), or until the feed has been quiet for two seconds.
    const latest = latestUpdates(sends, outcomes, target.ownership);
    const caughtUp = () =>
      subscriberRecords.every((subscriber) => {
        if (subscriber.gaveUp) return true;
        const received = new Map<string, number>();
        for (const update of subscriber.updates) received.set(update.vin, Math.max(received.get(update.vin) ?? -Infinity, update.ts));
        return [...(latest.get(subscriber.customer) ?? new Map<string, number>())].every(([vin, ts]) => (received.get(vin) ?? -Infinity) >= ts);
      });
    // Webhook deliveries settle beside the live feed: every endpoint has its customer's updates, or they stopped coming.
    await Promise.all([
      waitFor(() => caughtUp() || Date.now() - lastUpdateAt >= 2_000, 15_000),
      webhooks?.settle(expectedUpdates({ sends, outcomes, ownership: target.ownership }), settings.processingWaitMs),
    ]);
    const webhookRecord = await webhooks?.close();

    const endedAt = Date.now();
    for (const [index, subscription] of subscriptions.entries()) {
      subscription.close();
      const connection = subscriberRecords[index]!.connections.at(-1);
      if (connection && connection.endedAt === undefined) {
        connection.endedAt = endedAt;
        connection.endCode = 1;
      }
    }
    return {
      scenario: options.scenario,
      mode: target.mode,
      seed: options.seed,
      limits: Object.fromEntries(products.map((product) => [product, target.limits[product]!])),
      groups: plan.groups,
      sends,
      outcomes,
      processingWaitMs: settings.processingWaitMs,
      customers: target.customers.map((customer) => ({ label: customer.label })),
      ownership: target.ownership,
      subscribers: subscriberRecords,
      heartbeatIntervalMs: target.heartbeatIntervalMs,
      heartbeatSlackMs: settings.heartbeatSlackMs,
      liveMarginMs: settings.liveMarginMs,
      clockOffsetMs: target.clockOffsetMs,
      rotations,
      ...(webhookRecord ? { webhooks: webhookRecord } : {}),
      ...(aborted ? { aborted } : {}),
      startedAt: startAt,
      trafficEndedAt,
      endedAt,
    };
  }
}

async function sendOne(
  planned: PlannedSend,
  target: SimulationTarget,
  client: TrailwireClient,
  traffic: TrafficGenerator,
  sends: SendRecord[],
  meter: ProgressMeter,
): Promise<void> {
  const vin = target.vins[planned.vinIndex]!;
  // Drawn in plan order (this runs synchronously up to the first await), so the seed decides the payload.
  const payload = traffic.payload(planned.product, planned.vinIndex, planned.at);
  const record: SendRecord = { product: planned.product, vin, group: planned.group, plannedAt: planned.at, sentAt: Date.now(), answeredAt: 0, status: 0 };
  sends.push(record);
  try {
    const response = await client.sendTelemetry(vin, payload, { noRetry: true });
    record.answeredAt = Date.now();
    record.status = response.status;
    const limit = Number(response.headers.get('ratelimit-limit'));
    if (response.headers.has('ratelimit-limit'))
      record.rateLimit = { limit, remaining: Number(response.headers.get('ratelimit-remaining')), reset: Number(response.headers.get('ratelimit-reset')) };
    const body = response.body as { id?: string; title?: string; detail?: string } | undefined;
    if (response.status === 202 && body?.id) record.id = body.id;
    else if (response.status !== 429 && body) record.error = [body.title, body.detail].filter(Boolean).join(': ');
  } catch (error) {
    record.answeredAt = Date.now();
    // fetch says only "fetch failed"; the cause says what failed (a refused connection, a timeout).
    const cause = (error as { cause?: { code?: string; message?: string } }).cause;
    record.error = `${(error as Error).message}${cause ? `: ${cause.code ?? cause.message}` : ''}`;
    // An error thrown with a status (authentication failing) is an answer, not a network failure.
    record.status = (error as { status?: number }).status ?? 0;
  }
  meter.add(record);
}

/** Rotates a partner key, then checks that its old token and old key are refused. */
async function rotatePartner(target: SimulationTarget, client: TrailwireClient, product: string): Promise<RotationRecord> {
  const oldToken = await client.accessToken();
  const oldKey = client.currentApiKey;
  let rotatedAt: number;
  try {
    await client.rotateKey();
    rotatedAt = Date.now();
  } catch (error) {
    return { audience: 'partners', subject: product, rotatedAt: Date.now(), error: (error as Error).message };
  }
  // The probe VIN is outside the plan, so a wrongly accepted probe cannot disturb a judged window;
  // the product's own example keeps the seeded traffic untouched by when the rotation happens.
  const payload = builtInProducts.find((candidate) => candidate.name === product)?.examples[0];
  const oldTokenStatus = await statusOf(fetch(`${target.baseUrl}/api/v1/telemetry/intake/${target.probeVin}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${oldToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(payload),
  }));
  const oldKeyStatus = await statusOf(fetch(`${target.authUrl ?? target.baseUrl}/api/v1/partners/authenticate`, { method: 'POST', headers: { 'x-api-key': oldKey } }));
  target.partnerKeys[product as SimulatedProduct] = client.currentApiKey;
  return { audience: 'partners', subject: product, rotatedAt, oldTokenStatus, oldKeyStatus };
}

/** Rotates a customer key (its streams end; the subscribers reconnect with the new key). */
async function rotateCustomer(target: SimulationTarget, client: TrailwireClient, customer: number): Promise<RotationRecord> {
  const label = target.customers[customer]!.label;
  const oldToken = await client.accessToken();
  const oldKey = client.currentApiKey;
  let rotatedAt: number;
  try {
    await client.rotateKey();
    rotatedAt = Date.now();
  } catch (error) {
    return { audience: 'customers', subject: label, customer, rotatedAt: Date.now(), error: (error as Error).message };
  }
  const oldTokenStatus = await statusOf(fetch(`${target.baseUrl}/api/v1/fleets?take=1`, { headers: { authorization: `Bearer ${oldToken}` } }));
  const oldKeyStatus = await statusOf(fetch(`${target.authUrl ?? target.baseUrl}/api/v1/customers/authenticate`, { method: 'POST', headers: { 'x-api-key': oldKey } }));
  target.customers[customer]!.apiKey = client.currentApiKey;
  return { audience: 'customers', subject: label, customer, rotatedAt, oldTokenStatus, oldKeyStatus };
}

async function statusOf(response: Promise<Response>): Promise<number | undefined> {
  try {
    const answered = await response;
    await answered.arrayBuffer();
    return answered.status;
  } catch {
    return undefined;
  }
}

/** Per customer, the processing time of the newest processed payload of each of its VINs. */
function latestUpdates(sends: readonly SendRecord[], outcomes: Record<string, IntakeOutcome>, ownership: Record<string, number>): Map<number, Map<string, number>> {
  const latest = new Map<number, Map<string, number>>();
  for (const send of sends) {
    const processedAt = send.id ? outcomes[send.id]?.processedAt : undefined;
    const customer = ownership[send.vin];
    if (processedAt === undefined || customer === undefined) continue;
    const ofCustomer = latest.get(customer) ?? new Map<string, number>();
    ofCustomer.set(send.vin, Math.max(ofCustomer.get(send.vin) ?? -Infinity, processedAt));
    latest.set(customer, ofCustomer);
  }
  return latest;
}

/** Counters and recent latencies for the progress line. */
class ProgressMeter {
  private sent = 0;
  private accepted = 0;
  private limited = 0;
  private clientErrors = 0;
  private serverErrors = 0;
  private readonly recentLatencies: number[] = [];
  private readonly recentAnswers: number[] = [];

  add(record: SendRecord): void {
    this.sent++;
    if (record.status === 202) this.accepted++;
    else if (record.status === 429) this.limited++;
    else if (record.status >= 500 || record.status === 0) this.serverErrors++;
    else this.clientErrors++;
    // From when it was due (no coordinated omission), as the report counts it.
    this.recentLatencies.push(record.answeredAt - record.plannedAt);
    if (this.recentLatencies.length > 2000) this.recentLatencies.splice(0, 1000);
    this.recentAnswers.push(record.answeredAt);
  }

  snapshot(elapsedMs: number, durationMs: number, liveUpdates: number): SimulationProgress {
    const now = Date.now();
    while (this.recentAnswers.length > 0 && this.recentAnswers[0]! < now - 1000) this.recentAnswers.shift();
    const sorted = [...this.recentLatencies].sort((a, b) => a - b);
    return {
      elapsedMs,
      durationMs,
      sent: this.sent,
      rate: this.recentAnswers.length,
      accepted: this.accepted,
      limited: this.limited,
      clientErrors: this.clientErrors,
      serverErrors: this.serverErrors,
      p50Ms: quantile(sorted, 0.5),
      p99Ms: quantile(sorted, 0.99),
      liveUpdates,
    };
  }
}

/**
 * The record keeps the LiveFeed's status codes for every transport, so that the checks (a rotated
 * customer's streams end UNAUTHENTICATED) read one vocabulary: an SSE stream that ended with 401
 * is UNAUTHENTICATED (16), with 503 UNAVAILABLE (14), with 429 RESOURCE_EXHAUSTED (8), with 403
 * PERMISSION_DENIED (7); one that broke or ended without a word, UNKNOWN (2).
 */
function grpcCodeOfHttpEnd(status: number): number {
  return ({ 401: 16, 403: 7, 429: 8, 503: 14 } as Record<number, number>)[status] ?? 2;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

async function sleepUntil(at: number): Promise<void> {
  while (Date.now() < at) await sleep(Math.min(at - Date.now(), 50));
}

async function waitFor(predicate: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!predicate() && Date.now() < deadline) await sleep(20);
}
