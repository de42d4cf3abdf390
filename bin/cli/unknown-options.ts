/**
 * Unknown options are errors (contract 9, issue 31 finding 7): `serve --prot 1234` must not start on
 * 8080 as if nothing was said. yargs' strict mode does the checking; this module makes it fit the
 * `TRAILWIRE_*` environment and names the nearest known option.
 *
 * yargs' `.env('TRAILWIRE')` turns every `TRAILWIRE_*` variable into an argument, and strict mode would
 * then refuse `customers create` in a shell that exports `TRAILWIRE_PORT` for `serve` (or the test
 * suite's `TRAILWIRE_TEST_DATABASE_URL`). So a middleware that runs before yargs' validation drops the
 * arguments that only a variable set and that the running command does not know: the command line is
 * held to the command's options, the environment is shared by every command.
 */
import type { Arguments } from 'yargs';

/** What a middleware's second argument is at run time (yargs' types leave it out): the command's yargs. */
interface CommandParser {
  getOptions(): { key: Record<string, unknown>; alias: Record<string, string[]> };
}

const ENV_PREFIX = 'TRAILWIRE_';

const camelCase = (name: string): string => name.replace(/[-_]+([a-zA-Z0-9])/g, (_, next: string) => next.toUpperCase());

/** The option names typed on the command line (before `--`), camel-cased, `--no-x` as `x`. */
function typedOptionNames(argv: readonly string[]): Set<string> {
  const names = new Set<string>();
  for (const token of argv) {
    if (token === '--') break;
    const long = /^--(?:no-)?([^=]+)/.exec(token);
    if (long) names.add(camelCase(long[1]!));
    else if (/^-[^-]/.test(token)) for (const letter of token.slice(1).split('=')[0]!) names.add(letter);
  }
  return names;
}

/** Every name the command being run knows (its options, their aliases, in both spellings). */
function knownNames(options: ReturnType<CommandParser['getOptions']>): Set<string> {
  const names = new Set<string>(['_', '$0']);
  for (const key of [...Object.keys(options.key), ...Object.entries(options.alias).flatMap(([key, aliases]) => [key, ...aliases])]) {
    names.add(key);
    names.add(camelCase(key));
  }
  return names;
}

/** The options the command last parsed knows, for `nearestOption` (kebab-case, as `--help` shows them). */
let lastKnownOptions: string[] = [];

/**
 * A yargs middleware (register it to run before validation) that removes the arguments set only by a
 * `TRAILWIRE_*` variable the running command does not know, so strict mode judges the command line alone.
 */
export function dropForeignEnvironment(argv: readonly string[], env: NodeJS.ProcessEnv = process.env) {
  const typed = typedOptionNames(argv);
  const fromEnvironment = new Set(Object.keys(env).filter((name) => name.startsWith(ENV_PREFIX)).map((name) => camelCase(name.slice(ENV_PREFIX.length).toLowerCase())));
  return (args: Arguments, yargs?: unknown): void => {
    const options = (yargs as CommandParser).getOptions();
    const known = knownNames(options);
    lastKnownOptions = Object.keys(options.key).filter((key) => key.length > 1 && !/[A-Z]/.test(key));
    for (const key of Object.keys(args)) {
      const name = camelCase(key);
      if (!known.has(key) && !known.has(name) && fromEnvironment.has(name) && !typed.has(name)) delete args[key];
    }
  };
}

/**
 * yargs' usage message, said for a person: "Unknown argument: prot, ..." becomes "Unknown option --prot
 * (did you mean --port?)" (the nearest option of the command within two edits, one spelling per
 * option), and recommendCommands' bare "Did you mean create?" names what was typed.
 */
export function explainUsageError(message: string, argv: readonly string[]): string {
  const unknownArguments = /^Unknown arguments?: (.+)$/.exec(message);
  if (unknownArguments) {
    const names = unknownArguments[1]!.split(', ');
    const unique = names.filter((name) => name === kebabCase(name) || !names.includes(kebabCase(name)));
    const described = unique.map((name) => {
      const typed = kebabCase(name);
      if (!argv.some((token) => new RegExp(`^--?(no-)?${escape(typed)}(=|$)`).test(token))) return JSON.stringify(name);
      const hint = nearest(typed, lastKnownOptions);
      return `--${typed}${hint ? ` (did you mean --${hint}?)` : ''}`;
    });
    return `Unknown ${described.every((text) => text.startsWith('--')) ? 'option' : 'argument'}${described.length > 1 ? 's' : ''}: ${described.join(', ')}`;
  }
  const command = /^Did you mean (.+)\?$/.exec(message);
  if (command) {
    const typed = nearest(command[1]!, argv.filter((token) => !token.startsWith('-') && token !== command[1]), 3);
    return typed ? `Unknown command ${JSON.stringify(typed)}: did you mean ${command[1]}?` : message;
  }
  return message;
}

const kebabCase = (name: string): string => name.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);
const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function nearest(word: string, candidates: readonly string[], most = Math.min(2, Math.floor(word.length / 2))): string | undefined {
  return candidates
    .map((candidate) => ({ candidate, distance: editDistance(word, candidate) }))
    .filter(({ distance }) => distance <= most)
    .sort((a, b) => a.distance - b.distance)[0]?.candidate;
}

/** Edit distance counting an adjacent swap as one edit ("prot" is one from "port"). */
export function editDistance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)));
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1);
    }
  }
  return d[a.length]![b.length]!;
}
