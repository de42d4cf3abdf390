/**
 * The shape JUnit readers expect (Jenkins' junit-10.xsd, which GitHub Actions' and GitLab's readers
 * accept too), checked on a parsed document: `testsuites` > `testsuite` (name, tests, failures,
 * errors, skipped, time, timestamp) > optional `properties` first, then `testcase` (name, classname,
 * time) each with at most one `failure` (message, type); counts that agree with the cases.
 */
import assert from 'node:assert/strict';
import { parseXml, type XmlElement } from '../../support/xml.ts';

const DECIMAL = /^\d+(\.\d+)?$/;
const INTEGER = /^\d+$/;
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/;

/** Parses `text` and asserts the JUnit shape; answers the cases by suite, each with its failure if any. */
export function readJUnit(text: string): Array<{ suite: string; name: string; failure?: { message: string; text: string } }> {
  const root = parseXml(text);
  assert.equal(root.name, 'testsuites');
  const cases: Array<{ suite: string; name: string; failure?: { message: string; text: string } }> = [];
  let total = 0;
  let failed = 0;
  for (const suite of root.children) {
    assert.equal(suite.name, 'testsuite');
    for (const attribute of ['name', 'tests', 'failures', 'errors', 'skipped', 'time', 'timestamp']) assert.ok(attribute in suite.attributes, `testsuite lacks ${attribute}`);
    for (const attribute of ['tests', 'failures', 'errors', 'skipped']) assert.match(suite.attributes[attribute]!, INTEGER);
    assert.match(suite.attributes.time!, DECIMAL);
    assert.match(suite.attributes.timestamp!, TIMESTAMP);
    const children = [...suite.children];
    if (children[0]?.name === 'properties') {
      for (const property of children.shift()!.children) {
        assert.equal(property.name, 'property');
        assert.ok('name' in property.attributes && 'value' in property.attributes);
      }
    }
    let suiteFailures = 0;
    for (const testcase of children) {
      assert.equal(testcase.name, 'testcase', `only testcases after properties, got <${testcase.name}>`);
      assert.ok(testcase.attributes.name && testcase.attributes.classname, 'testcase needs name and classname');
      assert.match(testcase.attributes.time!, DECIMAL);
      assert.ok(testcase.children.length <= 1);
      const failure: XmlElement | undefined = testcase.children[0];
      if (failure) {
        assert.equal(failure.name, 'failure');
        assert.ok('message' in failure.attributes && 'type' in failure.attributes);
        suiteFailures++;
      }
      cases.push({ suite: suite.attributes.name!, name: testcase.attributes.name!, ...(failure ? { failure: { message: failure.attributes.message!, text: failure.text } } : {}) });
    }
    assert.equal(Number(suite.attributes.tests), children.length);
    assert.equal(Number(suite.attributes.failures), suiteFailures);
    total += children.length;
    failed += suiteFailures;
  }
  assert.equal(Number(root.attributes.tests), total);
  assert.equal(Number(root.attributes.failures), failed);
  return cases;
}
