import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TrailwireError } from '../../core/errors.ts';
import { parseVin, vinCheckDigit, withCheckDigit } from '../../core/vin.ts';

function reason(raw: string, options?: { verifyCheckDigit?: boolean }): string {
  try {
    parseVin(raw, options);
  } catch (error) {
    assert.ok(error instanceof TrailwireError && error.code === 'validation_failed');
    return error.errors?.[0]?.message ?? '';
  }
  return 'valid';
}

describe('VINs', () => {
  it('accepts real VINs and upper-cases input', () => {
    assert.equal(parseVin('1HGCM82633A004352'), '1HGCM82633A004352');
    assert.equal(parseVin('1m8gdm9axkp042788'), '1M8GDM9AXKP042788');
    assert.equal(vinCheckDigit('1M8GDM9AXKP042788'), 'X');
  });
  it('says what is wrong', () => {
    assert.match(reason('1HGCM82633A00435'), /17 characters/);
    assert.match(reason('1HGCM82633A00435I'), /except I, O and Q/);
    assert.match(reason('1HGCM82643A004352'), /check digit \(position 9\) should be 3/);
  });
  it('skips the check digit when the operator turns it off', () => {
    assert.equal(reason('1HGCM82643A004352', { verifyCheckDigit: false }), 'valid');
  });
  it('withCheckDigit makes any VIN-alphabet string valid', () => {
    assert.equal(reason(withCheckDigit('ABCDEFGH0JKLMNPRS')), 'valid');
  });
});
