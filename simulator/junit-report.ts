/**
 * `--junit FILE`: the run as JUnit XML, the format CI systems read test results from (GitHub Actions'
 * test reporters, GitLab's `artifacts:reports:junit`, Jenkins' JUnit plugin). One suite for the
 * invariants and one for the thresholds, one testcase each, a failed one carrying its figures in
 * the failure's message and its violations in the failure's text. The shape is the common subset
 * those readers share (Jenkins' `junit-10.xsd`): `testsuites` > `testsuite` (name, tests, failures,
 * errors, skipped, time, timestamp) > `properties`, `testcase` (name, classname, time) > `failure`
 * (message, type).
 */
import type { SimulationReport } from './report.ts';

interface Case {
  name: string;
  failure?: { message: string; text: string };
}

/** The report as a JUnit XML document. */
export function renderJUnitReport(report: SimulationReport, now: Date = new Date()): string {
  const invariants: Case[] = report.checks.map((check) => {
    const failure = { message: `${check.name}: ${check.violations.length} violation(s); judged ${check.judged}`, text: check.violations.join('\n') };
    return { name: `${check.name} (${check.judged})`, ...(check.passed ? {} : { failure }) };
  });
  const thresholds: Case[] = report.thresholds.map((threshold) => ({
    name: `threshold ${threshold.threshold}`,
    ...(threshold.passed ? {} : { failure: { message: `${threshold.threshold} breached: measured ${threshold.actual}`, text: report.aborted ? `The traffic was aborted at ${report.aborted.atS} s: ${report.aborted.breached.join(', ')}` : '' } }),
  }));
  const time = String(report.durationS);
  const timestamp = now.toISOString().replace(/\.\d{3}Z$/, '');
  const suite = (name: string, cases: Case[]) => {
    const failures = cases.filter((c) => c.failure).length;
    return [
      `  <testsuite name="${xml(name)}" tests="${cases.length}" failures="${failures}" errors="0" skipped="0" time="${time}" timestamp="${timestamp}">`,
      '    <properties>',
      ...Object.entries({ scenario: report.scenario, mode: report.mode, seed: report.seed, 'rate.target': report.rate.target, 'rate.achieved': report.rate.achieved, sent: report.sent }).map(
        ([key, value]) => `      <property name="${xml(key)}" value="${xml(String(value))}"/>`,
      ),
      '    </properties>',
      ...cases.map((c) =>
        c.failure
          ? `    <testcase name="${xml(c.name)}" classname="${xml(name)}" time="0">\n      <failure message="${xml(c.failure.message)}" type="${name.endsWith('thresholds') ? 'threshold' : 'invariant'}">${xml(c.failure.text)}</failure>\n    </testcase>`
          : `    <testcase name="${xml(c.name)}" classname="${xml(name)}" time="0"/>`,
      ),
      '  </testsuite>',
    ].join('\n');
  };
  const all = [...invariants, ...thresholds];
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="trailwire simulate" tests="${all.length}" failures="${all.filter((c) => c.failure).length}" errors="0" time="${time}">`,
    suite('trailwire.simulate.invariants', invariants),
    suite('trailwire.simulate.thresholds', thresholds),
    '</testsuites>',
    '',
  ].join('\n');
}

/**
 * Text for an XML attribute or element: the five markup characters escaped, and the characters XML
 * 1.0 cannot hold at all (control characters other than tab and newline, which a server's answer
 * could carry) written as `\uXXXX` text instead.
 */
function xml(text: string): string {
  return text
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&apos;');
}
