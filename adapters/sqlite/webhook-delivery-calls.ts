/**
 * The webhook deliverer's store calls across the processing thread's boundary. On SQLite the thread
 * owns the store's writes: run on the serving thread's connection, each of the deliverer's
 * transactions (lease, form, settle, release) waited in SQLite's busy handler — blocking that
 * thread's event loop, and with it every request — while the thread held a batch's write lock. The
 * 100-endpoint bench measured it: the serving thread spent more time in the deliverer's store calls
 * than in intake, and intake took 0.61 × the 202/s of the same endpoints not delivering
 * (docs/performance.md, "Issue 40: webhook delivery"). So a server with a processing thread gives
 * the deliverer `threadWebhookDeliveryStore`, whose calls the thread runs on its own connection
 * between its batches (`runWebhookDeliveryCall`), where no lock is waited for; the sending itself
 * stays on the serving thread.
 */
import { WEBHOOK_DELIVERY_CALLS, type WebhookBatching, type WebhookDeliveryStore } from '../../core/store.ts';

type Store = WebhookDeliveryStore;

/** One call, as it crosses to the thread. A new delivery's id is drawn on the caller's side, since a function cannot cross. */
export type WebhookDeliveryCall =
  | { method: 'claimWebhookEndpoints'; args: Parameters<Store['claimWebhookEndpoints']> }
  | { method: 'takeWebhookDelivery'; args: [endpointId: string, now: number, batching: Omit<WebhookBatching, 'newId'>, newId: string] }
  | { method: 'settleWebhookDelivery'; args: Parameters<Store['settleWebhookDelivery']> }
  | { method: 'releaseWebhookEndpoint'; args: Parameters<Store['releaseWebhookEndpoint']> }
  | { method: 'purgeWebhookDeliveries'; args: Parameters<Store['purgeWebhookDeliveries']> };

/** The deliverer's store whose every call is `send` to the thread (which answers with the store's result). */
export function threadWebhookDeliveryStore(send: (call: WebhookDeliveryCall) => Promise<unknown>): WebhookDeliveryStore {
  return {
    // The deliverer's batching settings may carry its `newId`: only the numbers cross.
    claimWebhookEndpoints: (owner, now, leaseMs, limit, { maxEvents, lingerMs }) =>
      send({ method: 'claimWebhookEndpoints', args: [owner, now, leaseMs, limit, { maxEvents, lingerMs }] }) as ReturnType<Store['claimWebhookEndpoints']>,
    takeWebhookDelivery: (endpointId, now, { maxEvents, lingerMs, newId }) =>
      send({ method: 'takeWebhookDelivery', args: [endpointId, now, { maxEvents, lingerMs }, newId()] }) as ReturnType<Store['takeWebhookDelivery']>,
    settleWebhookDelivery: (...args) => send({ method: 'settleWebhookDelivery', args }) as ReturnType<Store['settleWebhookDelivery']>,
    releaseWebhookEndpoint: (...args) => send({ method: 'releaseWebhookEndpoint', args }) as ReturnType<Store['releaseWebhookEndpoint']>,
    purgeWebhookDeliveries: (...args) => send({ method: 'purgeWebhookDeliveries', args }) as ReturnType<Store['purgeWebhookDeliveries']>,
  };
}

/** Runs a call that crossed, on the thread's store; refuses a method that is not one of the deliverer's. */
export function runWebhookDeliveryCall(store: Store, call: WebhookDeliveryCall): Promise<unknown> {
  if (!(WEBHOOK_DELIVERY_CALLS as readonly string[]).includes(call.method)) return Promise.reject(new TypeError(`not a webhook delivery call: ${String(call.method)}`));
  if (call.method === 'takeWebhookDelivery') {
    const [endpointId, now, batching, id] = call.args;
    return store.takeWebhookDelivery(endpointId, now, { ...batching, newId: () => id });
  }
  const method = store[call.method] as (...args: unknown[]) => Promise<unknown>;
  return method.apply(store, call.args);
}
