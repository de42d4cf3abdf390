/**
 * Operator actions behind the `trailwire` CLI and the demo seed: fleets, trailer registration
 * (a VIN that intake already created unassigned is assigned instead of duplicated), and switching
 * trailers and devices off and on. Every change of a trailer is noted in the store's change feed,
 * which carries it to the LiveFeed subscribers of every serving process (`core/trailer-changes.ts`).
 */
import type { Clock, IdGenerator } from './clock.ts';
import { invalidField, TrailwireError } from './errors.ts';
import type { Fleet, Trailer } from './model.ts';
import type { FleetAdminStore, PrincipalStore, TrailerChangeStore } from './store.ts';
import { parseVin } from './vin.ts';

export class AdminService {
  constructor(
    private readonly store: FleetAdminStore & PrincipalStore & TrailerChangeStore,
    private readonly clock: Clock,
    private readonly ids: IdGenerator,
    private readonly options: {
      verifyVinCheckDigit: boolean;
      /** Called after a change is noted: this process's change feed reads it at once. */
      onTrailerChanged?: () => void;
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
   * the fleet, keeping its history; a VIN already in a fleet is a conflict.
   */
  async registerTrailer(input: { fleetId: number; vin: string; unitId?: string | null }): Promise<Trailer> {
    // A VIN intake already knows is taken as it is: a server started with --no-verify-vin-check-digit
    // accepted it, and the operator must be able to assign it from a command that verifies by default.
    const shaped = parseVin(input.vin, { verifyCheckDigit: false });
    const known = await this.store.findTrailerByVin(shaped);
    const vin = known ? shaped : parseVin(input.vin, { verifyCheckDigit: this.options.verifyVinCheckDigit });
    if (!(await this.store.getFleetById(input.fleetId))) throw new TrailwireError('not_found', `No fleet ${input.fleetId}.`);
    const unitId = input.unitId?.trim() || null;
    if (known) {
      if (known.fleetId !== null)
        throw new TrailwireError('conflict', `VIN ${vin} is already registered in fleet ${known.fleetId}.`);
      return this.changed(await this.store.assignTrailer(known.id, input.fleetId, unitId));
    }
    return this.changed(await this.store.createTrailer({ id: this.ids(), fleetId: input.fleetId, vin, unitId, createdAt: this.clock.now() }));
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
