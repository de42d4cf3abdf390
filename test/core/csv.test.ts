/**
 * CSV both ways (core/csv.ts): RFC 4180 quoting of exported cells, the formula guard on text cells
 * only, and the reading of one import line, quotes undone and malformed lines refused.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { csvCell, csvRow, parseCsvLine } from '../../core/csv.ts';

describe('csv', () => {
  it('quotes a cell holding a comma, a quote, CR or LF, doubling its quotes; rows end with CRLF', () => {
    assert.equal(csvRow(['plain', 'a,b', 'say "hi"', 'two\nlines', 'cr\rhere', null, 12.5, false]), 'plain,"a,b","say ""hi""","two\nlines","cr\rhere",,12.5,false\r\n');
  });

  it('a text cell starting with =, +, -, @, tab or CR is prefixed with an apostrophe and quoted; numbers are not', () => {
    for (const risky of ['=1+2', '+1', '-2+3', '@SUM(A1)', '\tx', '\rx'])
      assert.equal(csvCell(risky), `"'${risky}"`, JSON.stringify(risky));
    assert.equal(csvCell('=HYPERLINK("u")'), `"'=HYPERLINK(""u"")"`);
    assert.equal(csvCell(-122.6), '-122.6');
    assert.equal(csvCell('a=b'), 'a=b', 'only the first character matters');
  });

  it('reads a line back into its cells, and refuses one that is not valid CSV', () => {
    assert.deepEqual(parseCsvLine('1TW,U-1,true'), ['1TW', 'U-1', 'true']);
    assert.deepEqual(parseCsvLine('a,,'), ['a', '', '']);
    assert.deepEqual(parseCsvLine('"a,b","say ""hi""",""'), ['a,b', 'say "hi"', '']);
    assert.deepEqual(parseCsvLine(''), ['']);
    for (const bad of ['"open', '"closed"x,y', 'a"b,c']) assert.equal(parseCsvLine(bad), null, bad);
  });
});
