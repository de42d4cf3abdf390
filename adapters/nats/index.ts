/**
 * `trailwire/nats`: the intake log on NATS JetStream (issue 30), for a deployment that outgrows one
 * PostgreSQL primary's log table. `openJetStreamIntakeLog({ servers, ... })` → `JetStreamIntakeLog`,
 * an `IntakeLog` (`core/intake-log.ts`) passing the log conformance suite: VIN partitions as
 * subjects, a 202 after the publish acknowledgement, partition leases in a KV bucket, the stream
 * and buckets created when missing and checked when present. `resolveJetStreamIntakeLogOptions`
 * checks options (`JetStreamIntakeLogOptions`) against `DEFAULT_JETSTREAM_INTAKE_LOG_OPTIONS`;
 * `jetStreamOptionsOfUrl` reads them from a `--intake-log` URL (`nats://a:4222,b:4222?stream=S&replicas=3`).
 */
export {
  DEFAULT_JETSTREAM_INTAKE_LOG_OPTIONS,
  JetStreamIntakeLog,
  jetStreamOptionsOfUrl,
  openJetStreamIntakeLog,
  resolveJetStreamIntakeLogOptions,
  type JetStreamIntakeLogOptions,
  type JetStreamIntakeLogSettings,
} from './jetstream-log.ts';
