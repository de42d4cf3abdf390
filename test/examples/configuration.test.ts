/**
 * docs/configuration.md names every option there is: each option `trailwire --help` and
 * `trailwire serve --help` print (with its environment variable and the default the help shows), each
 * field of `ServerOptions` and of `TrailwireOptions` (read from their declarations). An option added
 * without a line in the guide fails here.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { describe, it } from 'node:test';
import { REPO_ROOT } from './run-example.ts';
import { TRAILWIRE_BIN } from '../support/cli.ts';

const guide = readFileSync(new URL('../../docs/configuration.md', import.meta.url), 'utf8');
const bin = TRAILWIRE_BIN;
/** Options yargs adds itself. */
const BUILT_IN = new Set(['help', 'version']);

/** The options of one `--help` text, with the default it shows (`[default: ...]`), if any. */
async function helpOptions(args: string[]): Promise<{ name: string; fallback: string | undefined }[]> {
  const { stdout } = await promisify(execFile)(process.execPath, [bin, ...args, '--help'], { cwd: REPO_ROOT });
  // An option starts at column 2; its text may wrap (deeper indented) until the next option.
  const entries = stdout.split(/\n(?= {2}--)/).filter((entry) => /^ {2}--/.test(entry));
  return entries
    .map((entry) => ({ name: /^ {2}--([a-z-]+)/.exec(entry)![1]!, fallback: /\[default: ([^\]]*)\]/.exec(entry.replace(/\s+/g, ' '))?.[1] }))
    .filter(({ name }) => !BUILT_IN.has(name));
}

/** The row of the guide's command-line table that documents `--name`. */
const rowOf = (name: string) => guide.split('\n').find((line) => line.startsWith('|') && new RegExp(`\`(serve )?--(no-)?${name}[\` ]`).test(line));

/** Field names of an exported interface, read from its declaration. */
function fieldsOf(file: string, name: string): string[] {
  const source = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
  const start = source.indexOf(`export interface ${name} {`);
  assert.ok(start >= 0, `${file} declares ${name}`);
  const body = source.slice(start, source.indexOf('\n}', start));
  return [...body.matchAll(/^ {2}(\w+)\??:/gm)].map((match) => match[1]!);
}

describe('docs/configuration.md', () => {
  for (const command of [[], ['serve']])
    it(`documents every option of trailwire ${command.join(' ')} --help, its variable and its default`, async () => {
      for (const { name, fallback } of await helpOptions(command)) {
        const row = rowOf(name);
        assert.ok(row, `--${name} has a row`);
        const variable = `TRAILWIRE_${name.toUpperCase().replaceAll('-', '_')}`;
        assert.ok(row.includes(variable), `--${name}: its row names ${variable}`);
        // Lists (`[]`) and the worker switch (documented as `--no-intake-worker`, "worker on") show no literal default.
        if (fallback !== undefined && !fallback.startsWith('[') && name !== 'intake-worker')
          assert.ok(row.includes(`\`${fallback.replace(/^"|"$/g, '')}\``), `--${name}: its row shows the default ${fallback}`);
      }
    });

  it('documents every field of ServerOptions and of TrailwireOptions', () => {
    for (const [file, name] of [['adapters/server/index.ts', 'ServerOptions'], ['core/trailwire.ts', 'TrailwireOptions']] as const)
      for (const field of fieldsOf(file, name)) assert.match(guide, new RegExp(`^\\| [^|]*\`${field}\``, 'm'), `${name}.${field} is in the guide`);
  });
});
