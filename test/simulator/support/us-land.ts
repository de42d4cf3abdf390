/**
 * Checks of a position against the land outline of the contiguous United States
 * (`us-census-regions.ts`), and distances between positions. Written apart from the simulator's own
 * geography, so that a demo fix is checked against the map, not against the table it was made from.
 */
import { US_CENSUS_REGIONS, type CensusRegion } from './us-census-regions.ts';

export type { CensusRegion };

export interface Position {
  lat: number;
  long: number;
}

/** True when the position lies on land in the region (even-odd rule over every ring). */
export function inRegion(region: CensusRegion, { lat, long }: Position): boolean {
  let inside = false;
  for (const polygon of US_CENSUS_REGIONS[region])
    for (const ring of polygon)
      for (let i = 0, j = ring.length - 2; i < ring.length; j = i, i += 2) {
        const [xi, yi, xj, yj] = [ring[i]!, ring[i + 1]!, ring[j]!, ring[j + 1]!];
        if (yi > lat !== yj > lat && long < ((xj - xi) * (lat - yi)) / (yj - yi) + xi) inside = !inside;
      }
  return inside;
}

/** The region the position lies in, or null at sea or abroad. */
export function regionAt(position: Position): CensusRegion | null {
  return (Object.keys(US_CENSUS_REGIONS) as CensusRegion[]).find((region) => inRegion(region, position)) ?? null;
}

/** Great-circle distance in statute miles. */
export function milesApart(a: Position, b: Position): number {
  const rad = Math.PI / 180;
  const h = Math.sin(((b.lat - a.lat) * rad) / 2) ** 2 + Math.cos(a.lat * rad) * Math.cos(b.lat * rad) * Math.sin(((b.long - a.long) * rad) / 2) ** 2;
  return 2 * 3958.8 * Math.asin(Math.sqrt(h));
}
