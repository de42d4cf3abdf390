/**
 * The PostgreSQL store's webhook tables (`WebhookStore`, contract 14): endpoints, the outbox the
 * telemetry write fills (`writeOutbox`, one set-based statement inside that write's transaction),
 * and deliveries. Several processes share them: an endpoint is leased with `FOR UPDATE SKIP LOCKED`
 * and a lease time, so each delivery is sent by one process, and a process that dies lets its
 * leases lapse for another to take over.
 */
import type pg from 'pg';
import type { Clock } from '../../core/clock.ts';
import type {
  IdPageQuery,
  NewWebhookEndpoint,
  WebhookAttemptOutcome,
  WebhookBatching,
  WebhookDelivery,
  WebhookEndpoint,
  WebhookSend,
  WebhookStore,
  WebhookTarget,
} from '../../core/store.ts';
import { webhookBody, type WebhookOutboxEvent } from '../../core/webhook-events.ts';
import {
  delimited,
  delimitedNeedle,
  toWebhookDelivery,
  toWebhookEndpoint,
  toWebhookSend,
  WEBHOOK_DELIVERY_COLUMNS,
  WEBHOOK_ENDPOINT_COLUMNS,
  type WebhookDeliveryRow,
  type WebhookEndpointRow,
  type WebhookSendRow,
} from '../sql/webhook-rows.ts';
import { type Queryable, queryRow, queryRows, queryRun, quoteSchema, type Statement, withTransaction, writeOrExplain } from './pool.ts';

/** The store's migration that makes these tables (see the SQLite store's of the same name). */
export const POSTGRES_WEBHOOK_TABLES_MIGRATION = {
  name: '0005_webhooks',
  up: `
    CREATE TABLE webhook_endpoints (
      id            TEXT COLLATE "C" PRIMARY KEY,
      customer_id   TEXT COLLATE "C" NOT NULL REFERENCES customers (id),
      url           TEXT NOT NULL,
      events        TEXT NOT NULL,
      fleet_ids     TEXT,
      secret        TEXT NOT NULL,
      status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'failing')),
      failing_since BIGINT,
      created_at    BIGINT NOT NULL,
      lease_owner   TEXT,
      lease_until   BIGINT,
      claimed_at    BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX webhook_endpoints_by_customer ON webhook_endpoints (customer_id, id);

    CREATE TABLE webhook_outbox (
      seq         BIGSERIAL PRIMARY KEY,
      endpoint_id TEXT COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      event       TEXT NOT NULL,
      created_at  BIGINT NOT NULL
    );
    CREATE INDEX webhook_outbox_by_endpoint ON webhook_outbox (endpoint_id, seq);

    CREATE TABLE webhook_deliveries (
      id              TEXT COLLATE "C" PRIMARY KEY,
      endpoint_id     TEXT COLLATE "C" NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      body            TEXT,
      event_count     INTEGER NOT NULL,
      state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered')),
      attempts        INTEGER NOT NULL DEFAULT 0,
      next_attempt_at BIGINT,
      retry_from      BIGINT NOT NULL,
      last_attempt_at BIGINT,
      last_status     INTEGER,
      last_error      TEXT,
      delivered_at    BIGINT,
      created_at      BIGINT NOT NULL
    );
    CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id);
    CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, id) WHERE state = 'pending';
    CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (delivered_at) WHERE state = 'delivered';
  `,
};

interface TargetRow {
  id: string;
  customer_id: string;
  url: string;
  secret: string;
}

const toTarget = (row: TargetRow): WebhookTarget => ({ id: row.id, customerId: row.customer_id, url: row.url, secret: row.secret });

/**
 * How long a process trusts what it read of whether any endpoint exists: a write makes no webhook
 * events (no JSON built, no outbox statement) while none does, and an endpoint registered through
 * another process is written to from at most this long after.
 */
export const ENDPOINTS_RECHECK_MS = 1000;

/** The webhook half of the PostgreSQL store. */
export class PostgresWebhookTables implements WebhookStore {
  private readonly sql;
  private anyEndpointSeen: { value: boolean; at: number } | undefined;

  constructor(
    private readonly pool: pg.Pool,
    schema: string,
    private readonly clock: Clock,
  ) {
    this.sql = webhookStatements(schema);
  }

  /** Whether any endpoint exists, as read at most `ENDPOINTS_RECHECK_MS` ago (at once after this process registers one). */
  async anyEndpoint(on: Queryable): Promise<boolean> {
    const now = this.clock.now();
    if (this.anyEndpointSeen === undefined || now - this.anyEndpointSeen.at >= ENDPOINTS_RECHECK_MS) {
      const value = (await queryRow(on, this.sql.anyEndpoint, [])) !== undefined;
      this.anyEndpointSeen = { value, at: now };
    }
    return this.anyEndpointSeen.value;
  }

  /** Puts each event in the outbox of every endpoint that asks for it, on `client`, inside the caller's transaction. */
  async writeOutbox(client: Queryable, events: readonly WebhookOutboxEvent[], at: number): Promise<void> {
    if (events.length === 0) return;
    await queryRun(client, this.sql.insertEvents, [
      events.map((event) => event.json),
      at,
      events.map((event) => event.customerId),
      events.map((event) => delimitedNeedle(event.type)),
      events.map((event) => delimitedNeedle(event.fleetId)),
    ]);
  }

  async createWebhookEndpoint(input: NewWebhookEndpoint, cap: number): Promise<WebhookEndpoint | null> {
    const row = await withTransaction(this.pool, async (client) => {
      // The customer's row is the lock that makes the count and the insert one step.
      await queryRun(client, this.sql.lockCustomer, [input.customerId]);
      const count = (await queryRow<{ n: number }>(client, this.sql.countByCustomer, [input.customerId]))!.n;
      if (count >= cap) return null;
      const values = [input.id, input.customerId, input.url, delimited(input.events), input.fleetIds === null ? null : delimited(input.fleetIds), input.secret, input.createdAt];
      return writeOrExplain(() => queryRow<WebhookEndpointRow>(client, this.sql.insertEndpoint, values), { missing: `no customer ${input.customerId}` });
    });
    if (row) this.anyEndpointSeen = { value: true, at: this.clock.now() };
    return row ? toWebhookEndpoint(row) : null;
  }

  async listWebhookEndpoints(customerId: string, page: IdPageQuery): Promise<WebhookEndpoint[]> {
    return (await queryRows<WebhookEndpointRow>(this.pool, this.sql.endpointsPage, [customerId, page.afterId ?? '', page.limit])).map(toWebhookEndpoint);
  }

  async getWebhookEndpoint(customerId: string, endpointId: string): Promise<WebhookEndpoint | null> {
    const row = await queryRow<WebhookEndpointRow>(this.pool, this.sql.endpoint, [customerId, endpointId]);
    return row ? toWebhookEndpoint(row) : null;
  }

  async getWebhookTarget(customerId: string, endpointId: string): Promise<WebhookTarget | null> {
    const row = await queryRow<TargetRow>(this.pool, this.sql.target, [customerId, endpointId]);
    return row ? toTarget(row) : null;
  }

  async deleteWebhookEndpoint(customerId: string, endpointId: string): Promise<boolean> {
    return (await queryRun(this.pool, this.sql.deleteEndpoint, [customerId, endpointId])) > 0;
  }

  async listWebhookDeliveries(customerId: string, endpointId: string, page: IdPageQuery): Promise<WebhookDelivery[]> {
    return (await queryRows<WebhookDeliveryRow>(this.pool, this.sql.deliveriesPage, [endpointId, customerId, page.afterId ?? '', page.limit])).map(toWebhookDelivery);
  }

  async resumeWebhookEndpoint(customerId: string, endpointId: string, at: number): Promise<WebhookEndpoint | null> {
    const row = await withTransaction(this.pool, async (client) => {
      const resumed = await queryRow<WebhookEndpointRow>(client, this.sql.resume, [customerId, endpointId]);
      if (resumed) await queryRun(client, this.sql.pendingDueNow, [at, endpointId]);
      return resumed;
    });
    return row ? toWebhookEndpoint(row) : null;
  }

  async claimWebhookEndpoints(owner: string, now: number, leaseMs: number, limit: number, batching: Omit<WebhookBatching, 'newId'>): Promise<WebhookTarget[]> {
    const rows = await queryRows<TargetRow>(this.pool, this.sql.claim, [owner, now, now + leaseMs, now - batching.lingerMs, batching.maxEvents - 1, limit]);
    return rows.map(toTarget);
  }

  async takeWebhookDelivery(endpointId: string, now: number, batching: WebhookBatching): Promise<WebhookSend | null> {
    const row = await withTransaction(this.pool, async (client): Promise<WebhookSendRow | null> => {
      const pending = await queryRow<WebhookSendRow>(client, this.sql.pendingDelivery, [endpointId]);
      if (pending) return pending.next_attempt_at !== null && pending.next_attempt_at <= now ? pending : null;
      const events = await queryRows<{ seq: number; event: string; created_at: number }>(client, this.sql.oldestEvents, [endpointId, batching.maxEvents]);
      if (events.length === 0 || (events.length < batching.maxEvents && events[0]!.created_at > now - batching.lingerMs)) return null;
      const formed = { id: batching.newId(), body: webhookBody(events.map((event) => event.event)), event_count: events.length, attempts: 0, retry_from: now, next_attempt_at: now };
      await queryRun(client, this.sql.insertDelivery, [formed.id, endpointId, formed.body, formed.event_count, now]);
      await queryRun(client, this.sql.deleteEventsThrough, [endpointId, events[events.length - 1]!.seq]);
      return formed;
    });
    return row ? toWebhookSend(row) : null;
  }

  async settleWebhookDelivery(endpointId: string, deliveryId: string, outcome: WebhookAttemptOutcome): Promise<void> {
    if (outcome.kind === 'delivered') {
      await queryRun(this.pool, this.sql.markDelivered, [outcome.at, outcome.status, deliveryId]);
      return;
    }
    await withTransaction(this.pool, async (client) => {
      await queryRun(client, this.sql.markAttemptFailed, [outcome.at, outcome.status, outcome.error, outcome.kind === 'retry' ? outcome.nextAttemptAt : null, deliveryId]);
      if (outcome.kind === 'failing') await queryRun(client, this.sql.markFailing, [outcome.at, endpointId]);
    });
  }

  async releaseWebhookEndpoint(endpointId: string, owner: string): Promise<void> {
    await queryRun(this.pool, this.sql.release, [endpointId, owner]);
  }

  async purgeWebhookDeliveries(before: number, limit: number): Promise<number> {
    return queryRun(this.pool, this.sql.purgeDelivered, [before, limit]);
  }
}

function webhookStatements(schema: string) {
  const s = quoteSchema(schema);
  const statements = {
    insertEvents: `INSERT INTO ${s}.webhook_outbox (endpoint_id, event, created_at)
      SELECT e.id, v.event, $2 FROM unnest($1::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS v (event, customer_id, type_needle, fleet_needle, position)
      JOIN ${s}.webhook_endpoints e ON e.customer_id = v.customer_id AND position(v.type_needle in e.events) > 0
        AND (e.fleet_ids IS NULL OR position(v.fleet_needle in e.fleet_ids) > 0)
      ORDER BY v.position, e.id`,
    anyEndpoint: `SELECT 1 FROM ${s}.webhook_endpoints LIMIT 1`,
    lockCustomer: `SELECT 1 FROM ${s}.customers WHERE id = $1 FOR UPDATE`,
    countByCustomer: `SELECT count(*)::integer AS n FROM ${s}.webhook_endpoints WHERE customer_id = $1`,
    insertEndpoint: `INSERT INTO ${s}.webhook_endpoints (id, customer_id, url, events, fleet_ids, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
      RETURNING ${WEBHOOK_ENDPOINT_COLUMNS}`,
    endpointsPage: `SELECT ${WEBHOOK_ENDPOINT_COLUMNS} FROM ${s}.webhook_endpoints WHERE customer_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
    endpoint: `SELECT ${WEBHOOK_ENDPOINT_COLUMNS} FROM ${s}.webhook_endpoints WHERE customer_id = $1 AND id = $2`,
    target: `SELECT id, customer_id, url, secret FROM ${s}.webhook_endpoints WHERE customer_id = $1 AND id = $2`,
    deleteEndpoint: `DELETE FROM ${s}.webhook_endpoints WHERE customer_id = $1 AND id = $2`,
    deliveriesPage: `SELECT ${WEBHOOK_DELIVERY_COLUMNS} FROM ${s}.webhook_deliveries d
      WHERE d.endpoint_id = $1 AND EXISTS (SELECT 1 FROM ${s}.webhook_endpoints e WHERE e.id = $1 AND e.customer_id = $2) AND d.id > $3
      ORDER BY d.id LIMIT $4`,
    resume: `UPDATE ${s}.webhook_endpoints SET status = 'active', failing_since = NULL WHERE customer_id = $1 AND id = $2 RETURNING ${WEBHOOK_ENDPOINT_COLUMNS}`,
    pendingDueNow: `UPDATE ${s}.webhook_deliveries SET next_attempt_at = $1, retry_from = $1 WHERE endpoint_id = $2 AND state = 'pending'`,
    // As the SQLite store's `claimable`; SKIP LOCKED lets two processes claiming at once take different endpoints.
    claim: `UPDATE ${s}.webhook_endpoints e SET lease_owner = $1, lease_until = $3, claimed_at = $2
      WHERE e.id IN (
        SELECT c.id FROM ${s}.webhook_endpoints c
        WHERE c.status = 'active' AND (c.lease_until IS NULL OR c.lease_until <= $2)
          AND CASE WHEN EXISTS (SELECT 1 FROM ${s}.webhook_deliveries d WHERE d.endpoint_id = c.id AND d.state = 'pending')
            THEN EXISTS (SELECT 1 FROM ${s}.webhook_deliveries d WHERE d.endpoint_id = c.id AND d.state = 'pending' AND d.next_attempt_at <= $2)
            ELSE (SELECT o.created_at FROM ${s}.webhook_outbox o WHERE o.endpoint_id = c.id ORDER BY o.seq LIMIT 1) <= $4
              OR EXISTS (SELECT 1 FROM ${s}.webhook_outbox o WHERE o.endpoint_id = c.id ORDER BY o.seq LIMIT 1 OFFSET $5)
          END
        ORDER BY c.claimed_at LIMIT $6 FOR UPDATE SKIP LOCKED)
        AND (e.lease_until IS NULL OR e.lease_until <= $2)
      RETURNING e.id, e.customer_id, e.url, e.secret`,
    release: `UPDATE ${s}.webhook_endpoints SET lease_owner = NULL, lease_until = NULL WHERE id = $1 AND lease_owner = $2`,
    pendingDelivery: `SELECT id, body, event_count, attempts, retry_from, next_attempt_at FROM ${s}.webhook_deliveries
      WHERE endpoint_id = $1 AND state = 'pending' ORDER BY id LIMIT 1`,
    oldestEvents: `SELECT seq, event, created_at FROM ${s}.webhook_outbox WHERE endpoint_id = $1 ORDER BY seq LIMIT $2`,
    insertDelivery: `INSERT INTO ${s}.webhook_deliveries (id, endpoint_id, body, event_count, state, attempts, next_attempt_at, retry_from, created_at)
      VALUES ($1, $2, $3, $4, 'pending', 0, $5, $5, $5)`,
    deleteEventsThrough: `DELETE FROM ${s}.webhook_outbox WHERE endpoint_id = $1 AND seq <= $2`,
    markDelivered: `UPDATE ${s}.webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_attempt_at = $1, last_status = $2,
      last_error = NULL, delivered_at = $1, next_attempt_at = NULL, body = NULL WHERE id = $3`,
    markAttemptFailed: `UPDATE ${s}.webhook_deliveries SET attempts = attempts + 1, last_attempt_at = $1, last_status = $2, last_error = $3, next_attempt_at = $4 WHERE id = $5`,
    markFailing: `UPDATE ${s}.webhook_endpoints SET status = 'failing', failing_since = $1 WHERE id = $2`,
    purgeDelivered: `DELETE FROM ${s}.webhook_deliveries WHERE id IN (
      SELECT id FROM ${s}.webhook_deliveries WHERE state = 'delivered' AND delivered_at < $1 LIMIT $2)`,
  };
  return Object.fromEntries(Object.entries(statements).map(([key, text]) => [key, { name: `trailwire_webhook_${key}`, text }])) as Record<
    keyof typeof statements,
    Statement
  >;
}
