import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { renderJUnitReport } from '../../simulator/junit-report.ts';
import type { SimulationReport } from '../../simulator/report.ts';
import { readJUnit } from './support/junit-shape.ts';

/** The parts of a report the JUnit view reads. */
function reportWith(overrides: Partial<SimulationReport>): SimulationReport {
  return {
    scenario: 'steady',
    mode: 'embedded',
    seed: 1,
    durationS: 10,
    rate: { target: 50, achieved: 49.8 },
    sent: 498,
    checks: [],
    thresholds: [],
    ...overrides,
  } as SimulationReport;
}

describe('the JUnit report', () => {
  it('one testcase per invariant and per threshold, the failed ones with their figures, readable as JUnit', () => {
    const xml = renderJUnitReport(
      reportWith({
        checks: [
          { name: 'no 5xx', judged: '498 responses', passed: true, violations: [] },
          // What a server answered lands in the text: markup and terminal escapes must not break the XML.
          { name: 'every accepted payload processed', judged: '300 accepted payloads', passed: false, violations: ['2 failed <processing> & "more"', 'reason: \u001b[2J\u0007bell'] },
        ],
        thresholds: [
          { threshold: 'p99<500ms', actual: '2481 ms', passed: false },
          { threshold: 'rate>=95%', actual: '99.6 %', passed: true },
        ],
      }),
      new Date(Date.UTC(2026, 10, 28, 23, 0, 0, 123)),
    );
    const cases = readJUnit(xml);
    assert.deepEqual(
      cases.map((c) => [c.suite, c.name, c.failure?.message ?? null]),
      [
        ['trailwire.simulate.invariants', 'no 5xx (498 responses)', null],
        ['trailwire.simulate.invariants', 'every accepted payload processed (300 accepted payloads)', 'every accepted payload processed: 2 violation(s); judged 300 accepted payloads'],
        ['trailwire.simulate.thresholds', 'threshold p99<500ms', 'p99<500ms breached: measured 2481 ms'],
        ['trailwire.simulate.thresholds', 'threshold rate>=95%', null],
      ],
    );
    assert.equal(cases[1]!.failure!.text, '2 failed <processing> & "more"\nreason: \\u001b[2J\\u0007bell');
    assert.match(xml, /timestamp="2026-11-28T23:00:00"/);
  });
});
