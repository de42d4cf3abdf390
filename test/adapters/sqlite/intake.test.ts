/**
 * The SQLite intake's front door (`openSqliteIntake`) without its thread, processed by the core's
 * worker, as `serve` assembles it for product objects or an injected clock: partner grants are checked again as of processing (issue 37's late registration).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { openSqliteIntake, openSqliteStore } from '../../../adapters/sqlite/index.ts';
import { createTrailwire } from '../../../core/trailwire.ts';
import { builtInProducts } from '../../../products/index.ts';
import { assertLateRegistrationRefused } from '../../support/late-registration.ts';
import { RecordingLiveBus } from '../../support/recording-live-bus.ts';

const directory = mkdtempSync(join(tmpdir(), 'trailwire-sqlite-intake-'));
after(() => rmSync(directory, { recursive: true, force: true }));

describe('SQLite intake with the core worker', () => {
  it('dead-letters a payload accepted before its VIN was registered to a customer that did not grant its partner (issue 37)', async () => {
    const store = await openSqliteStore({ file: join(directory, 'late-registration.db') });
    const intake = openSqliteIntake({ store, thread: false });
    const bus = new RecordingLiveBus();
    const events = bus.published;
    const trailwire = await createTrailwire({ store, products: builtInProducts, intakeQueue: intake.queue, live: { bus }, partnerIntake: { requireGrants: true } });
    try {
      // The worker is not started: processing runs when the scenario says.
      await assertLateRegistrationRefused({ trailwire, process: async () => void (await trailwire.intake!.worker!.drainDue()), published: () => events });
    } finally {
      await trailwire.close();
      await intake.stop();
    }
  });
});
