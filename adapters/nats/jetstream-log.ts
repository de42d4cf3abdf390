/**
 * The intake log on NATS JetStream (`IntakeLog` of `core/intake-log.ts`, issue 30): for a deployment
 * that outgrows one PostgreSQL primary's log table, the log lives in a stream that a NATS cluster
 * replicates, beside PostgreSQL's index and store.
 *
 * - Partitions are subjects: `<prefix>.<n>`, n a hash (FNV-1a) of the VIN into `partitions`, so a
 *   VIN's payloads keep one order. A position is the stream sequence.
 * - `append` publishes a group's payloads together (async publishes awaited together) and answers
 *   each once JetStream acknowledged it: stored in the stream (in a cluster, on a quorum of its
 *   `replicas`). A refused publish — the stream at its limits, no quorum, no answer in time — is a
 *   `store_unavailable` 503 with Retry-After for that payload: the stream discards *new* messages
 *   when full (never old ones), so nothing taken is ever dropped.
 * - `read` uses an ephemeral pull consumer per partition started at the position asked for and
 *   kept while reads go on from where it stopped (no acks: the position is the reader's to commit).
 * - `commit` keeps the partition's position in the KV bucket `<stream>_POSITIONS` and purges the
 *   partition's messages up to it: the stream keeps what is not yet committed, and its limits
 *   (`maxBytes`, `maxMessages`) bound only that.
 * - A lease is a key of the KV bucket `<stream>_LEASES`, whose entries live `leaseTtlMs`: created
 *   only where absent, renewed every third of that by this process, gone when released — or when a
 *   process that died stops renewing it, so its partitions pass to the others within `leaseTtlMs`.
 *
 * The stream and the buckets are created at open when missing and checked when present: a setting
 * that differs (a partition count, a replica count, a retention) is refused with an error naming it,
 * since two processes disagreeing on them would break per-VIN order or durability.
 */
import { type ConnectionOptions, connect, type NatsConnection, nanos } from '@nats-io/transport-node';
import {
  AckPolicy,
  type Consumer,
  DeliverPolicy,
  DiscardPolicy,
  type JetStreamClient,
  type JetStreamManager,
  jetstreamManager,
  RetentionPolicy,
  StorageType,
  type StreamConfig,
} from '@nats-io/jetstream';
import { type KV, Kvm } from '@nats-io/kv';
import { randomUUID } from 'node:crypto';
import { storeUnavailable, TrailwireError } from '../../core/errors.ts';
import type { IntakeLog, LoggedIntake, LogPosition, PartitionLease } from '../../core/intake-log.ts';
import type { NewIntake } from '../../core/intake-queue.ts';

export interface JetStreamIntakeLogOptions {
  /** The NATS server(s), `nats://host:4222`. Required. */
  servers: string | readonly string[];
  /** The stream's name; its KV buckets are `<stream>_LEASES` and `<stream>_POSITIONS`. Default `TRAILWIRE_INTAKE`. */
  stream?: string;
  /** Partition n is the subject `<subjectPrefix>.<n>`. Default `trailwire.intake`. */
  subjectPrefix?: string;
  /** VIN partitions: the most processes that can share the processing. Fixed once the stream exists. Default 16. */
  partitions?: number;
  /** Copies of each message in a cluster; a publish is acknowledged once a quorum holds it. Default 1. */
  replicas?: number;
  /** The most bytes the stream keeps uncommitted; past it intake is refused (503). Default 1 GiB. */
  maxBytes?: number;
  /** The most messages the stream keeps uncommitted; past it intake is refused (503). Default 10,000,000. */
  maxMessages?: number;
  /** How long a partition's lease outlives its holder's last renewal (a dead process's partitions wait this long). Default 10,000 ms. */
  leaseTtlMs?: number;
  /** How long a publish waits for its acknowledgement before the payload is refused (503). Default 5,000 ms. */
  publishTimeoutMs?: number;
}

export const DEFAULT_JETSTREAM_INTAKE_LOG_OPTIONS = {
  stream: 'TRAILWIRE_INTAKE',
  subjectPrefix: 'trailwire.intake',
  partitions: 16,
  replicas: 1,
  maxBytes: 1024 ** 3,
  maxMessages: 10_000_000,
  leaseTtlMs: 10_000,
  publishTimeoutMs: 5_000,
} as const;

export type JetStreamIntakeLogSettings = Required<Omit<JetStreamIntakeLogOptions, 'servers'>> & { servers: readonly string[] };

/** A refused publish's Retry-After: a full stream frees as processing commits. */
const REFUSED_RETRY_AFTER_SECONDS = 2;

/** Checks the options, naming the first bad field, and fills in the defaults. */
export function resolveJetStreamIntakeLogOptions(options: JetStreamIntakeLogOptions): JetStreamIntakeLogSettings {
  const servers = typeof options.servers === 'string' ? [options.servers] : options.servers;
  if (!Array.isArray(servers) || servers.length === 0 || !servers.every((url) => typeof url === 'string' && /^(nats|tls):\/\//.test(url)))
    throw badOption('servers', 'must be one or more nats:// URLs');
  const settings = { ...DEFAULT_JETSTREAM_INTAKE_LOG_OPTIONS, ...Object.fromEntries(Object.entries(options).filter(([, value]) => value !== undefined)), servers };
  if (!/^[A-Za-z0-9_-]+$/.test(settings.stream)) throw badOption('stream', 'must be letters, digits, - and _');
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(settings.subjectPrefix)) throw badOption('subjectPrefix', 'must be dot-separated subject tokens without wildcards');
  for (const field of ['partitions', 'replicas', 'maxBytes', 'maxMessages', 'leaseTtlMs', 'publishTimeoutMs'] as const)
    if (!Number.isSafeInteger(settings[field]) || settings[field] < 1) throw badOption(field, `must be a positive integer (got ${String(settings[field])})`);
  if (settings.leaseTtlMs < 1000) throw badOption('leaseTtlMs', 'must be at least 1000 ms');
  return settings;
}

/** The settings a `--intake-log` URL may carry as query parameters, by name. */
const URL_PARAMETERS = {
  stream: 'stream',
  subjects: 'subjectPrefix',
  partitions: 'partitions',
  replicas: 'replicas',
  'max-bytes': 'maxBytes',
  'max-messages': 'maxMessages',
  'lease-ttl-ms': 'leaseTtlMs',
} as const satisfies Record<string, keyof JetStreamIntakeLogOptions>;

/**
 * The options of an intake-log URL: `nats://host:4222[,host2:4222...][?stream=S&replicas=3...]`
 * (servers of one cluster comma-separated; the parameters of `URL_PARAMETERS`). An unknown parameter
 * is refused, naming it.
 */
export function jetStreamOptionsOfUrl(url: string): JetStreamIntakeLogOptions {
  const [address = '', query = ''] = url.split('?', 2);
  const scheme = /^([a-z]+):\/\//i.exec(address)?.[1] ?? 'nats';
  const servers = address
    .replace(/^[a-z]+:\/\//i, '')
    .replace(/\/$/, '')
    .split(',')
    .filter((host) => host !== '')
    .map((host) => `${scheme}://${host}`);
  const options: JetStreamIntakeLogOptions = { servers };
  for (const [name, value] of new URLSearchParams(query)) {
    const field = URL_PARAMETERS[name as keyof typeof URL_PARAMETERS];
    if (!field)
      throw new TrailwireError('validation_failed', `the intake log URL has an unknown parameter ${JSON.stringify(name)}; known: ${Object.keys(URL_PARAMETERS).join(', ')}`);
    (options as unknown as Record<string, unknown>)[field] = field === 'stream' || field === 'subjectPrefix' ? value : Number(value);
  }
  return options;
}

/** Opens the log: connects, creates or checks the stream and its buckets. `close()` it. */
export async function openJetStreamIntakeLog(options: JetStreamIntakeLogOptions, connection: Partial<ConnectionOptions> = {}): Promise<JetStreamIntakeLog> {
  const settings = resolveJetStreamIntakeLogOptions(options);
  let nc: NatsConnection;
  try {
    nc = await connect({ servers: [...settings.servers], name: 'trailwire', maxReconnectAttempts: -1, ...connection });
  } catch (error) {
    // Unreachable: a server waits for it at start (store_unavailable is what it retries).
    throw storeUnavailable(`NATS at ${settings.servers.join(', ')} cannot be reached: ${(error as Error).message}`, error, 1);
  }
  try {
    const jsm = await jetstreamManager(nc);
    await ensureStream(jsm, settings);
    const kvm = new Kvm(nc);
    const leases = await ensureBucket(kvm, `${settings.stream}_LEASES`, settings, settings.leaseTtlMs);
    const positions = await ensureBucket(kvm, `${settings.stream}_POSITIONS`, settings, 0);
    await ensurePartitionCount(positions, settings.partitions);
    return new JetStreamIntakeLog(nc, jsm, leases, positions, settings);
  } catch (error) {
    await nc.close().catch(() => {});
    throw error;
  }
}

/** A partition's reader: an ephemeral consumer that delivers from `next` on. */
interface PartitionReader {
  name: string;
  consumer: Consumer;
  /** The position its next message follows. */
  after: number;
}

export class JetStreamIntakeLog implements IntakeLog {
  readonly partitions: number;
  private readonly js: JetStreamClient;
  private readonly readers = new Map<number, PartitionReader>();
  private readonly held = new Map<number, { held: boolean; timer: NodeJS.Timeout; release(): Promise<void> }>();
  /** Names this process in the lease bucket. */
  private readonly holder = randomUUID();
  private closed = false;

  /** Use `openJetStreamIntakeLog`. */
  constructor(
    private readonly nc: NatsConnection,
    private readonly jsm: JetStreamManager,
    private readonly leaseBucket: KV,
    private readonly positionBucket: KV,
    readonly settings: JetStreamIntakeLogSettings,
  ) {
    this.partitions = settings.partitions;
    this.js = jsm.jetstream();
  }

  partitionOf(vin: string): number {
    // FNV-1a: a few multiplications per character, on the accept path of every payload.
    let hash = 0x811c9dc5;
    for (let i = 0; i < vin.length; i++) hash = Math.imul(hash ^ vin.charCodeAt(i), 0x01000193);
    return (hash >>> 0) % this.partitions;
  }

  async append(group: readonly NewIntake[]): Promise<Array<LogPosition | TrailwireError>> {
    // Published together, awaited together: one turn's payloads share the round trips.
    return Promise.all(
      group.map(async (item): Promise<LogPosition | TrailwireError> => {
        const partition = this.partitionOf(item.vin);
        try {
          const ack = await this.js.publish(`${this.settings.subjectPrefix}.${partition}`, encodeIntake(item), { timeout: this.settings.publishTimeoutMs });
          return { partition, seq: ack.seq };
        } catch (error) {
          return storeUnavailable(`the intake log (JetStream stream ${this.settings.stream}) did not take the payload: ${(error as Error).message}`, error, REFUSED_RETRY_AFTER_SECONDS);
        }
      }),
    );
  }

  async read(partition: number, after: number, limit: number): Promise<LoggedIntake[]> {
    const reader = await this.readerAt(partition, after);
    try {
      const pending = (await reader.consumer.info(false)).num_pending;
      if (pending === 0) return [];
      const entries: LoggedIntake[] = [];
      const messages = await reader.consumer.fetch({ max_messages: Math.min(limit, pending), expires: 5_000 });
      for await (const message of messages) {
        entries.push({ ...decodeIntake(message.data), partition, seq: message.seq });
        if (entries.length === Math.min(limit, pending)) break;
      }
      if (entries.length > 0) reader.after = entries[entries.length - 1]!.seq;
      return entries;
    } catch (error) {
      // Where its cursor stands is unknown now: the next read starts a new one.
      await this.dropReader(partition);
      throw storeUnavailable(`the intake log (JetStream stream ${this.settings.stream}) could not be read: ${(error as Error).message}`, error, 1);
    }
  }

  async at({ partition, seq }: LogPosition): Promise<LoggedIntake | null> {
    let message;
    try {
      message = await this.jsm.streams.getMessage(this.settings.stream, { seq });
    } catch (error) {
      throw storeUnavailable(`the intake log (JetStream stream ${this.settings.stream}) could not be read: ${(error as Error).message}`, error, 1);
    }
    if (!message || message.subject !== `${this.settings.subjectPrefix}.${partition}`) return null;
    return { ...decodeIntake(message.data), partition, seq };
  }

  async commit(partition: number, seq: number): Promise<void> {
    const key = `p${partition}`;
    const entry = await this.positionBucket.get(key);
    const current = entry && entry.operation === 'PUT' ? Number(entry.string()) : 0;
    if (seq <= current) return;
    if (entry) await this.positionBucket.update(key, String(seq), entry.revision);
    else await this.positionBucket.create(key, String(seq));
    // What is committed goes: the stream keeps only what some partition has still to process.
    await this.jsm.streams.purge(this.settings.stream, { filter: `${this.settings.subjectPrefix}.${partition}`, seq: seq + 1 });
  }

  async committed(partition: number): Promise<number> {
    const entry = await this.positionBucket.get(`p${partition}`);
    return entry && entry.operation === 'PUT' ? Number(entry.string()) : 0;
  }

  /** Messages kept per partition (those not committed yet, once each commit's purge is done). */
  async pending(): Promise<number[]> {
    const info = await this.jsm.streams.info(this.settings.stream, { subjects_filter: `${this.settings.subjectPrefix}.*` });
    const counts = new Array<number>(this.partitions).fill(0);
    for (const [subject, count] of Object.entries(info.state.subjects ?? {})) {
      const partition = Number(subject.slice(this.settings.subjectPrefix.length + 1));
      if (partition >= 0 && partition < this.partitions) counts[partition] = count;
    }
    return counts;
  }

  /** Throws (naming the fault) while the stream cannot be reached: a `/readyz` check. */
  async probe(): Promise<void> {
    try {
      await this.jsm.streams.info(this.settings.stream);
    } catch (error) {
      throw storeUnavailable(`the intake log (JetStream stream ${this.settings.stream}) cannot be reached: ${(error as Error).message}`, error, 1);
    }
  }

  async lease(partition: number): Promise<PartitionLease | null> {
    if (this.closed || this.held.has(partition)) return null;
    const key = `p${partition}`;
    let revision: number;
    try {
      revision = await this.leaseBucket.create(key, this.holder);
    } catch {
      return null; // held by another process (or the bucket cannot be reached: no lease either way)
    }
    const state = {
      held: true,
      timer: setInterval(() => {
        this.leaseBucket.update(key, this.holder, revision).then(
          (next) => (revision = next),
          // Renewed too late (expired and taken) or not at all: the partition is another's now.
          () => lose(),
        );
      }, Math.floor(this.settings.leaseTtlMs / 3)),
      release: async () => {
        if (!state.held) return;
        lose();
        await this.leaseBucket.delete(key, { previousSeq: revision }).catch(() => {});
      },
    };
    state.timer.unref();
    const lose = () => {
      state.held = false;
      clearInterval(state.timer);
      if (this.held.get(partition) === state) this.held.delete(partition);
    };
    this.held.set(partition, state);
    return {
      partition,
      get held() {
        return state.held;
      },
      release: () => state.release(),
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const lease of [...this.held.values()]) await lease.release();
    for (const partition of [...this.readers.keys()]) await this.dropReader(partition);
    await this.nc.drain().catch(() => {});
  }

  /** The partition's reader, started after `after` unless the one it has stands there. */
  private async readerAt(partition: number, after: number): Promise<PartitionReader> {
    const reader = this.readers.get(partition);
    if (reader?.after === after) return reader;
    await this.dropReader(partition);
    const info = await this.jsm.consumers.add(this.settings.stream, {
      filter_subject: `${this.settings.subjectPrefix}.${partition}`,
      deliver_policy: DeliverPolicy.StartSequence,
      opt_start_seq: after + 1,
      ack_policy: AckPolicy.None,
      mem_storage: true,
      // Left behind by a process that died: gone a minute later.
      inactive_threshold: nanos(60_000),
    });
    const fresh = { name: info.name, consumer: await this.js.consumers.get(this.settings.stream, info.name), after };
    this.readers.set(partition, fresh);
    return fresh;
  }

  private async dropReader(partition: number): Promise<void> {
    const reader = this.readers.get(partition);
    if (!reader) return;
    this.readers.delete(partition);
    await this.jsm.consumers.delete(this.settings.stream, reader.name).catch(() => {});
  }
}

/** The stream as the settings describe it; what a present stream must agree with. */
function streamConfig(settings: JetStreamIntakeLogSettings): Partial<StreamConfig> & { name: string } {
  return {
    name: settings.stream,
    subjects: [`${settings.subjectPrefix}.*`],
    retention: RetentionPolicy.Limits,
    // Full means refuse new messages, never drop old ones (uncommitted payloads).
    discard: DiscardPolicy.New,
    storage: StorageType.File,
    num_replicas: settings.replicas,
    max_bytes: settings.maxBytes,
    max_msgs: settings.maxMessages,
    max_age: 0,
  };
}

async function ensureStream(jsm: JetStreamManager, settings: JetStreamIntakeLogSettings): Promise<void> {
  const wanted = streamConfig(settings);
  let present: StreamConfig;
  try {
    present = (await jsm.streams.info(settings.stream)).config;
  } catch (error) {
    if ((error as { name?: string }).name !== 'StreamNotFoundError' && !/stream not found/i.test(String((error as Error).message))) throw error;
    await jsm.streams.add(wanted);
    return;
  }
  for (const [setting, value] of Object.entries(wanted)) {
    const has = (present as unknown as Record<string, unknown>)[setting];
    if (JSON.stringify(has) !== JSON.stringify(value))
      throw new TrailwireError(
        'validation_failed',
        `the JetStream stream ${settings.stream} has ${setting} = ${JSON.stringify(has)}, but this process is configured for ${JSON.stringify(value)}; change the stream (nats stream edit) or the setting, so that every process agrees`,
      );
  }
}

async function ensureBucket(kvm: Kvm, bucket: string, settings: JetStreamIntakeLogSettings, ttlMs: number): Promise<KV> {
  const kv = await kvm.create(bucket, { history: 1, ttl: ttlMs, replicas: settings.replicas });
  const status = await kv.status();
  if (status.ttl !== ttlMs || status.replicas !== settings.replicas)
    throw new TrailwireError(
      'validation_failed',
      `the JetStream KV bucket ${bucket} has ttl = ${status.ttl} ms and replicas = ${status.replicas}, but this process is configured for ${ttlMs} ms and ${settings.replicas}; delete or edit the bucket, so that every process agrees`,
    );
  return kv;
}

/** The partition count is the stream's: fixed by the first process, checked by every other. */
async function ensurePartitionCount(positions: KV, partitions: number): Promise<void> {
  try {
    await positions.create('partitions', String(partitions));
    return;
  } catch {
    // Present: compare below.
  }
  const present = Number((await positions.get('partitions'))?.string());
  if (present !== partitions)
    throw new TrailwireError(
      'validation_failed',
      `the JetStream intake log has partitions = ${present}, but this process is configured for ${partitions}; every process must use the same (a VIN's partition decides its order)`,
    );
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A message: the payload's fields as a JSON array on the first line, the payload as received after it. */
function encodeIntake(item: NewIntake): Uint8Array {
  return encoder.encode(`${JSON.stringify([item.id, item.partnerId, item.product, item.vin, item.receivedAt, item.idempotencyKey])}\n${item.payload}`);
}

function decodeIntake(data: Uint8Array): NewIntake {
  const text = decoder.decode(data);
  const newline = text.indexOf('\n');
  const [id, partnerId, product, vin, receivedAt, idempotencyKey] = JSON.parse(text.slice(0, newline)) as [string, string, string, string, number, string | null];
  return { id, partnerId, product, vin, payload: text.slice(newline + 1), receivedAt, idempotencyKey };
}

function badOption(field: string, message: string): TrailwireError {
  return new TrailwireError('validation_failed', `JetStreamIntakeLogOptions.${field} ${message}`, { errors: [{ path: field, message }] });
}
