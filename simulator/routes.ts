/**
 * Plausible trailer movement for simulated traffic: a trailer drives between waypoints at highway
 * speed with small variations, and stops now and then. Positions move by what the speed
 * and elapsed time allow, so the history looks like a truck on a road, not random dots.
 */
import type { Faker } from '@faker-js/faker';

const EARTH_RADIUS_MILES = 3958.8;
const DEG = Math.PI / 180;

/** Continental-US start points, so routes stay on land most of the time. */
const CITIES: Array<[number, number]> = [
  [41.8781, -87.6298], [32.7767, -96.797], [33.749, -84.388], [39.7392, -104.9903], [34.0522, -118.2437],
  [40.7128, -74.006], [35.1495, -90.049], [39.0997, -94.5786], [47.6062, -122.3321], [29.7604, -95.3698],
];

export interface RouteState {
  lat: number;
  long: number;
  bearingDeg: number;
  speedMph: number;
}

/** A random starting state near a city. */
export function startRoute(faker: Faker): RouteState {
  const [lat, long] = faker.helpers.arrayElement(CITIES);
  return {
    lat: lat + faker.number.float({ min: -0.3, max: 0.3 }),
    long: long + faker.number.float({ min: -0.3, max: 0.3 }),
    bearingDeg: faker.number.float({ min: 0, max: 360 }),
    speedMph: faker.number.float({ min: 45, max: 65 }),
  };
}

/** Advances the trailer by `elapsedMs`: speed drifts, the road bends a little, sometimes it stops. */
export function advanceRoute(faker: Faker, state: RouteState, elapsedMs: number): RouteState {
  const stopped = state.speedMph < 1;
  const speedMph = stopped
    ? faker.datatype.boolean({ probability: 0.3 }) ? faker.number.float({ min: 35, max: 55 }) : 0
    : faker.datatype.boolean({ probability: 0.03 })
      ? 0
      : clamp(state.speedMph + faker.number.float({ min: -4, max: 4 }), 30, 72);
  const bearingDeg = (state.bearingDeg + faker.number.float({ min: -5, max: 5 }) + 360) % 360;
  const distance = (speedMph * elapsedMs) / 3_600_000;
  const angular = distance / EARTH_RADIUS_MILES;
  const lat1 = state.lat * DEG;
  const lon1 = state.long * DEG;
  const theta = bearingDeg * DEG;
  const lat2 = Math.asin(Math.sin(lat1) * Math.cos(angular) + Math.cos(lat1) * Math.sin(angular) * Math.cos(theta));
  const lon2 = lon1 + Math.atan2(Math.sin(theta) * Math.sin(angular) * Math.cos(lat1), Math.cos(angular) - Math.sin(lat1) * Math.sin(lat2));
  return { lat: lat2 / DEG, long: (((lon2 / DEG + 540) % 360) - 180), bearingDeg, speedMph };
}

function clamp(value: number, min: number, max: number): number {
  return Math.min(max, Math.max(min, value));
}
