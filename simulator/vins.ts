/**
 * Fake but valid VINs: 17 characters of the VIN alphabet with a correct check digit, from faker so a
 * seed gives the same VINs every run.
 */
import type { Faker } from '@faker-js/faker';
import { withCheckDigit } from '../core/vin.ts';

const VIN_ALPHABET = '0123456789ABCDEFGHJKLMNPRSTUVWXYZ';

export function fakeVin(faker: Faker): string {
  let body = '';
  for (let i = 0; i < 17; i++) body += faker.helpers.arrayElement(VIN_ALPHABET.split(''));
  return withCheckDigit(body);
}
