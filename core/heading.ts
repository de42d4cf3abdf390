/**
 * Compass bearings to the 8-point cardinal headings of the read API and the LiveFeed (contract 10).
 * Each heading covers a 45° sector centred on its direction: N covers [337.5°, 360°] and [0°, 22.5°),
 * NE covers [22.5°, 67.5°), and so on clockwise. A bearing exactly on a boundary belongs to the
 * sector clockwise of it (22.5° is NE), so every bearing has exactly one heading.
 */
import { HEADINGS, type Heading } from './model.ts';

const SECTOR_DEGREES = 360 / HEADINGS.length;

/**
 * The 8-point cardinal heading of a compass bearing in degrees. Any finite number is accepted and
 * taken modulo 360 (so -90 is W and 450 is E); a non-finite bearing throws a `RangeError`.
 */
export function cardinalHeading(degrees: number): Heading {
  if (!Number.isFinite(degrees)) throw new RangeError(`cardinalHeading: bearing must be a finite number, got ${degrees}`);
  const normalized = ((degrees % 360) + 360) % 360;
  // Shifting by half a sector turns "nearest direction" into a plain floor division.
  const sector = Math.floor((normalized + SECTOR_DEGREES / 2) / SECTOR_DEGREES) % HEADINGS.length;
  return HEADINGS[sector]!;
}
