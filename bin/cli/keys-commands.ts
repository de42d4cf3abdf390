/**
 * `trailwire keys list` and `trailwire keys rotate [--revoke-previous]` (issue 17): the token-signing
 * keys and their lifecycle (`core/signing-keys.ts`). A rotation is written to the store; running
 * servers on the same store see it at their next key refresh (5 s by default), so it works from this
 * separate process on SQLite and on PostgreSQL alike.
 */
import type { Argv, CommandModule } from 'yargs';
import type { SigningKeyStatus } from '../../core/signing-keys.ts';
import { rfc3339 } from '../../core/views.ts';
import { auditOperatorCommand } from './audit.ts';
import { runWithCore, type StoreArguments } from './open-core.ts';
import { printResult } from './output.ts';

type Common = StoreArguments & { json: boolean };

/** A key as `keys list --json` shows it. */
function keyView(key: SigningKeyStatus) {
  return {
    kid: key.kid,
    alg: key.alg,
    created: rfc3339(key.createdAt),
    status: key.status,
    ...(key.until === undefined ? {} : { until: rfc3339(key.until) }),
    ...(key.revokedAt === undefined ? {} : { revokedAt: rfc3339(key.revokedAt) }),
    storage: key.storage,
  };
}

function statusText(key: ReturnType<typeof keyView>): string {
  if (key.status === 'previous') return `previous until ${key.until}`;
  if (key.status === 'revoked') return `revoked ${key.revokedAt}`;
  return key.status;
}

const list: CommandModule<Common, Common> = {
  command: 'list',
  describe: 'List the token-signing keys: kid, algorithm, created, status (current, previous until <time>, expired, revoked)',
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const keys = trailwire.keys.list().map(keyView);
      const human = keys.map((key) => `${key.kid}  ${key.alg}  ${key.created}  ${statusText(key)}${key.storage === 'file' ? '  (key file)' : ''}`).join('\n');
      printResult(args, { data: keys }, human || 'no signing keys');
    }),
};

const rotate: CommandModule<Common, Common & { 'revoke-previous': boolean; algorithm?: 'RS256' | 'ES256' }> = {
  command: 'rotate',
  describe: 'Sign with a new key from now on; the previous one verifies until its last token expires (--revoke-previous: at once no more)',
  builder: (yargs: Argv<Common>) =>
    yargs
      .option('revoke-previous', {
        type: 'boolean',
        default: false,
        describe: 'Revoke the previous keys now: their tokens answer 401 and their LiveFeed streams end (for a leaked key)',
      })
      .option('algorithm', { choices: ['RS256', 'ES256'] as const, describe: "The new key's algorithm. Default: the current key's" }),
  handler: (args) =>
    runWithCore(args, async (trailwire) => {
      const { kid, revoked } = await trailwire.keys.rotate({ revokePrevious: args['revoke-previous'], algorithm: args.algorithm });
      const previous = trailwire.keys.list().filter((key) => key.status === 'previous').map(keyView);
      await auditOperatorCommand('keys rotate', { kid, revoked, revokePrevious: args['revoke-previous'] });
      const human = [
        `signing key ${kid} signs from now on (running servers switch within their key refresh, 5 s by default)`,
        ...previous.map((key) => `previous key ${key.kid} verifies until ${key.until}`),
        ...revoked.map((old) => `revoked ${old}: its tokens are refused and its LiveFeed streams end`),
      ].join('\n');
      printResult(args, { kid, revoked, previous: previous.map((key) => ({ kid: key.kid, until: key.until })) }, human);
    }),
};

export const keysCommand: CommandModule<Common, Common> = {
  command: 'keys <action>',
  describe: 'List and rotate the token-signing keys',
  builder: (yargs) => yargs.command([list, rotate] as CommandModule<Common, any>[]).demandCommand(1, 'Choose an action: keys --help'),
  handler: () => {},
};
