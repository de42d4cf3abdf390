/**
 * A server whose disk fills up, for real: its store on a small tmpfs that a filler file fills
 * while partners post (contract 6). Every refusal is a 503 problem+json `store_unavailable` with
 * Retry-After — never a 500 —, `/readyz` is 503 naming the failing check while the disk is full
 * (the intake log's, or processing's), the log says so a few times rather than once per request, and once space returns
 * the server recovers by itself: `/readyz` 200, 202s again, and every payload answered 202 before,
 * during and after is processed, without a restart.
 *
 * Mounting needs root (CI runs as root); elsewhere the test is skipped and says why.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { after, before, it } from 'node:test';
import { pino } from 'pino';
import { startServer } from '../../../adapters/server/index.ts';
import { withCheckDigit } from '../../../core/vin.ts';
import { assertAllProcessed } from '../../support/intake-status.ts';
import { until } from '../../support/until.ts';

const mountPoint = mkdtempSync(join(tmpdir(), 'trailwire-full-disk-'));
const mountRefusal = tryMount();
after(() => {
  if (!mountRefusal) execFileSync('umount', ['-l', mountPoint]);
  rmSync(mountPoint, { recursive: true, force: true });
});

function tryMount(): string | undefined {
  if (process.platform !== 'linux') return 'mounting a tmpfs needs Linux';
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root (CI runs as root)';
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=32m', 'tmpfs', mountPoint], { stdio: 'pipe' });
    return undefined;
  } catch (error) {
    return `mount -t tmpfs failed: ${(error as Error).message.split('\n')[0]}`;
  }
}

/** Writes a file into `folder` until the disk refuses: answers its path. */
function fillDisk(folder: string): string {
  const file = join(folder, 'filler');
  const fd = openSync(file, 'w');
  const chunk = Buffer.alloc(256 * 1024, 1);
  try {
    for (;;) writeSync(fd, chunk);
  } catch (error) {
    assert.equal((error as { code?: string }).code, 'ENOSPC');
  } finally {
    closeSync(fd);
  }
  return file;
}

let serial = 0;
const vinOf = (i: number) => withCheckDigit(`1FULDSK${String(i % 40).padStart(10, '0')}`);
const fix = () => JSON.stringify({ timestamp: Math.floor(Date.now() / 1000) - 5, position: { latitude: 41 + (serial % 10) / 100, longitude: -87 }, speedKph: 80, bearingDeg: 10 });

/**
 * Runs a server on its own folder of the small filesystem, `prepare`d first; `scenario` fills the
 * disk and checks what the server answers; then space returns, and every payload answered 202 must
 * be processed without a restart.
 */
async function withServerOnSmallDisk(name: string, prepare: (folder: string) => void, scenario: (drive: Drive) => Promise<void>): Promise<void> {
  const folder = join(mountPoint, name);
  mkdirSync(folder);
  prepare(folder);
  const errorLines: string[] = [];
  const logSink = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split('\n').filter(Boolean)) if (JSON.parse(line).level >= 50) errorLines.push(line);
      done();
    },
  });
  const server = await startServer({ db: join(folder, 'trailwire.db'), port: 0, grpcPort: 0, host: '127.0.0.1', logger: pino({ level: 'info' }, logSink) });
  let filler: string | undefined;
  try {
    const partner = await server.trailwire.auth.createPartner({ name: 'Full Disk Co', product: 'gps-basic' });
    const token = (await server.trailwire.auth.authenticate('partners', partner.apiKey, 'test')).token.accessToken;
    const accepted: string[] = [];
    const statuses = new Map<number, number>();
    const post = async () => {
      const i = serial++;
      const response = await fetch(`${server.url}/api/v1/telemetry/intake/${vinOf(i)}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: fix(),
      });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      const body = (await response.json()) as { id?: string; type?: string; detail?: string };
      if (response.status === 202) accepted.push(body.id!);
      else {
        assert.equal(response.status, 503, `a refusal is a 503, not ${response.status}: ${JSON.stringify(body)}`);
        assert.equal(response.headers.get('content-type'), 'application/problem+json');
        assert.equal(body.type, 'https://trailwire.dev/problems/store-unavailable');
        assert.match(response.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
      }
    };
    const drive: Drive = {
      /** `n` posts, 8 at a time. */
      burst: async (n) => {
        for (let sent = 0; sent < n; sent += 8) await Promise.all(Array.from({ length: Math.min(8, n - sent) }, post));
      },
      statuses,
      errorLines,
      readyz: async () => {
        const response = await fetch(`${server.url}/readyz`);
        return { status: response.status, body: (await response.json()) as { detail?: string } };
      },
      fill: () => (filler = fillDisk(folder)),
    };
    await drive.burst(80);
    assert.equal(statuses.get(202), 80, 'all taken while there is room');
    await scenario(drive);
    assert.equal(statuses.get(500), undefined, 'never a 500');
    assert.ok(errorLines.length <= 12, `the fault is logged a few times, not once per request: ${errorLines.length} error lines`);

    rmSync(filler!);
    filler = undefined;
    await until(async () => (await drive.readyz()).status === 200, 'ready again once space returned', 20_000, 100);
    const refusedBefore = statuses.get(503) ?? 0;
    await drive.burst(80);
    assert.equal(statuses.get(503) ?? 0, refusedBefore, 'everything is taken again once space returned');
    await assertAllProcessed(server.url, token, accepted, 30_000);
  } finally {
    if (filler) rmSync(filler, { force: true });
    await server.close();
  }
}

interface Drive {
  burst(n: number): Promise<void>;
  readonly statuses: Map<number, number>;
  readonly errorLines: string[];
  readyz(): Promise<{ status: number; body: { detail?: string } }>;
  /** Fills the disk; answers the filler's path. */
  fill(): string;
}

it('refuses intake with 503 while the intake log cannot be written, /readyz naming it, and recovers by itself', { skip: mountRefusal ?? false, timeout: 90_000 }, () =>
  withServerOnSmallDisk('log-full', () => {}, async (drive) => {
    drive.fill();
    // The WAL takes commits into the room it already has until a checkpoint has to grow the file:
    // the full disk is met after a few groups, not at the first one.
    const deadline = Date.now() + 20_000;
    while ((drive.statuses.get(503) ?? 0) === 0) {
      assert.ok(Date.now() < deadline, 'the full disk is met');
      await drive.burst(40);
    }
    const whileFull = await drive.readyz();
    assert.equal(whileFull.status, 503, '/readyz is not ready while the disk is full');
    // The log's file and the store's share the disk: whichever write meets it first is named (the
    // log's appends, or processing's batches while the log's WAL still has room for small groups).
    assert.match(whileFull.body.detail ?? '', /intake-log|intake-processing/);
    // Each answer while full is a 503, or a 202 for a group the log's WAL still had room for (durable,
    // and processed once space returns): `post` checks every refusal, the end every 202.
    await drive.burst(80);
    assert.ok(drive.errorLines.some((line) => /refuses writes/.test(line) && /disk is full/.test(line)), 'the log says what is wrong');
  }),
);
