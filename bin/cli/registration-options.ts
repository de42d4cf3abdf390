/**
 * The options `trailers create` and `trailers import` share: how a VIN that intake met before anyone
 * registered it is taken into a fleet (`AdminService.registerTrailer`, issue 37).
 */
import type { Argv } from 'yargs';

/** Adds `--adopt-unassigned-data` and `--require-grants`. */
export function withRegistrationOptions<T>(yargs: Argv<T>) {
  return yargs
    .option('adopt-unassigned-data', {
      type: 'boolean',
      default: false,
      describe:
        "Take what intake stored for a VIN before it was registered into the fleet even when the customer takes intake only from its granted partners (the store does not record which partner sent it); without it such a VIN is refused",
    })
    .option('require-grants', {
      type: 'boolean',
      default: false,
      describe: 'As serve --require-grants: every customer takes intake only from its granted partners (env TRAILWIRE_REQUIRE_GRANTS, shared with serve)',
    });
}
