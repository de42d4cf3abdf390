/**
 * Vehicle Identification Numbers (contract 2): 17 characters of the VIN alphabet (digits and A–Z
 * without I, O, Q), upper-cased on input, with the ISO 3779 / North American check digit at
 * position 9 verified unless the operator turns that off (some regions do not use it).
 */
import { invalidField } from './errors.ts';

const VIN_SHAPE = /^[0-9A-HJ-NPR-Z]{17}$/;
const WEIGHTS = [8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2];
const LETTER_VALUES: Record<string, number> = {
  A: 1, B: 2, C: 3, D: 4, E: 5, F: 6, G: 7, H: 8,
  J: 1, K: 2, L: 3, M: 4, N: 5, P: 7, R: 9,
  S: 2, T: 3, U: 4, V: 5, W: 6, X: 7, Y: 8, Z: 9,
};

/** The check digit (`0`–`9` or `X`) a VIN must carry at position 9. */
export function vinCheckDigit(vin: string): string {
  let sum = 0;
  for (let i = 0; i < 17; i++) {
    const char = vin[i] as string;
    const value = char >= '0' && char <= '9' ? Number(char) : (LETTER_VALUES[char] ?? 0);
    sum += value * (WEIGHTS[i] as number);
  }
  const remainder = sum % 11;
  return remainder === 10 ? 'X' : String(remainder);
}

/**
 * The canonical (upper-case) form of a VIN, or a `validation_failed` error on `path` saying what is
 * wrong with it.
 */
export function parseVin(raw: string, options: { verifyCheckDigit?: boolean; path?: string } = {}): string {
  const path = options.path ?? '/vin';
  const vin = raw.toUpperCase();
  if (vin.length !== 17) throw invalidField(path, `a VIN has 17 characters, got ${raw.length}`);
  if (!VIN_SHAPE.test(vin)) throw invalidField(path, 'a VIN uses only digits and the letters A-Z except I, O and Q');
  if (options.verifyCheckDigit !== false) {
    const expected = vinCheckDigit(vin);
    if (vin[8] !== expected) throw invalidField(path, `the check digit (position 9) should be ${expected}`);
  }
  return vin;
}

/** A VIN with its check digit set: turns any 17 VIN-alphabet characters into a valid VIN. */
export function withCheckDigit(vin: string): string {
  return vin.slice(0, 8) + vinCheckDigit(vin) + vin.slice(9);
}
