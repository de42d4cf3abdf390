/**
 * A trailer's place on the demo's roads (`demo-geography.ts`): the corridor leg it drives and how far
 * along it is. The demo's day (`demo-trips.ts`) drives its trailers with it, and the simulator
 * continues a deployment's trailers with it from where their last fix left them (`traffic.ts`), so a
 * simulated track follows the same interstates as the demo's history instead of leaving them.
 */
import type { Faker } from '@faker-js/faker';
import { bearingBetween, CITIES, citiesOf, legsFrom, milesBetween, type Leg, type Place, type Region } from './demo-geography.ts';

/** A trailer's place on its corridor: the leg it drives and how far along it is. */
export class RouteCursor {
  private leg!: Leg;
  /** Miles from the leg's start to each point of its path. */
  private milestones: number[] = [];
  private miles = 0;

  private constructor(leg: Leg, miles: number) {
    this.enter(leg);
    this.miles = miles;
  }

  /** A random point of a random corridor of the region, away from its cities. */
  static somewhereIn(faker: Faker, region: Region): RouteCursor {
    const leg = faker.helpers.arrayElement(legsFrom(faker.helpers.arrayElement(citiesOf(region))));
    const cursor = new RouteCursor(leg, 0);
    cursor.miles = faker.number.float({ min: 0.05, max: 0.9 }) * cursor.length();
    return cursor;
  }

  /**
   * The place on a demo road nearest to `place`, driven the way of `bearingDeg` (of a corridor's two
   * directions, the one closer to it), or undefined when no road passes within `withinMiles`: that
   * place is not on the demo's map.
   */
  static nearest(place: Place, bearingDeg: number, withinMiles = 5): RouteCursor | undefined {
    let best: { leg: Leg; miles: number; distance: number; turn: number } | undefined;
    for (const leg of EVERY_LEG) {
      let along = 0;
      for (let i = 1; i < leg.path.length; i++) {
        const from = leg.path[i - 1]!;
        const to = leg.path[i]!;
        const span = milesBetween(from, to);
        const f = projection(place, from, to);
        const point = { lat: from.lat + (to.lat - from.lat) * f, long: from.long + (to.long - from.long) * f };
        const distance = milesBetween(place, point);
        const turn = angleBetween(bearingBetween(from, to), bearingDeg);
        // Nearer wins; at the same spot (a corridor's two directions, or a city where legs meet), the direction closer to the bearing.
        if (!best || distance < best.distance - 0.01 || (Math.abs(distance - best.distance) <= 0.01 && turn < best.turn))
          best = { leg, miles: along + span * f, distance, turn };
        along += span;
      }
    }
    if (!best || best.distance > withinMiles) return undefined;
    const cursor = new RouteCursor(best.leg, 0);
    cursor.miles = Math.min(best.miles, cursor.length());
    return cursor;
  }

  remainingMiles(): number {
    return this.length() - this.miles;
  }

  /** Where the trailer is, and the bearing of the road there. */
  position(): Place & { bearing: number } {
    const path = this.leg.path;
    let i = 1;
    while (i < path.length - 1 && this.milestones[i]! < this.miles) i++;
    const from = path[i - 1]!;
    const to = path[i]!;
    const span = this.milestones[i]! - this.milestones[i - 1]!;
    const f = span === 0 ? 0 : Math.min(1, Math.max(0, (this.miles - this.milestones[i - 1]!) / span));
    return { lat: from.lat + (to.lat - from.lat) * f, long: from.long + (to.long - from.long) * f, bearing: bearingBetween(from, to) };
  }

  /** Drives on; true when this reached the leg's city (and stopped there). */
  advance(miles: number): boolean {
    this.miles = Math.min(this.length(), this.miles + miles);
    return this.miles >= this.length();
  }

  /** From the city reached, onto another corridor; back the same way only from a dead end. */
  turnOntoNextLeg(faker: Faker): void {
    const onward = legsFrom(this.leg.to);
    const others = onward.filter((leg) => leg.corridor !== this.leg.corridor);
    this.enter(faker.helpers.arrayElement(others.length > 0 ? others : onward));
    this.miles = 0;
  }

  private enter(leg: Leg): void {
    this.leg = leg;
    this.milestones = [0];
    for (let i = 1; i < leg.path.length; i++) this.milestones.push(this.milestones[i - 1]! + milesBetween(leg.path[i - 1]!, leg.path[i]!));
  }

  private length(): number {
    return this.milestones.at(-1)!;
  }
}

/** Every corridor in both directions. */
const EVERY_LEG: readonly Leg[] = CITIES.flatMap((city) => legsFrom(city)).filter(
  (leg, index, legs) => legs.findIndex((other) => other.corridor === leg.corridor && other.from === leg.from) === index,
);

/** Where along the segment `from`–`to` (0 to 1) the point nearest to `place` lies, on a local flat map. */
function projection(place: Place, from: Place, to: Place): number {
  const scale = Math.cos(((from.lat + to.lat) / 2) * (Math.PI / 180));
  const dx = (to.long - from.long) * scale;
  const dy = to.lat - from.lat;
  const length2 = dx * dx + dy * dy;
  if (length2 === 0) return 0;
  const t = ((place.long - from.long) * scale * dx + (place.lat - from.lat) * dy) / length2;
  return Math.min(1, Math.max(0, t));
}

/** The smaller angle between two bearings, 0 to 180 degrees. */
function angleBetween(a: number, b: number): number {
  const d = Math.abs(a - b) % 360;
  return d > 180 ? 360 - d : d;
}
