/**
 * Operator actions behind the `trailwire` CLI and the demo seed: fleets, trailer registration
 * (a VIN that intake already created unassigned is assigned instead of duplicated), switching
 * trailers and devices off and on, and what partners may send: the customers' grants and the
 * per-partner intake overrides (issue 29). Every change of a trailer is noted in the store's change feed,
 * which carries it to the LiveFeed subscribers of every serving process (`core/trailer-changes.ts`).
 */
import type { Clock, IdGenerator } from './clock.ts';
import { invalidField, TrailwireError } from './errors.ts';
import type { Fleet, Trailer } from './model.ts';
import type {
  FleetAdminStore,
  OperatorReadStore,
  PartnerGrant,
  PartnerIntakeLimits,
  PartnerPolicyStore,
  PrincipalStore,
  TrailerChangeStore,
  TrailerImportChange,
  TimeKey,
} from './store.ts';
import type { TrailerImportFile, TrailerImportProblem } from './trailer-import-file.ts';
import { parseVin } from './vin.ts';

/**
 * What a registration took over from intake: the data stored for the VIN while it was unassigned
 * (none for a VIN intake never met). The store does not record which partner sent it.
 */
export interface AdoptedData {
  gpsFixes: number;
  devices: number;
  /** The newest time its GPS, devices or cargosafe units reported (epoch ms); null when nothing. */
  lastSeenAt: number | null;
}

/** A registered trailer, with what it adopted from intake. */
export type RegisteredTrailer = Trailer & { adopted: AdoptedData };

/** What a fleet import did (`AdminService.importTrailers`). */
export interface TrailerImportReport {
  fleetId: number;
  /**
   * `applied`: the changes were written (with `skipInvalid`, the valid lines'); `unchanged`: every
   * valid line already held, nothing written; `refused`: some lines are invalid, nothing written.
   */
  outcome: 'applied' | 'unchanged' | 'refused';
  /** Data lines read (the header and blank lines not counted). */
  lines: number;
  /** Trailers created, unassigned trailers assigned, trailers of the fleet updated, lines that changed nothing; all 0 when refused. */
  created: number;
  assigned: number;
  updated: number;
  unchanged: number;
  /** Every line not taken, by line number; skipped with `skipInvalid`, else the reason nothing was applied. */
  invalid: TrailerImportProblem[];
}

const NOTHING_ADOPTED: AdoptedData = { gpsFixes: 0, devices: 0, lastSeenAt: null };

/** Rows per store read when counting what a trailer holds. */
const COUNT_PAGE = 500;

/** `3 GPS fixes, 2 devices, last reported 2026-…`, for messages. */
export function describeAdopted(adopted: AdoptedData): string {
  const at = adopted.lastSeenAt === null ? '' : `, last reported ${new Date(adopted.lastSeenAt).toISOString()}`;
  return `${adopted.gpsFixes} GPS fix${adopted.gpsFixes === 1 ? '' : 'es'}, ${adopted.devices} device${adopted.devices === 1 ? '' : 's'}${at}`;
}

export class AdminService {
  constructor(
    private readonly store: FleetAdminStore &
      PrincipalStore &
      TrailerChangeStore &
      PartnerPolicyStore &
      Pick<OperatorReadStore, 'getAnyTrailer' | 'listTrailerDevices' | 'listTrailerGps'>,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
    private readonly options: {
      verifyVinCheckDigit: boolean;
      /** Whether every customer takes intake only from the partners it granted (`serve --require-grants`). Default false. */
      requireGrants?: boolean;
      /** Called after a change is noted: this process's change feed reads it at once. */
      onTrailerChanged?: () => void;
      /** Called after a grant, a partner's overrides or a VIN's owner changed: this process's caches forget them at once. */
      onPartnerPolicyChanged?: (changed: { vin?: string; customerId?: string; partnerId?: string }) => void;
    } = { verifyVinCheckDigit: true },
  ) {}

  async createFleet(input: { customerId: string; name: string }): Promise<Fleet> {
    if (!input.name.trim()) throw invalidField('/name', 'must not be empty');
    if (!(await this.store.getPrincipal('customers', input.customerId)))
      throw new TrailwireError('not_found', `No customer ${input.customerId}.`);
    return this.store.createFleet({ customerId: input.customerId, name: input.name.trim(), createdAt: this.clock.now() });
  }

  /**
   * Registers a VIN in a fleet. A VIN seen by intake before (an unassigned trailer) is assigned to
   * the fleet, adopting what intake stored for it (history, latest fix, devices; `adopted` says how
   * much); a VIN already in a fleet is a conflict.
   *
   * Adoption and grants (issue 37): any partner of the product may send to an unassigned VIN, and
   * the store does not record which one did. So when the fleet's customer takes intake only from the
   * partners it granted (it granted some, or `requireGrants`), a VIN holding such data is refused
   * (`conflict`, saying what it holds) unless `adoptUnassignedData` — else a partner nobody granted
   * could place fixes in that customer's trailer by sending them before the registration.
   */
  async registerTrailer(input: { fleetId: number; vin: string; unitId?: string | null; adoptUnassignedData?: boolean }): Promise<RegisteredTrailer> {
    // A VIN intake already knows is taken as it is: a server started with --no-verify-vin-check-digit
    // accepted it, and the operator must be able to assign it from a command that verifies by default.
    const shaped = parseVin(input.vin, { verifyCheckDigit: false });
    const known = await this.store.findTrailerByVin(shaped);
    const vin = known ? shaped : parseVin(input.vin, { verifyCheckDigit: this.options.verifyVinCheckDigit });
    const fleet = await this.store.getFleetById(input.fleetId);
    if (!fleet) throw new TrailwireError('not_found', `No fleet ${input.fleetId}.`);
    const unitId = input.unitId?.trim() || null;
    if (known) {
      if (known.fleetId !== null)
        throw new TrailwireError('conflict', `VIN ${vin} is already registered in fleet ${known.fleetId}.`);
      const adopted = await this.adoptable(known.id, vin, fleet.customerId, input.adoptUnassignedData ?? false, () => this.takesGrantedPartnersOnly(fleet.customerId));
      const assigned = await this.store.assignTrailer(known.id, input.fleetId, unitId);
      this.options.onPartnerPolicyChanged?.({ vin });
      return { ...(await this.changed(assigned)), adopted };
    }
    const created = await this.store.createTrailer({ id: this.ids(), fleetId: input.fleetId, vin, unitId, createdAt: this.clock.now() });
    this.options.onPartnerPolicyChanged?.({ vin });
    return { ...(await this.changed(created)), adopted: NOTHING_ADOPTED };
  }

  /**
   * What an unassigned trailer holds, when the fleet's customer may take it in: a VIN holding data
   * from partners the store does not record is refused (`conflict`) for a customer that takes intake
   * only from its granted partners (`grantedOnly`), unless `adopt` (see `registerTrailer`).
   */
  private async adoptable(trailerId: string, vin: string, customerId: string, adopt: boolean, grantedOnly: () => Promise<boolean>): Promise<AdoptedData> {
    const adopted = await this.unassignedDataOf(trailerId);
    if (adopted.lastSeenAt !== null && !adopt && (await grantedOnly()))
      throw new TrailwireError(
        'conflict',
        `VIN ${vin} holds what intake stored before it was registered (${describeAdopted(adopted)}), sent by partners the store ` +
          `does not record, and customer ${customerId} takes intake only from the partners it granted. ` +
          'Register it with --adopt-unassigned-data to take that data into the fleet anyway.',
      );
    return adopted;
  }

  /**
   * Registers the trailers of an import file in a fleet (`trailwire trailers import`, issue 40): each
   * line a VIN to create, an unassigned VIN to assign (checked as `registerTrailer` checks it), or a
   * trailer of the fleet whose unit id or active flag to set; a VIN that is malformed, named twice,
   * or in another fleet is a problem of its line. With any problem nothing is applied unless
   * `skipInvalid`; the changes are applied in one store transaction, all or none. A line that asks
   * for what already holds changes nothing, so running the same file again changes nothing.
   */
  async importTrailers(input: {
    fleetId: number;
    file: TrailerImportFile;
    skipInvalid?: boolean;
    adoptUnassignedData?: boolean;
  }): Promise<TrailerImportReport> {
    const { fleetId, file } = input;
    const fleet = await this.store.getFleetById(fleetId);
    if (!fleet) throw new TrailwireError('not_found', `No fleet ${fleetId}.`);
    let grantedOnly: Promise<boolean> | undefined;
    const takesGrantedOnly = () => (grantedOnly ??= this.takesGrantedPartnersOnly(fleet.customerId));
    const problems = [...file.problems];
    const changes: TrailerImportChange[] = [];
    const lineOfVin = new Map<string, number>();
    // The VINs that gain an owner: intake's grant checks cache who owns a VIN.
    const ownedVins: string[] = [];
    let unchanged = 0;
    for (const line of file.lines) {
      try {
        const shaped = parseVin(line.vin, { verifyCheckDigit: false });
        const earlier = lineOfVin.get(shaped);
        if (earlier !== undefined) throw new TrailwireError('validation_failed', `VIN ${shaped} is also on line ${earlier}`);
        lineOfVin.set(shaped, line.line);
        const known = await this.store.findTrailerByVin(shaped);
        if (!known) {
          const vin = parseVin(line.vin, { verifyCheckDigit: this.options.verifyVinCheckDigit });
          changes.push({ kind: 'create', id: this.ids(), vin, unitId: line.unitId ?? null, active: line.active ?? true });
          ownedVins.push(vin);
          continue;
        }
        const wanted = { unitId: line.unitId ?? known.unitId, active: line.active ?? known.active };
        if (known.fleetId === null) {
          await this.adoptable(known.id, shaped, fleet.customerId, input.adoptUnassignedData ?? false, takesGrantedOnly);
          changes.push({ kind: 'assign', trailerId: known.id, ...wanted });
          ownedVins.push(shaped);
        } else if (known.fleetId !== fleetId) {
          throw new TrailwireError('conflict', `VIN ${shaped} is already registered in fleet ${known.fleetId}`);
        } else if (wanted.unitId === known.unitId && wanted.active === known.active) {
          unchanged += 1;
        } else {
          changes.push({ kind: 'update', trailerId: known.id, ...wanted });
        }
      } catch (error) {
        if (!(error instanceof TrailwireError) || (error.code !== 'validation_failed' && error.code !== 'conflict')) throw error;
        problems.push({ line: line.line, message: error.message });
      }
    }
    problems.sort((a, b) => a.line - b.line);
    const count = (kind: TrailerImportChange['kind']) => changes.filter((change) => change.kind === kind).length;
    const report = { fleetId, lines: file.lines.length + file.problems.length, invalid: problems };
    if (problems.length > 0 && !input.skipInvalid) return { ...report, outcome: 'refused', created: 0, assigned: 0, updated: 0, unchanged: 0 };
    if (changes.length > 0) {
      await this.store.importTrailers(fleetId, changes, this.clock.now());
      for (const vin of ownedVins) this.options.onPartnerPolicyChanged?.({ vin });
      this.options.onTrailerChanged?.();
    }
    return { ...report, outcome: changes.length > 0 ? 'applied' : 'unchanged', created: count('create'), assigned: count('assign'), updated: count('update'), unchanged };
  }

  /** Whether the customer takes intake only from the partners it granted (the rule of `PartnerIntakeRules`). */
  private async takesGrantedPartnersOnly(customerId: string): Promise<boolean> {
    if (this.options.requireGrants) return true;
    return (await this.store.listPartnerGrants({ customerId })).length > 0;
  }

  /** What intake stored for a trailer: its GPS fixes and devices counted, and when it last reported. */
  private async unassignedDataOf(trailerId: string): Promise<AdoptedData> {
    const lastSeenAt = (await this.store.getAnyTrailer(trailerId))?.lastSeenAt ?? null;
    if (lastSeenAt === null) return NOTHING_ADOPTED;
    let gpsFixes = 0;
    for (let after: TimeKey | undefined; ; ) {
      const page = await this.store.listTrailerGps(trailerId, { from: 0, to: Number.MAX_SAFE_INTEGER, after, limit: COUNT_PAGE });
      gpsFixes += page.length;
      if (page.length < COUNT_PAGE) break;
      after = page[page.length - 1]!.key;
    }
    let devices = 0;
    for (let afterId: string | undefined; ; ) {
      const page = await this.store.listTrailerDevices(trailerId, { afterId, limit: COUNT_PAGE });
      devices += page.length;
      if (page.length < COUNT_PAGE) break;
      afterId = page[page.length - 1]!.id;
    }
    return { gpsFixes, devices, lastSeenAt };
  }

  /**
   * Records that the customer grants the partner intake for its registered trailers (contract 4):
   * from then on the customer takes intake only from its granted partners. Answers the grant and
   * whether it is new (adding it twice changes nothing).
   */
  async addGrant(input: { customerId: string; partnerId: string }): Promise<{ grant: PartnerGrant; added: boolean }> {
    await this.requirePrincipals(input);
    const grant = { customerId: input.customerId, partnerId: input.partnerId, createdAt: this.clock.now() };
    const added = await this.store.addPartnerGrant(grant);
    this.options.onPartnerPolicyChanged?.({ customerId: input.customerId });
    const [stored] = await this.store.listPartnerGrants(input);
    return { grant: stored ?? grant, added };
  }

  /** Withdraws a grant; `not_found` when there was none. A customer left with no grant takes intake from any partner again (unless grants are required). */
  async removeGrant(input: { customerId: string; partnerId: string }): Promise<void> {
    await this.requirePrincipals(input);
    const removed = await this.store.removePartnerGrant(input.customerId, input.partnerId);
    this.options.onPartnerPolicyChanged?.({ customerId: input.customerId });
    if (!removed) throw new TrailwireError('not_found', `Customer ${input.customerId} has not granted partner ${input.partnerId}.`);
  }

  /** The grants of one customer, of one partner, or every grant. */
  listGrants(query: { customerId?: string; partnerId?: string }): Promise<PartnerGrant[]> {
    return this.store.listPartnerGrants(query);
  }

  /**
   * Sets a partner's own intake budget and new-VIN cap (null: the server's default). Serving
   * processes apply it within their cache's refresh (5 s by default).
   */
  async setPartnerLimits(input: Omit<PartnerIntakeLimits, 'updatedAt'>): Promise<PartnerIntakeLimits> {
    const { intake, newVinsPerDay } = input;
    if (intake !== null && !(isPositiveInteger(intake.requests) && isPositiveInteger(intake.windowSeconds)))
      throw invalidField('/intakeLimit', 'must be REQUESTS/WINDOW_SECONDS in whole numbers of at least 1');
    if (newVinsPerDay !== null && !(Number.isSafeInteger(newVinsPerDay) && newVinsPerDay >= 0))
      throw invalidField('/newVinsPerDay', 'must be a whole number of at least 0');
    if (!(await this.store.getPrincipal('partners', input.partnerId))) throw new TrailwireError('not_found', `No partner ${input.partnerId}.`);
    const limits = { ...input, updatedAt: this.clock.now() };
    await this.store.setPartnerIntakeLimits(limits);
    this.options.onPartnerPolicyChanged?.({ partnerId: input.partnerId });
    return limits;
  }

  /** A partner's own overrides, or null when it has the defaults. */
  async partnerLimits(partnerId: string): Promise<PartnerIntakeLimits | null> {
    if (!(await this.store.getPrincipal('partners', partnerId))) throw new TrailwireError('not_found', `No partner ${partnerId}.`);
    return this.store.getPartnerIntakeLimits(partnerId);
  }

  private async requirePrincipals(input: { customerId: string; partnerId: string }): Promise<void> {
    if (!(await this.store.getPrincipal('customers', input.customerId))) throw new TrailwireError('not_found', `No customer ${input.customerId}.`);
    if (!(await this.store.getPrincipal('partners', input.partnerId))) throw new TrailwireError('not_found', `No partner ${input.partnerId}.`);
  }

  async setTrailerActive(trailerId: string, active: boolean): Promise<void> {
    if (!(await this.store.setTrailerActive(trailerId, active))) throw new TrailwireError('not_found', `No trailer ${trailerId}.`);
    await this.changed({ id: trailerId });
  }

  /** Switches a device on or off; its trailer's status is recounted at once. Answers the trailer. */
  async setDeviceActive(deviceId: string, active: boolean): Promise<Trailer> {
    const trailer = await this.store.setDeviceActive(deviceId, active, this.clock.now());
    if (!trailer) throw new TrailwireError('not_found', `No device ${deviceId}.`);
    return this.changed(trailer);
  }

  /**
   * Notes the change for the LiveFeed. After the change's own commit: a crash in between loses the
   * live notice only (the read API shows the change, and the trailer's next update carries it).
   */
  private async changed<T extends { id: string }>(trailer: T): Promise<T> {
    await this.store.noteTrailerChange(trailer.id, this.clock.now());
    this.options.onTrailerChanged?.();
    return trailer;
  }
}

function isPositiveInteger(value: number): boolean {
  return Number.isSafeInteger(value) && value >= 1;
}
