/**
 * The SQLite store's webhook tables (`WebhookStore`, contract 14): endpoints, the outbox the
 * telemetry write fills (`writeOutbox`, called inside that write's transaction), and deliveries. The
 * deliverer's steps (claim, take, settle, release) are each one immediate transaction, so several
 * processes sharing the file never lease one endpoint twice. They take the write lock the processing
 * thread's batches take, so a server with a processing thread runs them on the thread's connection,
 * between its batches (`webhook-delivery-calls.ts`); on the serving thread's connection each would
 * wait in SQLite's busy handler, blocking that thread, for the batch in hand to commit.
 */
import type Database from 'better-sqlite3';
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
import type { WebhookOutboxEvent } from '../../core/webhook-events.ts';
import { webhookBody } from '../../core/webhook-events.ts';
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

/** The store's migration that makes these tables. */
export const WEBHOOK_TABLES_MIGRATION = {
  name: '0006_webhooks',
  up: `
    CREATE TABLE webhook_endpoints (
      id            TEXT PRIMARY KEY,
      customer_id   TEXT NOT NULL REFERENCES customers (id),
      url           TEXT NOT NULL,
      events        TEXT NOT NULL,
      fleet_ids     TEXT,
      secret        TEXT NOT NULL,
      status        TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'failing')),
      failing_since INTEGER,
      created_at    INTEGER NOT NULL,
      lease_owner   TEXT,
      lease_until   INTEGER,
      claimed_at    INTEGER NOT NULL DEFAULT 0
    ) STRICT;
    CREATE INDEX webhook_endpoints_by_customer ON webhook_endpoints (customer_id, id);

    CREATE TABLE webhook_outbox (
      seq         INTEGER PRIMARY KEY,
      endpoint_id TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      event       TEXT NOT NULL,
      created_at  INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX webhook_outbox_by_endpoint ON webhook_outbox (endpoint_id, seq);

    CREATE TABLE webhook_deliveries (
      id              TEXT PRIMARY KEY,
      endpoint_id     TEXT NOT NULL REFERENCES webhook_endpoints (id) ON DELETE CASCADE,
      body            TEXT,
      event_count     INTEGER NOT NULL,
      state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered')),
      attempts        INTEGER NOT NULL DEFAULT 0,
      next_attempt_at INTEGER,
      retry_from      INTEGER NOT NULL,
      last_attempt_at INTEGER,
      last_status     INTEGER,
      last_error      TEXT,
      delivered_at    INTEGER,
      created_at      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id);
    CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, id) WHERE state = 'pending';
    CREATE INDEX webhook_deliveries_delivered ON webhook_deliveries (delivered_at) WHERE state = 'delivered';
  `,
};

/** The webhook half of the SQLite store, on the store's connection. */
export class SqliteWebhookTables implements WebhookStore {
  private readonly sql;
  private readonly createTransaction;
  private readonly claimTransaction;
  private readonly takeTransaction;
  private readonly settleTransaction;
  private readonly resumeTransaction;

  constructor(db: Database.Database) {
    this.sql = prepareWebhookStatements(db);
    this.createTransaction = db.transaction((input: NewWebhookEndpoint, cap: number) => {
      if (this.sql.countByCustomer.pluck().get(input.customerId)! >= cap) return null;
      return this.sql.insertEndpoint.get(
        input.id,
        input.customerId,
        input.url,
        delimited(input.events),
        input.fleetIds === null ? null : delimited(input.fleetIds),
        input.secret,
        input.createdAt,
      )!;
    });
    this.claimTransaction = db.transaction((owner: string, now: number, leaseMs: number, limit: number, batching: Omit<WebhookBatching, 'newId'>) => {
      const targets = this.sql.claimable.all({ now, lingerBefore: now - batching.lingerMs, fullOffset: batching.maxEvents - 1, limit });
      for (const target of targets) this.sql.lease.run(owner, now + leaseMs, now, target.id);
      return targets;
    });
    this.takeTransaction = db.transaction((endpointId: string, now: number, batching: WebhookBatching): WebhookSendRow | null => {
      const pending = this.sql.pendingDelivery.get(endpointId);
      if (pending) return pending.next_attempt_at !== null && pending.next_attempt_at <= now ? pending : null;
      const events = this.sql.oldestEvents.all(endpointId, batching.maxEvents);
      if (events.length === 0 || (events.length < batching.maxEvents && events[0]!.created_at > now - batching.lingerMs)) return null;
      const row = { id: batching.newId(), body: webhookBody(events.map((event) => event.event)), event_count: events.length, attempts: 0, retry_from: now, next_attempt_at: now };
      this.sql.insertDelivery.run(row.id, endpointId, row.body, row.event_count, now, now, now);
      this.sql.deleteEventsThrough.run(endpointId, events[events.length - 1]!.seq);
      return row;
    });
    this.settleTransaction = db.transaction((endpointId: string, deliveryId: string, outcome: WebhookAttemptOutcome) => {
      if (outcome.kind === 'delivered') this.sql.markDelivered.run(outcome.at, outcome.status, outcome.at, deliveryId);
      else {
        this.sql.markAttemptFailed.run(outcome.at, outcome.status, outcome.error, outcome.kind === 'retry' ? outcome.nextAttemptAt : null, deliveryId);
        if (outcome.kind === 'failing') this.sql.markFailing.run(outcome.at, endpointId);
      }
    });
    this.resumeTransaction = db.transaction((customerId: string, endpointId: string, at: number) => {
      const row = this.sql.resume.get(customerId, endpointId);
      if (row) this.sql.pendingDueNow.run(at, at, endpointId);
      return row;
    });
  }

  /** Whether any endpoint exists: a write without makes no events. */
  anyEndpoint(): boolean {
    return this.sql.anyEndpoint.get() !== undefined;
  }

  /** Puts each event in the outbox of every endpoint that asks for it; inside the caller's transaction. */
  writeOutbox(events: readonly WebhookOutboxEvent[], at: number): void {
    if (events.length === 0) return;
    for (const event of events) this.sql.insertEvent.run(event.json, at, event.customerId, delimitedNeedle(event.type), delimitedNeedle(event.fleetId));
  }

  async createWebhookEndpoint(input: NewWebhookEndpoint, cap: number): Promise<WebhookEndpoint | null> {
    const row = this.createTransaction.immediate(input, cap);
    return row === null ? null : toWebhookEndpoint(row);
  }

  async listWebhookEndpoints(customerId: string, page: IdPageQuery): Promise<WebhookEndpoint[]> {
    return this.sql.endpointsPage.all(customerId, page.afterId ?? '', page.limit).map(toWebhookEndpoint);
  }

  async getWebhookEndpoint(customerId: string, endpointId: string): Promise<WebhookEndpoint | null> {
    const row = this.sql.endpoint.get(customerId, endpointId);
    return row ? toWebhookEndpoint(row) : null;
  }

  async getWebhookTarget(customerId: string, endpointId: string): Promise<WebhookTarget | null> {
    const row = this.sql.target.get(customerId, endpointId);
    return row ? { id: row.id, customerId: row.customer_id, url: row.url, secret: row.secret } : null;
  }

  async deleteWebhookEndpoint(customerId: string, endpointId: string): Promise<boolean> {
    return this.sql.deleteEndpoint.run(customerId, endpointId).changes > 0;
  }

  async listWebhookDeliveries(customerId: string, endpointId: string, page: IdPageQuery): Promise<WebhookDelivery[]> {
    return this.sql.deliveriesPage.all(endpointId, customerId, page.afterId ?? '', page.limit).map(toWebhookDelivery);
  }

  async resumeWebhookEndpoint(customerId: string, endpointId: string, at: number): Promise<WebhookEndpoint | null> {
    const row = this.resumeTransaction.immediate(customerId, endpointId, at);
    return row ? toWebhookEndpoint(row) : null;
  }

  async claimWebhookEndpoints(owner: string, now: number, leaseMs: number, limit: number, batching: Omit<WebhookBatching, 'newId'>): Promise<WebhookTarget[]> {
    // Looked for first without a transaction: when nothing is due (an idle deliverer asks at each poll
    // and each processing round), a read takes no write lock and writes nothing.
    if (this.sql.claimable.all({ now, lingerBefore: now - batching.lingerMs, fullOffset: batching.maxEvents - 1, limit: 1 }).length === 0) return [];
    return this.claimTransaction.immediate(owner, now, leaseMs, limit, batching).map((row) => ({ id: row.id, customerId: row.customer_id, url: row.url, secret: row.secret }));
  }

  async takeWebhookDelivery(endpointId: string, now: number, batching: WebhookBatching): Promise<WebhookSend | null> {
    const row = this.takeTransaction.immediate(endpointId, now, batching);
    return row ? toWebhookSend(row) : null;
  }

  async settleWebhookDelivery(endpointId: string, deliveryId: string, outcome: WebhookAttemptOutcome): Promise<void> {
    this.settleTransaction.immediate(endpointId, deliveryId, outcome);
  }

  async releaseWebhookEndpoint(endpointId: string, owner: string): Promise<void> {
    this.sql.release.run(endpointId, owner);
  }

  async purgeWebhookDeliveries(before: number, limit: number): Promise<number> {
    return this.sql.purgeDelivered.run(before, limit).changes;
  }
}

interface TargetRow {
  id: string;
  customer_id: string;
  url: string;
  secret: string;
}

function prepareWebhookStatements(db: Database.Database) {
  return {
    anyEndpoint: db.prepare<[], { one: number }>('SELECT 1 AS one FROM webhook_endpoints LIMIT 1'),
    insertEvent: db.prepare<[string, number, string, string, string]>(
      `INSERT INTO webhook_outbox (endpoint_id, event, created_at)
       SELECT e.id, ?, ? FROM webhook_endpoints e INDEXED BY webhook_endpoints_by_customer
       WHERE e.customer_id = ? AND instr(e.events, ?) > 0 AND (e.fleet_ids IS NULL OR instr(e.fleet_ids, ?) > 0)
       ORDER BY e.id`,
    ),
    countByCustomer: db.prepare<[string], number>('SELECT count(*) FROM webhook_endpoints WHERE customer_id = ?'),
    insertEndpoint: db.prepare<[string, string, string, string, string | null, string, number], WebhookEndpointRow>(
      `INSERT INTO webhook_endpoints (id, customer_id, url, events, fleet_ids, secret, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       RETURNING ${WEBHOOK_ENDPOINT_COLUMNS}`,
    ),
    endpointsPage: db.prepare<[string, string, number], WebhookEndpointRow>(
      `SELECT ${WEBHOOK_ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE customer_id = ? AND id > ? ORDER BY id LIMIT ?`,
    ),
    endpoint: db.prepare<[string, string], WebhookEndpointRow>(`SELECT ${WEBHOOK_ENDPOINT_COLUMNS} FROM webhook_endpoints WHERE customer_id = ? AND id = ?`),
    target: db.prepare<[string, string], TargetRow>('SELECT id, customer_id, url, secret FROM webhook_endpoints WHERE customer_id = ? AND id = ?'),
    deleteEndpoint: db.prepare<[string, string]>('DELETE FROM webhook_endpoints WHERE customer_id = ? AND id = ?'),
    deliveriesPage: db.prepare<[string, string, string, number], WebhookDeliveryRow>(
      `SELECT ${WEBHOOK_DELIVERY_COLUMNS} FROM webhook_deliveries d
       WHERE d.endpoint_id = ? AND EXISTS (SELECT 1 FROM webhook_endpoints e WHERE e.id = d.endpoint_id AND e.customer_id = ?) AND d.id > ?
       ORDER BY d.id LIMIT ?`,
    ),
    resume: db.prepare<[string, string], WebhookEndpointRow>(
      `UPDATE webhook_endpoints SET status = 'active', failing_since = NULL WHERE customer_id = ? AND id = ? RETURNING ${WEBHOOK_ENDPOINT_COLUMNS}`,
    ),
    pendingDueNow: db.prepare<[number, number, string]>(
      `UPDATE webhook_deliveries SET next_attempt_at = ?, retry_from = ? WHERE endpoint_id = ? AND state = 'pending'`,
    ),
    // Due work: the pending delivery when it is due; without one, outbox events that fill a
    // delivery or whose oldest has waited long enough. The least recently leased first.
    claimable: db.prepare<[{ now: number; lingerBefore: number; fullOffset: number; limit: number }], TargetRow>(
      `SELECT e.id, e.customer_id, e.url, e.secret FROM webhook_endpoints e
       WHERE e.status = 'active' AND (e.lease_until IS NULL OR e.lease_until <= @now)
         AND CASE WHEN EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending')
           THEN EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.endpoint_id = e.id AND d.state = 'pending' AND d.next_attempt_at <= @now)
           ELSE (SELECT o.created_at FROM webhook_outbox o WHERE o.endpoint_id = e.id ORDER BY o.seq LIMIT 1) <= @lingerBefore
             OR EXISTS (SELECT 1 FROM webhook_outbox o WHERE o.endpoint_id = e.id ORDER BY o.seq LIMIT 1 OFFSET @fullOffset)
         END
       ORDER BY e.claimed_at LIMIT @limit`,
    ),
    lease: db.prepare<[string, number, number, string]>('UPDATE webhook_endpoints SET lease_owner = ?, lease_until = ?, claimed_at = ? WHERE id = ?'),
    release: db.prepare<[string, string]>('UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?'),
    pendingDelivery: db.prepare<[string], WebhookSendRow>(
      `SELECT id, body, event_count, attempts, retry_from, next_attempt_at FROM webhook_deliveries
       WHERE endpoint_id = ? AND state = 'pending' ORDER BY id LIMIT 1`,
    ),
    oldestEvents: db.prepare<[string, number], { seq: number; event: string; created_at: number }>(
      'SELECT seq, event, created_at FROM webhook_outbox WHERE endpoint_id = ? ORDER BY seq LIMIT ?',
    ),
    insertDelivery: db.prepare<[string, string, string, number, number, number, number]>(
      `INSERT INTO webhook_deliveries (id, endpoint_id, body, event_count, state, attempts, next_attempt_at, retry_from, created_at)
       VALUES (?, ?, ?, ?, 'pending', 0, ?, ?, ?)`,
    ),
    deleteEventsThrough: db.prepare<[string, number]>('DELETE FROM webhook_outbox WHERE endpoint_id = ? AND seq <= ?'),
    // A delivered body is not needed again: only its record stays listed.
    markDelivered: db.prepare<[number, number, number, string]>(
      `UPDATE webhook_deliveries SET state = 'delivered', attempts = attempts + 1, last_attempt_at = ?, last_status = ?,
         last_error = NULL, delivered_at = ?, next_attempt_at = NULL, body = NULL WHERE id = ?`,
    ),
    markAttemptFailed: db.prepare<[number, number | null, string, number | null, string]>(
      `UPDATE webhook_deliveries SET attempts = attempts + 1, last_attempt_at = ?, last_status = ?, last_error = ?, next_attempt_at = ? WHERE id = ?`,
    ),
    markFailing: db.prepare<[number, string]>(`UPDATE webhook_endpoints SET status = 'failing', failing_since = ? WHERE id = ?`),
    purgeDelivered: db.prepare<[number, number]>(
      `DELETE FROM webhook_deliveries WHERE rowid IN (
         SELECT rowid FROM webhook_deliveries INDEXED BY webhook_deliveries_delivered WHERE state = 'delivered' AND delivered_at < ? LIMIT ?)`,
    ),
  };
}
