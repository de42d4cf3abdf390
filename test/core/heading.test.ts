import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cardinalHeading } from '../../core/heading.ts';

describe('cardinalHeading', () => {
  it('gives each 45° sector its heading, a boundary belonging to the sector clockwise of it', () => {
    const cases: Array<[number, string]> = [
      [0, 'N'], [22.4999, 'N'], [22.5, 'NE'], [45, 'NE'], [67.4999, 'NE'], [67.5, 'E'], [90, 'E'],
      [112.5, 'SE'], [135, 'SE'], [157.5, 'S'], [180, 'S'], [202.5, 'SW'], [225, 'SW'], [247.5, 'W'],
      [270, 'W'], [292.5, 'NW'], [315, 'NW'], [337.4999, 'NW'], [337.5, 'N'], [359.9999, 'N'], [360, 'N'],
    ];
    for (const [degrees, heading] of cases) assert.equal(cardinalHeading(degrees), heading, `${degrees}°`);
  });

  it('takes any finite bearing modulo 360', () => {
    assert.equal(cardinalHeading(-90), 'W');
    assert.equal(cardinalHeading(-0.1), 'N');
    assert.equal(cardinalHeading(450), 'E');
    assert.equal(cardinalHeading(720 + 210), 'SW');
  });

  it('refuses a bearing that is not a finite number', () => {
    for (const bad of [Number.NaN, Infinity, -Infinity]) assert.throws(() => cardinalHeading(bad), RangeError);
  });
});
